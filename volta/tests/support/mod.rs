//! Shared by the tests that read GGUF files: SmolLM2-135M's, and those they write
//! ([`gguf_writer`]).
use std::path::PathBuf;

#[allow(dead_code)] // not every test binary that shares this module writes files
pub mod gguf_writer;

/// The model file: `$VOLTA_SMOLLM2`, which must exist when set (`scripts/test.sh`
/// sets it, so CI never skips), else the cache of `scripts/fetch_model.py`
/// (`~/.cache/volta/`); `None` (the caller skips, saying so) when neither is there.
pub fn smollm2_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("VOLTA_SMOLLM2").map(PathBuf::from) {
        assert!(
            path.exists(),
            "VOLTA_SMOLLM2 names {}, which does not exist (run scripts/fetch_model.py)",
            path.display()
        );
        return Some(path);
    }
    let path = PathBuf::from(std::env::var_os("HOME")?)
        .join(".cache/volta/SmolLM2-135M-Instruct.Q4_1.gguf");
    path.exists().then_some(path)
}

/// The parsed model file and its tokenizer; `None` (having said SKIPPED) when the
/// file is not there (see [`smollm2_path`]).
#[allow(dead_code)] // not every test binary that shares this module loads the model
pub fn smollm2() -> Option<(volta::io::gguf::Gguf, volta::models::Tokenizer)> {
    use volta::models::{Tokenizer, TokenizerSpec};
    let Some(path) = smollm2_path() else {
        eprintln!("SKIPPED: no SmolLM2 GGUF (run scripts/fetch_model.py or set VOLTA_SMOLLM2)");
        return None;
    };
    let gguf = volta::io::gguf::Gguf::open(&path).expect("the model parses");
    let tokenizer =
        Tokenizer::from_vocab(TokenizerSpec::from_gguf(&gguf).expect("tokenizer metadata"))
            .expect("the vocabulary builds");
    Some((gguf, tokenizer))
}
