//! `volta.Llama`, `volta.Tokenizer` and `volta.Generation`: SmolLM2-135M from its
//! GGUF file, answering a prompt as a Python iterator of text pieces.
//!
//! The loop is `examples/generate.rs`'s, with the library's parts: SmolLM2's chat
//! template, `volta::models::Sampler` (so a seed draws the same tokens here as
//! there) and `DecodeState` (a decode stream the generator can own). Loading, the
//! prompt and every decode step run with the GIL released.
use crate::device::{self, Device, Where};
use crate::errors::{self, Kind};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use volta::backend::gpu::GpuError;
use volta::backend::{InferenceBackend, Replay};
use volta::io::gguf::{Gguf, GgufError, GgufErrorKind};
use volta::models::llama::SmolLM2_135M;
use volta::models::{
    self, ChatTemplate, DecodeState, KvCache, Message, Sampler, SamplerConfig, TokenizerError,
    TokenizerSpec,
};
use volta::tensor::Activations;
use volta::{Cpu, Gpu, RawTensor};

/// Why a GGUF file did not load; its `From` impl says which exception it raises.
enum LoadError {
    Gguf(GgufError),
    Tokenizer(PathBuf, TokenizerError),
    Gpu(GpuError),
}

impl From<LoadError> for PyErr {
    /// An unreadable file is an `OSError` (`FileNotFoundError`, …); a malformed one a
    /// `FileFormatError` naming the file and, where the reader knows it, the offset;
    /// a GPU failure a `GpuError`.
    fn from(e: LoadError) -> PyErr {
        match e {
            LoadError::Gguf(e) => {
                let message = match &e.kind {
                    // The reader knows where these fields are, but does not say.
                    GgufErrorKind::BadMagic(_) => format!("{e} (at offset 0)"),
                    GgufErrorKind::Version(_) => format!("{e} (at offset 4)"),
                    GgufErrorKind::ModelDims { .. } => {
                        format!("{e} (volta.Llama runs SmolLM2-135M)")
                    }
                    _ => e.to_string(),
                };
                match &e.kind {
                    GgufErrorKind::Io(io) => match io.kind() {
                        ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
                        ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
                        _ => PyOSError::new_err(message),
                    },
                    _ => errors::error(Kind::FileFormat, message),
                }
            }
            LoadError::Tokenizer(path, e) => errors::error(
                Kind::FileFormat,
                format!("GGUF file {}: its tokenizer: {e}", path.display()),
            ),
            LoadError::Gpu(e) => errors::gpu(e),
        }
    }
}

/// Reads `path` and builds its tokenizer.
fn open(path: &Path) -> Result<(Gguf, models::Tokenizer), LoadError> {
    let gguf = Gguf::open(path).map_err(LoadError::Gguf)?;
    let spec = TokenizerSpec::from_gguf(&gguf).map_err(LoadError::Gguf)?;
    let tokenizer = models::Tokenizer::from_vocab(spec)
        .map_err(|e| LoadError::Tokenizer(path.to_path_buf(), e))?;
    Ok((gguf, tokenizer))
}

/// What the binding needs of a device beyond running the model: its failures as
/// [`GpuError`]s (the CPU has none).
trait LlmDevice: InferenceBackend + Replay + Sized {
    /// Waits for the work recorded so far, reporting an error it raised.
    fn settle() -> Result<(), GpuError>;
    /// Reads logits back to the host.
    fn read(logits: &RawTensor<Self, f32>) -> Result<Vec<f32>, GpuError>;
}

impl LlmDevice for Cpu {
    fn settle() -> Result<(), GpuError> {
        Ok(())
    }
    fn read(logits: &RawTensor<Self, f32>) -> Result<Vec<f32>, GpuError> {
        Ok(logits.to_vec())
    }
}

impl LlmDevice for Gpu {
    fn settle() -> Result<(), GpuError> {
        Gpu::sync()
    }
    fn read(logits: &RawTensor<Self, f32>) -> Result<Vec<f32>, GpuError> {
        logits.try_to_vec()
    }
}

/// Loads the model in `gguf` onto `D`, its decode products on `activations`;
/// loading records uploads on the GPU, so an out-of-memory there is reported here
/// rather than at the first token.
fn load<D: LlmDevice>(
    gguf: &Gguf,
    activations: Activations,
) -> Result<Arc<SmolLM2_135M<D>>, LoadError> {
    let mut model = SmolLM2_135M::<D>::from_gguf(gguf).map_err(LoadError::Gguf)?;
    model.set_activations(activations);
    D::settle().map_err(LoadError::Gpu)?;
    Ok(Arc::new(model))
}

/// A loaded model on its device.
enum Model {
    Cpu(Arc<SmolLM2_135M<Cpu>>),
    Gpu(Arc<SmolLM2_135M<Gpu>>),
}

/// A model and a conversation's KV cache.
enum Session {
    Cpu(Arc<SmolLM2_135M<Cpu>>, KvCache<Cpu>),
    Gpu(Arc<SmolLM2_135M<Gpu>>, KvCache<Gpu>),
}

impl Session {
    fn new(model: &Model) -> Self {
        match model {
            Model::Cpu(m) => Session::Cpu(m.clone(), m.cache()),
            Model::Gpu(m) => Session::Gpu(m.clone(), m.cache()),
        }
    }

    /// Runs `tokens` after those in the cache; the last one's logits.
    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, GpuError> {
        fn run<D: LlmDevice>(
            model: &SmolLM2_135M<D>,
            cache: &mut KvCache<D>,
            tokens: &[u32],
        ) -> Result<Vec<f32>, GpuError> {
            D::read(model.forward(tokens, cache).raw())
        }
        match self {
            Session::Cpu(m, cache) => run(m, cache, tokens),
            Session::Gpu(m, cache) => run(m, cache, tokens),
        }
    }
}

/// Text ↔ token ids for SmolLM2's byte-level BPE vocabulary, read from a GGUF file.
///
/// `Tokenizer.from_gguf(path)` reads it alone; `Llama.tokenizer` is the model's.
#[pyclass(module = "volta._volta", name = "Tokenizer", frozen)]
pub struct Tokenizer {
    inner: Arc<models::Tokenizer>,
}

#[pymethods]
impl Tokenizer {
    /// The tokenizer of the GGUF file at `path`. Raises `FileFormatError` for a
    /// malformed file, `OSError` for an unreadable one.
    #[staticmethod]
    fn from_gguf(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let (_, tokenizer) = errors::guard(|| Ok(py.detach(|| open(&path))?))?;
        Ok(Tokenizer {
            inner: Arc::new(tokenizer),
        })
    }

    /// The token ids of `text`; control tokens written in it (`<|im_start|>`) are
    /// their single ids.
    fn encode(&self, py: Python<'_>, text: String) -> Vec<u32> {
        py.detach(|| self.inner.encode(&text))
    }

    /// The text of `ids`; with `skip_special_tokens`, without the control tokens.
    /// A character cut in the middle decodes to U+FFFD.
    #[pyo3(signature = (ids, skip_special_tokens = false))]
    fn decode(&self, ids: Vec<i64>, skip_special_tokens: bool) -> PyResult<String> {
        let n = self.inner.vocab_size();
        let ids = ids
            .into_iter()
            .map(|id| match u32::try_from(id) {
                Ok(id) if (id as usize) < n => Ok(id),
                _ => Err(PyValueError::new_err(format!(
                    "token id {id} is outside the vocabulary of {n}"
                ))),
            })
            .collect::<PyResult<Vec<u32>>>()?;
        Ok(if skip_special_tokens {
            self.inner.decode_skip_special(&ids)
        } else {
            self.inner.decode(&ids)
        })
    }

    /// The id of the token spelled `token` in the vocabulary (`"<|im_end|>"`), or
    /// `None`.
    fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_id(token)
    }

    /// Number of tokens.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// The beginning-of-sequence id, or `None`.
    #[getter]
    fn bos(&self) -> Option<u32> {
        self.inner.bos()
    }

    /// The end-of-sequence id (SmolLM2: `<|im_end|>`), or `None`.
    #[getter]
    fn eos(&self) -> Option<u32> {
        self.inner.eos()
    }

    fn __len__(&self) -> usize {
        self.inner.vocab_size()
    }

    fn __repr__(&self) -> String {
        format!("Tokenizer(vocab_size={})", self.inner.vocab_size())
    }
}

/// SmolLM2-135M-Instruct, loaded from its GGUF file onto the CPU or the GPU.
///
/// `generate(prompt)` wraps the prompt in the model's chat template and streams the
/// answer as an iterator of text pieces.
#[pyclass(module = "volta._volta", name = "Llama", frozen)]
pub struct Llama {
    model: Model,
    tokenizer: Py<Tokenizer>,
    context: usize,
}

#[pymethods]
impl Llama {
    /// Loads the GGUF file at `path` onto `device` (a `Device`, `"cpu"` or `"gpu"`;
    /// the CPU by default). `activations`: `"int8"` (the default) quantises a
    /// decoded token's activations to 8 bits on the CPU, as llama.cpp's CPU backend
    /// does; `"f32"` keeps them f32 (the GPU always does). Raises `FileFormatError`
    /// for a malformed file or one of another model, `OSError` for an unreadable
    /// one, `GpuError` when the GPU fails, `ValueError` for another `activations`.
    #[staticmethod]
    #[pyo3(signature = (path, device = None, activations = "int8"))]
    fn from_gguf(
        py: Python<'_>,
        path: PathBuf,
        device: Option<&Bound<'_, PyAny>>,
        activations: &str,
    ) -> PyResult<Self> {
        let place = device::parse(device)?;
        let activations = match activations {
            "int8" => Activations::Int8,
            "f32" => Activations::F32,
            other => {
                return Err(PyValueError::new_err(format!(
                    "activations must be \"int8\" or \"f32\", not {other:?}"
                )));
            }
        };
        let (model, tokenizer) = errors::guard(|| {
            Ok(py.detach(|| -> Result<_, LoadError> {
                let (gguf, tokenizer) = open(&path)?;
                let model = match place {
                    Where::Cpu => Model::Cpu(load(&gguf, activations)?),
                    Where::Gpu => Model::Gpu(load(&gguf, activations)?),
                };
                Ok((model, tokenizer))
            })?)
        })?;
        let context = match &model {
            Model::Cpu(m) => m.config().context,
            Model::Gpu(m) => m.config().context,
        };
        let tokenizer = Py::new(
            py,
            Tokenizer {
                inner: Arc::new(tokenizer),
            },
        )?;
        Ok(Llama {
            model,
            tokenizer,
            context,
        })
    }

    /// The model's tokenizer.
    #[getter]
    fn tokenizer(&self, py: Python<'_>) -> Py<Tokenizer> {
        self.tokenizer.clone_ref(py)
    }

    /// Where the model runs.
    #[getter]
    fn device(&self) -> Device {
        let place = match self.model {
            Model::Cpu(_) => Where::Cpu,
            Model::Gpu(_) => Where::Gpu,
        };
        Device { place }
    }

    /// Positions the model reads at most: the prompt and the answer together.
    #[getter]
    fn context_length(&self) -> usize {
        self.context
    }

    /// Answers `prompt` (the user's message, wrapped in SmolLM2's chat template):
    /// an iterator of text pieces, computed as it is read. At most `max_tokens`
    /// tokens; greedy at `temperature` 0, else sampled among the `top_k` likeliest
    /// (0: all) within the `top_p` probability mass, drawn from `seed`. Raises
    /// `ValueError` for an argument out of range or a prompt longer than the context.
    #[pyo3(
        signature = (
            prompt, max_tokens = 128, temperature = 0.0, top_k = 0, top_p = 1.0, seed = Seed(0)
        ),
        text_signature = "($self, prompt, max_tokens=128, temperature=0.0, top_k=0, top_p=1.0, seed=0)"
    )]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn generate(
        &self,
        py: Python<'_>,
        prompt: String,
        max_tokens: i64,
        temperature: f64,
        top_k: i64,
        top_p: f64,
        seed: Seed,
    ) -> PyResult<Generation> {
        let max_tokens = non_negative("max_tokens", max_tokens)?;
        let top_k = non_negative("top_k", top_k)?;
        let Seed(seed) = seed;
        let sampler = Sampler::new(SamplerConfig {
            temperature,
            top_k,
            top_p,
            seed,
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let tokenizer = self.tokenizer.get().inner.clone();
        let text = ChatTemplate::smollm2().render(&[Message::user(prompt)]);
        let ids = py.detach(|| tokenizer.encode(&text));
        if ids.len() >= self.context {
            return Err(PyValueError::new_err(format!(
                "the prompt is {} tokens with the chat template; the model's context holds {}",
                ids.len(),
                self.context
            )));
        }
        let end = tokenizer.token_id("<|im_end|>").or(tokenizer.eos());
        Ok(Generation {
            session: Session::new(&self.model),
            left: max_tokens.min(self.context - ids.len()),
            prompt_tokens: ids.len(),
            pending: ids,
            tokenizer,
            sampler,
            text: DecodeState::new(),
            end,
            tokens: Vec::new(),
            done: false,
        })
    }

    fn __repr__(&self) -> String {
        let device = match self.model {
            Model::Cpu(_) => "cpu",
            Model::Gpu(_) => "gpu",
        };
        format!("Llama('SmolLM2-135M', device='{device}')")
    }
}

/// A sampler's seed: any int in `0..2**64` (a negative one is a `ValueError`, not
/// pyo3's `OverflowError`).
struct Seed(u64);

impl<'a, 'py> FromPyObject<'a, 'py> for Seed {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<u64>() {
            Ok(seed) => Ok(Seed(seed)),
            Err(_) if obj.extract::<i64>().is_ok_and(|s| s < 0) => {
                Err(PyValueError::new_err("seed must be at least 0"))
            }
            Err(e) => Err(e),
        }
    }
}

/// `value` as a `usize`, or a `ValueError` naming `name`.
fn non_negative(name: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value)
        .map_err(|_| PyValueError::new_err(format!("{name} must be at least 0, not {value}")))
}

/// An answer being generated, from `Llama.generate`: iterate it for the text, piece
/// by piece (a piece is one token's text, or several when a character spans
/// tokens). Each step runs the model once, with the GIL released.
#[pyclass(module = "volta._volta", name = "Generation")]
pub struct Generation {
    session: Session,
    tokenizer: Arc<models::Tokenizer>,
    sampler: Sampler,
    /// The answer's text, less a character still incomplete.
    text: DecodeState,
    /// What the model reads next: the prompt, then each sampled token.
    pending: Vec<u32>,
    /// The end-of-turn token (`<|im_end|>`), which ends the answer unwritten.
    end: Option<u32>,
    /// Tokens the answer may still take.
    left: usize,
    prompt_tokens: usize,
    /// The answer's tokens so far.
    tokens: Vec<u32>,
    done: bool,
}

impl Generation {
    /// Runs the model until a piece of text is complete; `None` at the end.
    fn step(&mut self) -> Result<Option<String>, GpuError> {
        while !self.done {
            if self.left == 0 {
                self.done = true;
                break;
            }
            let logits = self.session.forward(&self.pending)?;
            self.left -= 1;
            let next = self.sampler.sample(&logits);
            if Some(next) == self.end {
                self.done = true;
                break;
            }
            self.tokens.push(next);
            self.pending = vec![next];
            if let Some(piece) = self.text.push(&self.tokenizer, next) {
                return Ok(Some(piece));
            }
        }
        // A last character cut short by `max_tokens`, as U+FFFD.
        Ok(self.text.finish(&self.tokenizer))
    }
}

#[pymethods]
impl Generation {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(mut slf: PyRefMut<'_, Self>) -> PyResult<Option<String>> {
        let py = slf.py();
        let this = &mut *slf;
        let result = errors::guard(|| py.detach(|| this.step()).map_err(errors::gpu));
        if result.is_err() {
            // The cache may hold half a step: the answer cannot go on.
            this.done = true;
        }
        result
    }

    /// Tokens of the prompt, chat template included.
    #[getter]
    fn prompt_tokens(&self) -> usize {
        self.prompt_tokens
    }

    /// The answer's token ids so far (without the end-of-turn token).
    #[getter]
    fn token_ids(&self) -> Vec<u32> {
        self.tokens.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "<Generation: {} prompt tokens, {} generated{}>",
            self.prompt_tokens,
            self.tokens.len(),
            if self.done { ", done" } else { "" }
        )
    }
}
