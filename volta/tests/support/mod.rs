//! Shared by the tests of the suite: the GPU's turn ([`gpu_shared`], [`gpu_alone`]),
//! SmolLM2-135M's file, and the GGUF files tests write ([`gguf_writer`]).
use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub mod gguf_writer;

/// The GPU's settings (fusion, tiles, precision), its counters and its capture are
/// process-wide, and the suite's tests share one process.
static GPU: RwLock<()> = RwLock::new(());

/// Held by a GPU test that runs with the default settings and counts nothing:
/// such tests run side by side.
#[cfg(feature = "gpu")]
pub fn gpu_shared() -> RwLockReadGuard<'static, ()> {
    GPU.read().unwrap_or_else(|p| p.into_inner())
}

/// Held by a GPU test that changes a setting, counts pipelines or bind groups, or
/// captures a replay: it runs with no other GPU test beside it.
#[cfg(feature = "gpu")]
pub fn gpu_alone() -> RwLockWriteGuard<'static, ()> {
    GPU.write().unwrap_or_else(|p| p.into_inner())
}

/// The model file: `$VOLTA_SMOLLM2`, which must exist when set (`scripts/test.sh`
/// sets it, so CI never skips), else the copy `scripts/fetch_model.py` keeps in
/// Volta's cache folder (`$VOLTA_CACHE_DIR`, else `$XDG_CACHE_HOME/volta`, else
/// `~/.cache/volta`); `None` (the caller skips, saying so) when neither is there.
pub fn smollm2_path() -> Option<PathBuf> {
    model_path(
        "VOLTA_SMOLLM2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "scripts/fetch_model.py",
    )
}

/// The model file named by `env`, else `file` in Volta's cache folder when it is
/// there (`script` makes it).
fn model_path(env: &str, file: &str, script: &str) -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(path) = var(env) {
        assert!(
            path.exists(),
            "{env} names {}, which does not exist (run {script})",
            path.display()
        );
        return Some(path);
    }
    // The rule of `fetch_model.py` and of the GPU tuning cache.
    let cache = var("VOLTA_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("volta")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("volta")))?;
    let path = cache.join(file);
    path.exists().then_some(path)
}

/// SmolLM2-135M-Instruct requantised by llama.cpp's Q4_K_M recipe
/// (`scripts/requantize_model.sh`, which `scripts/test.sh` runs): `$VOLTA_SMOLLM2_Q4_K_M`,
/// else the file in Volta's cache folder, if it is there.
#[cfg(feature = "tokenizers")]
#[allow(dead_code)] // not every test binary that shares this module loads the model
pub fn smollm2_k_mix() -> Option<(volta::io::gguf::Gguf, volta::models::Tokenizer)> {
    let path = model_path(
        "VOLTA_SMOLLM2_Q4_K_M",
        "SmolLM2-135M-Instruct.Q4_K_M.gguf",
        "scripts/requantize_model.sh",
    );
    open_model(
        path,
        "no SmolLM2 Q4_K_M GGUF (run scripts/requantize_model.sh or set VOLTA_SMOLLM2_Q4_K_M)",
    )
}

/// The parsed model file and its tokenizer; `None` (having said SKIPPED) when the
/// file is not there (see [`smollm2_path`]).
#[cfg(feature = "tokenizers")]
#[allow(dead_code)] // not every test binary that shares this module loads the model
pub fn smollm2() -> Option<(volta::io::gguf::Gguf, volta::models::Tokenizer)> {
    open_model(
        smollm2_path(),
        "no SmolLM2 GGUF (run scripts/fetch_model.py or set VOLTA_SMOLLM2)",
    )
}

/// The model file at `path` and its tokenizer, or `None` after saying SKIPPED and
/// `missing`.
#[cfg(feature = "tokenizers")]
#[allow(dead_code)]
fn open_model(
    path: Option<PathBuf>,
    missing: &str,
) -> Option<(volta::io::gguf::Gguf, volta::models::Tokenizer)> {
    use volta::models::{Tokenizer, TokenizerSpec};
    let Some(path) = path else {
        eprintln!("SKIPPED: {missing}");
        return None;
    };
    let gguf = volta::io::gguf::Gguf::open(&path).expect("the model parses");
    let tokenizer =
        Tokenizer::from_vocab(TokenizerSpec::from_gguf(&gguf).expect("tokenizer metadata"))
            .expect("the vocabulary builds");
    Some((gguf, tokenizer))
}
