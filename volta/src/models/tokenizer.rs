//! A byte-level BPE tokenizer built from a GGUF file's tokenizer metadata.
//!
//! GGUF files describe their tokenizer as plain values (llama.cpp's keys):
//! `tokenizer.ggml.model` (`"gpt2"` for byte-level BPE), `tokenizer.ggml.pre` (which
//! pre-tokenizer split), `tokenizer.ggml.tokens`, `tokenizer.ggml.token_type`,
//! `tokenizer.ggml.merges` and the BOS/EOS/padding ids. [`TokenizerSpec`] holds exactly
//! those values; [`Tokenizer::from_vocab`] checks them and assembles a tokenizer from
//! the [`tokenizers`] crate's parts: a BPE model over the vocabulary and merges, the
//! pre-tokenizer llama.cpp uses for that `pre` value, the byte-level decoder, and the
//! control tokens (token type 3, e.g. `<|im_start|>`) matched whole in the text.
//!
//! Reading the GGUF file itself is not this module's job: whatever parses the file
//! passes the values in.
//!
//! ```
//! use volta::models::{Tokenizer, TokenizerSpec};
//!
//! // A toy vocabulary: the byte-level alphabet spells a space as `Ġ`.
//! let tokens = ["<|end|>", "h", "i", "Ġ", "hi", "Ġhi"].map(String::from).to_vec();
//! let tok = Tokenizer::from_vocab(TokenizerSpec {
//!     token_types: vec![3, 1, 1, 1, 1, 1],
//!     merges: vec!["h i".into(), "Ġ hi".into()],
//!     eos: Some(0),
//!     ..TokenizerSpec::new(tokens)
//! })?;
//! assert_eq!(tok.encode("hi hi<|end|>"), [4, 5, 0]);
//! assert_eq!(tok.decode(&[4, 5]), "hi hi");
//! # Ok::<(), volta::models::TokenizerError>(())
//! ```

use std::collections::HashMap;
use std::fmt;

use tokenizers::decoders::byte_level::ByteLevel;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizerWrapper, PostProcessorWrapper,
};

/// GGUF token type of an ordinary vocabulary entry.
const TYPE_NORMAL: i32 = 1;
/// GGUF token type of a control token (`<|im_start|>`): matched whole, never split.
const TYPE_CONTROL: i32 = 3;
/// GGUF token type of a user-defined added token: matched whole, but not special.
const TYPE_USER_DEFINED: i32 = 4;

/// How text is cut into words before BPE runs, named after llama.cpp's
/// `tokenizer.ggml.pre` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// GPT-2's split (`'s|'t|… ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`), no
    /// prefix space. llama.cpp's `gpt-2`.
    Gpt2,
    /// Every digit on its own (`\p{N}`), then GPT-2's split. llama.cpp's `smollm`
    /// (SmolLM, SmolLM2), also `starcoder`, `refact`, `command-r`, `codeshell`. In
    /// `tokenizer.json` terms: `Digits(individual_digits: true)` then
    /// `ByteLevel(add_prefix_space: false)`. It differs from [`Gpt2`](Self::Gpt2) where
    /// spaces meet a digit: `"  2"` is `"ĠĠ", "2"` here, `"Ġ", "Ġ", "2"` there.
    Gpt2Digits,
}

impl PreTokenizer {
    /// The pre-tokenizer for a `tokenizer.ggml.pre` value, or `None` for one this module
    /// does not implement.
    pub fn from_gguf(pre: &str) -> Option<Self> {
        match pre {
            "gpt-2" | "gpt2" => Some(Self::Gpt2),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" => Some(Self::Gpt2Digits),
            _ => None,
        }
    }

    fn build(self) -> PreTokenizerWrapper {
        let byte_level = PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, true, true));
        match self {
            Self::Gpt2 => byte_level,
            Self::Gpt2Digits => PreTokenizerWrapper::Sequence(Sequence::new(vec![
                PreTokenizerWrapper::Digits(Digits::new(true)),
                byte_level,
            ])),
        }
    }
}

/// The tokenizer metadata of a GGUF file, as plain values.
///
/// Field by field it is llama.cpp's `tokenizer.ggml.*` keys. Start from
/// [`TokenizerSpec::new`] (a `gpt2`/`smollm` tokenizer with no merges, special ids or
/// token types) and fill in the rest with struct-update syntax.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenizerSpec {
    /// `tokenizer.ggml.model`: only `"gpt2"` (byte-level BPE) is supported.
    pub model: String,
    /// `tokenizer.ggml.pre`, e.g. `"smollm"`; see [`PreTokenizer::from_gguf`].
    pub pre: String,
    /// `tokenizer.ggml.tokens`: token `i`'s text, spelled in the byte-level alphabet
    /// (`Ġ` for a space, `Ċ` for a newline).
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`, one per token (1 normal, 3 control, 4 user-defined;
    /// 0, 2, 5 and 6 are treated as normal); empty means all normal.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"left right"`, highest priority first.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`: whether [`Tokenizer::encode`] starts with BOS
    /// (false for SmolLM2, whose chat template opens with `<|im_start|>`).
    pub add_bos: bool,
}

impl TokenizerSpec {
    /// The `tokenizer.ggml.*` metadata of a GGUF file.
    pub fn from_gguf(gguf: &crate::io::gguf::Gguf) -> Result<Self, crate::io::gguf::GgufError> {
        let strings = |k: &str| -> Result<Vec<String>, _> {
            Ok(gguf
                .get_str_array(k)?
                .into_iter()
                .map(String::from)
                .collect())
        };
        let id = |k: &str| gguf.get_u64(k).ok().and_then(|v| u32::try_from(v).ok());
        Ok(TokenizerSpec {
            model: gguf.get_str("tokenizer.ggml.model")?.to_string(),
            pre: gguf
                .get_str("tokenizer.ggml.pre")
                .unwrap_or("default")
                .to_string(),
            tokens: strings("tokenizer.ggml.tokens")?,
            token_types: match gguf.get_i64_array("tokenizer.ggml.token_type") {
                Ok(types) => types.into_iter().map(|t| t as i32).collect(),
                Err(_) => Vec::new(),
            },
            merges: strings("tokenizer.ggml.merges")?,
            bos: id("tokenizer.ggml.bos_token_id"),
            eos: id("tokenizer.ggml.eos_token_id"),
            pad: id("tokenizer.ggml.padding_token_id"),
            add_bos: matches!(
                gguf.get("tokenizer.ggml.add_bos_token"),
                Some(crate::io::gguf::Value::Bool(true))
            ),
        })
    }

    /// A byte-level BPE spec (`model = "gpt2"`, `pre = "smollm"`) over `tokens`, with
    /// no merges, token types or special ids yet.
    pub fn new(tokens: Vec<String>) -> Self {
        Self {
            model: "gpt2".into(),
            pre: "smollm".into(),
            tokens,
            token_types: Vec::new(),
            merges: Vec::new(),
            bos: None,
            eos: None,
            pad: None,
            add_bos: false,
        }
    }
}

/// Why a [`TokenizerSpec`] could not become a [`Tokenizer`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenizerError {
    /// `tokens` is empty.
    EmptyVocab,
    /// `model` is not `"gpt2"`.
    UnsupportedModel(String),
    /// `pre` names a pre-tokenizer this module does not implement.
    UnsupportedPre(String),
    /// `token_types` is neither empty nor one per token.
    TokenTypesLength {
        /// Number of tokens.
        tokens: usize,
        /// Number of token types.
        types: usize,
    },
    /// A token type outside GGUF's 0..=6.
    BadTokenType {
        /// The token's id.
        id: u32,
        /// Its type.
        token_type: i32,
    },
    /// The same text appears twice in the vocabulary.
    DuplicateToken {
        /// The token's text.
        token: String,
        /// Its first id.
        first: u32,
        /// The id that repeats it.
        second: u32,
    },
    /// A merge is not two tokens separated by one space.
    MalformedMerge {
        /// Its index in `merges`.
        index: usize,
        /// Its text.
        merge: String,
    },
    /// A merge names a token (either side, or their concatenation) absent from the
    /// vocabulary.
    UnknownMergeToken {
        /// The merge's index in `merges`.
        index: usize,
        /// The missing token.
        token: String,
    },
    /// A special-token id (`which` is `"bos"`, `"eos"` or `"pad"`) past the vocabulary.
    BadId {
        /// Which id.
        which: &'static str,
        /// Its value.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// The `tokenizers` crate rejected the assembled model (not expected after the
    /// checks above).
    Backend(String),
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyVocab => write!(f, "tokenizer vocabulary is empty"),
            Self::UnsupportedModel(m) => write!(
                f,
                "tokenizer model {m:?} is not supported (only \"gpt2\", byte-level BPE)"
            ),
            Self::UnsupportedPre(p) => write!(f, "pre-tokenizer {p:?} is not supported"),
            Self::TokenTypesLength { tokens, types } => {
                write!(f, "{types} token types for {tokens} tokens")
            }
            Self::BadTokenType { id, token_type } => {
                write!(f, "token {id} has unknown token type {token_type}")
            }
            Self::DuplicateToken {
                token,
                first,
                second,
            } => write!(
                f,
                "token {token:?} appears twice (ids {first} and {second})"
            ),
            Self::MalformedMerge { index, merge } => {
                write!(f, "merge {index} ({merge:?}) is not \"left right\"")
            }
            Self::UnknownMergeToken { index, token } => {
                write!(
                    f,
                    "merge {index} names {token:?}, which is not in the vocabulary"
                )
            }
            Self::BadId {
                which,
                id,
                vocab_size,
            } => write!(f, "{which} id {id} is out of range for {vocab_size} tokens"),
            Self::Backend(e) => write!(f, "tokenizers: {e}"),
        }
    }
}

impl std::error::Error for TokenizerError {}

type Inner = tokenizers::TokenizerImpl<
    ModelWrapper,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

/// Text ↔ token ids for a byte-level BPE vocabulary (see the [module docs](self)).
pub struct Tokenizer {
    inner: Inner,
    special: Vec<bool>,
    bos: Option<u32>,
    eos: Option<u32>,
    pad: Option<u32>,
    add_bos: bool,
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("pad", &self.pad)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Checks `spec` and builds the tokenizer it describes.
    pub fn from_vocab(spec: TokenizerSpec) -> Result<Self, TokenizerError> {
        let TokenizerSpec {
            model,
            pre,
            tokens,
            token_types,
            merges,
            bos,
            eos,
            pad,
            add_bos,
        } = spec;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel(model));
        }
        let pre_tokenizer =
            PreTokenizer::from_gguf(&pre).ok_or(TokenizerError::UnsupportedPre(pre))?;
        if tokens.is_empty() {
            return Err(TokenizerError::EmptyVocab);
        }
        let n = tokens.len();
        if !token_types.is_empty() && token_types.len() != n {
            return Err(TokenizerError::TokenTypesLength {
                tokens: n,
                types: token_types.len(),
            });
        }
        let type_of = |i: usize| token_types.get(i).copied().unwrap_or(TYPE_NORMAL);
        for (which, id) in [("bos", bos), ("eos", eos), ("pad", pad)] {
            if let Some(id) = id.filter(|&id| id as usize >= n) {
                return Err(TokenizerError::BadId {
                    which,
                    id,
                    vocab_size: n,
                });
            }
        }

        let mut ids: HashMap<&str, u32> = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            let ty = type_of(i);
            if !(0..=6).contains(&ty) {
                return Err(TokenizerError::BadTokenType {
                    id: i as u32,
                    token_type: ty,
                });
            }
            if let Some(&first) = ids.get(t.as_str()) {
                return Err(TokenizerError::DuplicateToken {
                    token: t.clone(),
                    first,
                    second: i as u32,
                });
            }
            ids.insert(t, i as u32);
        }
        let mut pairs = Vec::with_capacity(merges.len());
        for (index, merge) in merges.iter().enumerate() {
            let (a, b) = match merge.split_once(' ') {
                Some((a, b)) if !a.is_empty() && !b.is_empty() && !b.contains(' ') => (a, b),
                _ => {
                    return Err(TokenizerError::MalformedMerge {
                        index,
                        merge: merge.clone(),
                    });
                }
            };
            let joined = format!("{a}{b}");
            for t in [a, b, joined.as_str()] {
                if !ids.contains_key(t) {
                    return Err(TokenizerError::UnknownMergeToken {
                        index,
                        token: t.to_owned(),
                    });
                }
            }
            pairs.push((a.to_owned(), b.to_owned()));
        }

        let vocab: Vocab = ids.iter().map(|(t, &i)| ((*t).to_owned(), i)).collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, pairs)
            .build()
            .map_err(|e| TokenizerError::Backend(e.to_string()))?;
        let mut inner = Inner::new(bpe.into());
        inner
            .with_pre_tokenizer(Some(pre_tokenizer.build()))
            .with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::new(
                false, true, true,
            ))));

        // Control and user-defined tokens are matched whole before pre-tokenization; they
        // are in the vocabulary already, so they keep their ids.
        let added = |ty: i32, special: bool| -> Vec<AddedToken> {
            (0..n)
                .filter(|&i| type_of(i) == ty)
                .map(|i| AddedToken::from(tokens[i].clone(), special).normalized(false))
                .collect()
        };
        inner.add_special_tokens(&added(TYPE_CONTROL, true));
        inner.add_tokens(&added(TYPE_USER_DEFINED, false));
        let special = (0..n).map(|i| type_of(i) == TYPE_CONTROL).collect();
        Ok(Self {
            inner,
            special,
            bos,
            eos,
            pad,
            add_bos,
        })
    }

    /// The token ids of `text`; control tokens written in it (`<|im_start|>`) become
    /// their single ids. Starts with BOS when the spec's `add_bos` is set.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let encoding = self
            .inner
            .encode_fast(text, false)
            .expect("byte-level BPE encodes every string");
        let mut ids = Vec::with_capacity(encoding.len() + 1);
        if let (true, Some(bos)) = (self.add_bos, self.bos) {
            ids.push(bos);
        }
        ids.extend_from_slice(encoding.get_ids());
        ids
    }

    /// The text of `ids`, control tokens included as written (so
    /// `decode(&encode(s)) == s`). Bytes that do not form UTF-8 (a sequence cut
    /// mid-character) become U+FFFD. Ids past the vocabulary are skipped.
    pub fn decode(&self, ids: &[u32]) -> String {
        self.decode_with(ids, false)
    }

    /// Like [`decode`](Self::decode), leaving out control tokens.
    pub fn decode_skip_special(&self, ids: &[u32]) -> String {
        self.decode_with(ids, true)
    }

    fn decode_with(&self, ids: &[u32], skip_special: bool) -> String {
        let n = self.vocab_size();
        let ids: Vec<u32> = ids.iter().copied().filter(|&i| (i as usize) < n).collect();
        self.inner
            .decode(&ids, skip_special)
            .expect("byte-level decoding cannot fail")
    }

    /// A decoder for generation: push ids one at a time and get text as soon as it is
    /// complete UTF-8 (an emoji spread over several tokens arrives whole, once).
    /// Control tokens are included as written.
    /// [`DecodeState`] is the same without the borrow.
    pub fn decode_stream(&self) -> DecodeStream<'_> {
        DecodeStream {
            tokenizer: self,
            state: DecodeState::new(),
        }
    }

    /// The beginning-of-sequence id, if the vocabulary names one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence id (SmolLM2: `<|im_end|>`, 2), if the vocabulary names one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// The padding id, if the vocabulary names one.
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }

    /// Number of tokens, i.e. the model's vocabulary (embedding) size.
    pub fn vocab_size(&self) -> usize {
        self.special.len()
    }

    /// Whether `id` is a control token (GGUF token type 3).
    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// Token `id`'s text as the vocabulary spells it (byte-level alphabet: `Ġ` for a
    /// space).
    pub fn token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The id of the token spelled `token` in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

/// Incremental decoding for generation, from [`Tokenizer::decode_stream`].
#[derive(Debug)]
pub struct DecodeStream<'a> {
    tokenizer: &'a Tokenizer,
    state: DecodeState,
}

impl DecodeStream<'_> {
    /// Adds the next generated id; returns the text it completes, or `None` while the
    /// bytes so far end inside a UTF-8 character (or the id is past the vocabulary).
    /// Concatenating every `Some` gives [`Tokenizer::decode`] of all the ids, except
    /// for a last character still incomplete (see [`finish`](Self::finish)). (Text
    /// that really ends in U+FFFD is held back until the next piece arrives: the
    /// stream cannot tell it from a cut one.)
    pub fn push(&mut self, id: u32) -> Option<String> {
        self.state.push(self.tokenizer, id)
    }

    /// The text held back at the end of generation (an incomplete character, as
    /// U+FFFD), if any: with it, the pieces add up to [`Tokenizer::decode`] of all
    /// the ids.
    pub fn finish(self) -> Option<String> {
        let DecodeStream {
            tokenizer,
            mut state,
        } = self;
        state.finish(tokenizer)
    }
}

/// A [`DecodeStream`] that does not borrow its tokenizer: each call takes it
/// instead, so the state can live beside the tokenizer in one struct, or behind an
/// `Arc` (a Python generator, the web page's chat). Pass the same tokenizer every
/// time.
///
/// ```
/// use volta::models::{DecodeState, Tokenizer, TokenizerSpec};
///
/// // A toy vocabulary: "é" is two bytes, here two tokens ("Ã", "©" in the
/// // byte-level alphabet).
/// let tokens = ["h", "i", "Ã", "©"].map(String::from).to_vec();
/// let tok = Tokenizer::from_vocab(TokenizerSpec::new(tokens))?;
/// let mut state = DecodeState::new();
/// assert_eq!(state.push(&tok, 0).as_deref(), Some("h"));
/// assert_eq!(state.push(&tok, 2), None); // half of "é"
/// assert_eq!(state.push(&tok, 3).as_deref(), Some("é"));
/// assert_eq!(state.push(&tok, 2), None);
/// // Generation ends mid-character: the rest is U+FFFD, as `decode` writes it.
/// assert_eq!(state.finish(&tok).as_deref(), Some("\u{fffd}"));
/// assert_eq!(tok.decode(&[0, 2, 3, 2]), "hé\u{fffd}");
/// # Ok::<(), volta::models::TokenizerError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct DecodeState {
    /// The ids not yet fully emitted, after some already emitted that give the
    /// byte-level decoder its context (the `tokenizers` crate's stream state).
    ids: Vec<u32>,
    /// The text of `ids[..prefix_index]`, already emitted.
    prefix: String,
    prefix_index: usize,
}

impl DecodeState {
    /// A stream at its start.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`DecodeStream::push`] with `tokenizer`.
    pub fn push(&mut self, tokenizer: &Tokenizer, id: u32) -> Option<String> {
        if id as usize >= tokenizer.vocab_size() {
            return None;
        }
        tokenizers::step_decode_stream(
            &tokenizer.inner,
            vec![id],
            false,
            &mut self.ids,
            &mut self.prefix,
            &mut self.prefix_index,
        )
        .expect("byte-level stream decoding cannot fail")
    }

    /// [`DecodeStream::finish`] with `tokenizer`; the state starts over.
    pub fn finish(&mut self, tokenizer: &Tokenizer) -> Option<String> {
        let state = std::mem::take(self);
        let text = tokenizer.decode(&state.ids);
        text.strip_prefix(state.prefix.as_str())
            .filter(|rest| !rest.is_empty())
            .map(str::to_string)
    }
}
