//! Chat with a Llama-architecture model from its GGUF bytes, one token per call:
//! the page streams the answer and the tab stays responsive between tokens.
use std::fmt::Display;
use volta::backend::{InferenceBackend, Memory, Replay};
use volta::io::gguf::Gguf;
use volta::models::llama::{Llama, SmolLM2_135M};
use volta::models::{
    ChatTemplate, DecodeState, KvCache, Message, Sampler, SamplerConfig, Tokenizer, TokenizerSpec,
};

/// The page's test model: SmolLM2's architecture at toy size (2 blocks of width
/// 64, feed-forward 128, 4 heads over 2 key/value heads) with a byte-level
/// vocabulary of 256 bytes and 3 chat tokens. `volta-web`'s `tiny_gguf` binary
/// writes one with random weights, so the page test needs no download.
pub type TinyLlama<D> = Llama<D, 2, 64, 128, 4, 2, 259>;

/// The models the page runs.
enum Model<D: InferenceBackend + Replay> {
    SmolLm2(Box<SmolLM2_135M<D>>),
    Tiny(Box<TinyLlama<D>>),
}

/// A loaded model, its tokenizer and the conversation in progress.
pub struct Chat<D: InferenceBackend + Replay> {
    model: Model<D>,
    tokenizer: Tokenizer,
    cache: KvCache<D>,
    context: usize,
    end: Option<u32>,
    /// What the model reads next (the prompt, then each sampled token).
    pending: Vec<u32>,
    /// The answer's text so far, less a character still incomplete.
    text: DecodeState,
    left: usize,
    sampler: Sampler,
}

impl<D: InferenceBackend + Replay> Chat<D>
where
    <D as Memory<f32>>::Error: Display,
{
    /// Loads the GGUF file `name` (its `bytes`): SmolLM2-135M, or the page's tiny
    /// test model. A file of another model is an error naming its dims.
    pub fn load(name: &str, bytes: Vec<u8>) -> Result<Self, String> {
        let gguf = Gguf::parse(name, bytes).map_err(|e| e.to_string())?;
        let spec = TokenizerSpec::from_gguf(&gguf).map_err(|e| e.to_string())?;
        let tokenizer = Tokenizer::from_vocab(spec).map_err(|e| format!("{name}: {e}"))?;
        let tiny = gguf.get_u64("llama.block_count").ok() == Some(TinyLlama::<D>::LAYERS as u64)
            && gguf.get_u64("llama.embedding_length").ok() == Some(TinyLlama::<D>::HIDDEN as u64);
        let model = if tiny {
            Model::Tiny(Box::new(
                TinyLlama::<D>::from_gguf(&gguf).map_err(|e| e.to_string())?,
            ))
        } else {
            Model::SmolLm2(Box::new(
                SmolLM2_135M::<D>::from_gguf(&gguf).map_err(|e| e.to_string())?,
            ))
        };
        let (cache, context) = match &model {
            Model::SmolLm2(m) => (m.cache(), m.config().context),
            Model::Tiny(m) => (m.cache(), m.config().context),
        };
        let end = tokenizer.token_id("<|im_end|>").or(tokenizer.eos());
        Ok(Chat {
            model,
            tokenizer,
            cache,
            context,
            end,
            pending: Vec::new(),
            text: DecodeState::new(),
            left: 0,
            sampler: Sampler::greedy(),
        })
    }

    /// Which model this is, for the page.
    pub fn describe(&self) -> String {
        match &self.model {
            Model::SmolLm2(_) => "SmolLM2-135M".into(),
            Model::Tiny(_) => "tiny test model (SmolLM2's architecture, random weights)".into(),
        }
    }

    /// Starts a new conversation with the user's `prompt` in SmolLM2's chat
    /// template: at most `max_tokens` answer tokens, sampled at `temperature`
    /// among the `top_k` likeliest (greedy at temperature 0; a negative one is an
    /// error). Returns the prompt's length in tokens.
    pub fn start(
        &mut self,
        prompt: &str,
        max_tokens: usize,
        temperature: f64,
        top_k: usize,
        seed: u64,
    ) -> Result<usize, String> {
        let sampler = Sampler::new(SamplerConfig {
            temperature,
            top_k,
            top_p: 1.0,
            seed,
        })
        .map_err(|e| e.to_string())?;
        let text = ChatTemplate::smollm2().render(&[Message::user(prompt)]);
        let ids = self.tokenizer.encode(&text);
        if ids.is_empty() {
            return Err("the prompt encodes to no tokens".into());
        }
        if ids.len() >= self.context {
            return Err(format!(
                "the prompt is {} tokens; the model's context holds {}",
                ids.len(),
                self.context
            ));
        }
        self.cache.clear();
        self.left = max_tokens.min(self.context - ids.len());
        self.pending = ids;
        self.text = DecodeState::new();
        self.sampler = sampler;
        Ok(self.pending.len())
    }

    /// Runs the model on what it has not read yet and samples the next token:
    /// `Some(text)` (possibly empty while a character is incomplete), or `None` at
    /// the end of the answer.
    pub async fn next(&mut self) -> Result<Option<String>, String> {
        if self.left == 0 || self.pending.is_empty() {
            return Ok(None);
        }
        let tokens = std::mem::take(&mut self.pending);
        let logits = match &self.model {
            Model::SmolLm2(m) => m.forward(&tokens, &mut self.cache).raw().clone(),
            Model::Tiny(m) => m.forward(&tokens, &mut self.cache).raw().clone(),
        };
        let read = logits.try_to_vec_async();
        let logits = read.await.map_err(|e| e.to_string())?;
        self.left -= 1;
        let next = self.sampler.sample(&logits);
        if Some(next) == self.end {
            self.left = 0;
            // A character cut short (which the model should not leave) as U+FFFD.
            return Ok(self.text.finish(&self.tokenizer));
        }
        self.pending = vec![next];
        let mut piece = self.text.push(&self.tokenizer, next).unwrap_or_default();
        if self.left == 0 {
            piece.extend(self.text.finish(&self.tokenizer));
        }
        Ok(Some(piece))
    }
}
