//! Volta in the browser: what the demo page (`web/www/`) calls through
//! wasm-bindgen. Built for `wasm32-unknown-unknown` by `scripts/web.sh`.
//!
//! [`Demo`] opens the page's GPU (WebGPU), classifies hand-drawn digits with the
//! main job's CNN ([`DigitsCnn`], the very source of `train/model.rs`), trains that
//! CNN in the tab a few steps per call, and chats with SmolLM2-135M from a GGUF
//! file the user picks. Every method that reads the GPU is async; every error
//! reaches JavaScript as an exception carrying Volta's message.
#![warn(missing_docs)]
#[path = "../../train/model.rs"]
mod model;

pub mod chat;
pub mod digits;
pub mod trainer;

pub use model::DigitsCnn;

use chat::Chat;
use trainer::Trainer;
use volta::backend::gpu::GpuInfo;
use volta::data::Labelled;
use volta::prelude::*;
use wasm_bindgen::prelude::*;

/// What the page shows about the GPU it runs on.
#[wasm_bindgen(getter_with_clone)]
#[derive(Clone, Debug)]
pub struct Adapter {
    /// The adapter's name ("" where the browser hides it).
    pub name: String,
    /// The API wgpu drives it through (`BrowserWebGpu` in a page).
    pub backend: String,
    /// Discrete, integrated, virtual or CPU (SwiftShader is `Cpu`).
    pub device_type: String,
    /// The optional features Volta enabled, comma-separated.
    pub features: String,
    /// Whether the GPU computes on `f16` (`shader-f16`).
    pub f16: bool,
    /// The largest storage binding, in bytes.
    pub max_binding: f64,
}

impl From<&GpuInfo> for Adapter {
    fn from(info: &GpuInfo) -> Self {
        Adapter {
            name: info.name.clone(),
            backend: info.backend.clone(),
            device_type: info.device_type.clone(),
            features: info.features.join(", "),
            f16: info.f16,
            max_binding: info.max_storage_buffer_binding_size as f64,
        }
    }
}

/// What a call to [`Demo::train_steps`] reports.
#[wasm_bindgen]
#[derive(Clone, Copy, Debug)]
pub struct TrainStats {
    /// Steps taken so far in the run.
    pub step: u32,
    /// Steps in the whole run.
    pub total: u32,
    /// The last step's training loss (label-smoothed cross-entropy).
    pub loss: f64,
    /// The last batch's accuracy, before that step's update.
    pub accuracy: f64,
    /// Epochs done, fractional.
    pub epoch: f64,
}

/// Work the GPU has done since it opened: for the curious and for tests.
#[wasm_bindgen]
#[derive(Clone, Copy, Debug)]
pub struct GpuCounters {
    /// Compute pipelines compiled (each is a WGSL shader the browser compiled).
    pub pipelines: u32,
    /// Dispatches recorded.
    pub dispatches: f64,
    /// Command batches submitted to the queue.
    pub submissions: f64,
    /// Times the host waited for the GPU (read-backs, syncs).
    pub host_waits: f64,
}

/// The page's state: the GPU, the digits classifier, a training run, a chat.
#[wasm_bindgen]
pub struct Demo {
    adapter: Adapter,
    cnn: DigitsCnn<Gpu>,
    digits: Option<Labelled>,
    trainer: Option<Trainer<Gpu>>,
    chat: Option<Chat<Gpu>>,
}

fn js(message: impl std::fmt::Display) -> JsError {
    JsError::new(&message.to_string())
}

#[wasm_bindgen]
impl Demo {
    /// Opens the GPU (the page's WebGPU adapter) and makes a classifier with
    /// random weights (see [`load_weights`](Self::load_weights)). Fails with
    /// Volta's message where the browser has no WebGPU or gives no adapter.
    pub async fn open() -> Result<Demo, JsError> {
        panic_hook::install();
        let info = Gpu::init_async().await.map_err(js)?;
        let mut cnn = DigitsCnn::<Gpu>::new(&mut Rng::seed(0));
        cnn.eval();
        Ok(Demo {
            adapter: Adapter::from(&info),
            cnn,
            digits: None,
            trainer: None,
            chat: None,
        })
    }

    /// The GPU the page runs on.
    pub fn adapter(&self) -> Adapter {
        self.adapter.clone()
    }

    /// Work the GPU has done since it opened.
    pub fn counters(&self) -> GpuCounters {
        GpuCounters {
            pipelines: Gpu::pipelines_compiled() as u32,
            dispatches: Gpu::dispatches_recorded() as f64,
            submissions: Gpu::batches_submitted() as f64,
            host_waits: Gpu::host_waits() as f64,
        }
    }

    /// Loads a model-only safetensors checkpoint of [`DigitsCnn`] (as
    /// `volta::io::save` writes it) into the classifier.
    pub fn load_weights(&mut self, bytes: &[u8]) -> Result<(), JsError> {
        let mut cnn = DigitsCnn::<Gpu>::new(&mut Rng::seed(0));
        volta::io::load_bytes("digits.safetensors", bytes, &mut cnn).map_err(js)?;
        cnn.eval();
        self.cnn = cnn;
        Ok(())
    }

    /// The ten class probabilities of one 8×8 image given as 64 row-major pixels in
    /// the dataset's scale, `0..=16`.
    pub async fn classify(&mut self, pixels: Vec<f32>) -> Result<Vec<f32>, JsError> {
        if pixels.len() != digits::PIXELS || !pixels.iter().all(|p| p.is_finite()) {
            return Err(js(format!(
                "classify: expected 64 finite pixels in 0..=16, got {} values",
                pixels.len()
            )));
        }
        let scaled = pixels
            .iter()
            .map(|p| p.clamp(0.0, digits::MAX_PIXEL) / digits::MAX_PIXEL)
            .collect();
        let read = {
            let _no_grad = no_grad();
            let x =
                Tensor::<Rank4<1, 1, 8, 8>, Gpu>::from_vec(scaled).expect("64 pixels are 1×1×8×8");
            self.cnn.forward(&x).try_to_vec_async()
        };
        let logits = read.await.map_err(js)?;
        Ok(softmax(&logits))
    }

    /// Reads the bundled digits (`digits.csv.gz`, as fetched); returns how many
    /// images it holds.
    pub fn load_digits(&mut self, bytes: &[u8]) -> Result<u32, JsError> {
        let data = digits::parse(bytes).map_err(js)?;
        let n = data.len() as u32;
        self.digits = Some(data);
        Ok(n)
    }

    /// Starts training a fresh CNN (random weights from `seed`) for `epochs` over
    /// the digits' training split. Returns the number of steps in the run.
    pub fn start_training(&mut self, epochs: u32, seed: u32) -> Result<u32, JsError> {
        let data = self
            .digits
            .as_ref()
            .ok_or_else(|| js("load the digits first (load_digits)"))?;
        let trainer = Trainer::<Gpu>::new(data, epochs, u64::from(seed));
        let total = trainer.total_steps() as u32;
        self.trainer = Some(trainer);
        Ok(total)
    }

    /// Takes up to `n` training steps, waits for the GPU, and reports the last
    /// one's loss and batch accuracy.
    pub async fn train_steps(&mut self, n: u32) -> Result<TrainStats, JsError> {
        let trainer = self
            .trainer
            .as_mut()
            .ok_or_else(|| js("no training run (start_training)"))?;
        let mut last = None;
        for _ in 0..n {
            if trainer.done() {
                break;
            }
            last = Some(trainer.step());
        }
        let (step, total, per_epoch) = (
            trainer.steps(),
            trainer.total_steps(),
            trainer.steps_per_epoch(),
        );
        let (loss, accuracy) = match last {
            Some(s) => {
                let loss = s.loss.try_to_vec_async();
                let logits = s.logits.try_to_vec_async();
                let loss = loss.await.map_err(js)?;
                let logits = logits.await.map_err(js)?;
                (f64::from(loss[0]), trainer::accuracy(&logits, &s.labels))
            }
            None => (f64::NAN, f64::NAN),
        };
        Ok(TrainStats {
            step: step as u32,
            total: total as u32,
            loss,
            accuracy,
            epoch: step as f64 / per_epoch.max(1) as f64,
        })
    }

    /// Ends the training run: the trained CNN becomes the classifier. Returns its
    /// accuracy on the held-out fifth of the digits.
    pub async fn finish_training(&mut self) -> Result<f64, JsError> {
        let trainer = self
            .trainer
            .take()
            .ok_or_else(|| js("no training run (start_training)"))?;
        let (x, labels) = trainer.test_set();
        let model = trainer.into_model();
        let read = {
            let _no_grad = no_grad();
            model.forward(&x).try_to_vec_async()
        };
        let logits = read.await.map_err(js)?;
        self.cnn = model;
        Ok(trainer::accuracy(&logits, &labels))
    }

    /// Loads a GGUF language model from its bytes (`name` labels errors):
    /// SmolLM2-135M, or the page test's tiny model. Returns which it is.
    pub async fn load_llm(&mut self, name: String, bytes: Vec<u8>) -> Result<String, JsError> {
        self.chat = None;
        let chat = Chat::<Gpu>::load(&name, bytes).map_err(js)?;
        Gpu::sync_async().await.map_err(js)?;
        let what = chat.describe();
        self.chat = Some(chat);
        Ok(what)
    }

    /// Starts a conversation: the user's `prompt`, at most `max_tokens` answer
    /// tokens, sampling at `temperature` among the 40 likeliest tokens (greedy at
    /// 0). Returns the prompt's length in tokens.
    pub fn start_chat(
        &mut self,
        prompt: &str,
        max_tokens: u32,
        temperature: f64,
    ) -> Result<u32, JsError> {
        let chat = self
            .chat
            .as_mut()
            .ok_or_else(|| js("load a GGUF model first"))?;
        let n = chat
            .start(prompt, max_tokens as usize, temperature, 40, 0)
            .map_err(js)?;
        Ok(n as u32)
    }

    /// One decoding step: the next piece of the answer's text (empty while a
    /// character is incomplete), or `undefined` at its end.
    pub async fn next_token(&mut self) -> Result<Option<String>, JsError> {
        let chat = self
            .chat
            .as_mut()
            .ok_or_else(|| js("load a GGUF model first"))?;
        chat.next().await.map_err(js)
    }
}

/// Probabilities from logits.
fn softmax(logits: &[f32]) -> Vec<f32> {
    let top = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits.iter().map(|l| (l - top).exp()).collect();
    let sum: f32 = exp.iter().sum();
    exp.iter().map(|e| e / sum).collect()
}

/// Panics (programmer errors) reach the browser console with their message.
mod panic_hook {
    #[cfg(target_arch = "wasm32")]
    #[wasm_bindgen::prelude::wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = console)]
        fn error(message: &str);
    }

    /// Installs the hook once (natively, the default hook stays).
    pub fn install() {
        #[cfg(target_arch = "wasm32")]
        {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                std::panic::set_hook(Box::new(|info| error(&format!("volta-web: {info}"))));
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint `volta::io::save` writes loads from its bytes into another
    /// model; a file of another model is a message listing the differences.
    #[test]
    fn checkpoints_load_from_bytes() {
        let path =
            std::env::temp_dir().join(format!("volta-web-{}.safetensors", std::process::id()));
        let mut a = DigitsCnn::<Cpu>::new(&mut Rng::seed(1));
        volta::io::save(&path, &mut a).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut b = DigitsCnn::<Cpu>::new(&mut Rng::seed(2));
        volta::io::load_bytes("a.safetensors", &bytes, &mut b).unwrap();
        assert_eq!(a.named_tensors().len(), b.named_tensors().len());
        for ((n, x), (m, y)) in a.named_tensors().into_iter().zip(b.named_tensors()) {
            assert_eq!(n, m);
            assert_eq!(x.to_vec(), y.to_vec(), "{n}");
        }
        let err = volta::io::load_bytes("junk.safetensors", b"not a file", &mut b)
            .unwrap_err()
            .to_string();
        assert!(err.contains("junk.safetensors"), "{err}");
    }

    #[test]
    fn the_bundled_digits_parse() {
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../data/digits.csv.gz"
        ))
        .unwrap();
        let d = digits::parse(&bytes).unwrap();
        assert_eq!(d.len(), 1797);
        assert!(digits::parse(b"1,2\n").is_err());
    }
}
