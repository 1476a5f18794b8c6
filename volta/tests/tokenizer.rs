//! `volta::models::{Tokenizer, ChatTemplate}`: toy vocabularies (no file needed), then
//! SmolLM2-135M-Instruct's real vocabulary checked against ids from an independent
//! implementation (`reference/tokenizer.py`, which writes `reference/tokenizer_fixture.rs`).
//!
//! The real-vocabulary tests read the GGUF at `$VOLTA_SMOLLM2` (set by
//! `scripts/test.sh`, which fetches it), else in Volta's cache folder
//! (`$VOLTA_CACHE_DIR`, else `$XDG_CACHE_HOME/volta`, else `~/.cache/volta/`), and
//! skip with a message only when that variable is unset and the cache holds no copy.

#[rustfmt::skip]
#[path = "reference/tokenizer_fixture.rs"]
mod fixture;

use crate::support;
use std::sync::OnceLock;

use volta::models::{ChatTemplate, Message, Role, Tokenizer, TokenizerError, TokenizerSpec};

// ------------------------------------------------------------------ toy vocabulary

fn toy_spec() -> TokenizerSpec {
    // Byte-level spelling: `Ġ` is a space, `Ċ` a newline.
    let tokens = [
        "<|end|>",
        "<|start|>",
        "h",
        "i",
        "Ġ",
        "Ċ",
        "1",
        "2",
        "hi",
        "Ġhi",
        "ĠĠ",
        "ð",
        "Ł",
        "¦",
        "Ģ",
        "ðŁ",
        "<tool>",
    ];
    let mut types = vec![1; tokens.len()];
    types[0] = 3;
    types[1] = 3;
    types[16] = 4;
    TokenizerSpec {
        token_types: types,
        merges: ["h i", "Ġ hi", "Ġ Ġ", "ð Ł"].map(String::from).to_vec(),
        bos: Some(1),
        eos: Some(0),
        pad: Some(0),
        ..TokenizerSpec::new(tokens.map(String::from).to_vec())
    }
}

#[test]
fn toy_encode_decode() {
    let tok = Tokenizer::from_vocab(toy_spec()).unwrap();
    assert_eq!(tok.vocab_size(), 17);
    assert_eq!(
        (tok.bos(), tok.eos(), tok.pad()),
        (Some(1), Some(0), Some(0))
    );
    assert_eq!(tok.encode("hi hi"), [8, 9]);
    // GPT-2's split keeps the last space with the word ("  hi" is "Ġ" + "Ġhi"); trailing
    // spaces stay together and merge ("ĠĠ").
    assert_eq!(tok.encode("  hi"), [4, 9]);
    assert_eq!(tok.encode("hi  "), [8, 10]);
    // `smollm` splits digits one by one, and a space before a digit stands alone.
    assert_eq!(tok.encode("12 1"), [6, 7, 4, 6]);
    assert_eq!(tok.encode("hi\n"), [8, 5]);
    assert_eq!(tok.decode(&[8, 9, 5, 6]), "hi hi\n1");
    assert_eq!(tok.encode(""), Vec::<u32>::new());
}

#[test]
fn toy_special_tokens() {
    let tok = Tokenizer::from_vocab(toy_spec()).unwrap();
    assert_eq!(tok.encode("<|start|>hi<|end|>"), [1, 8, 0]);
    assert_eq!(tok.encode("hi<|end|> hi"), [8, 0, 9]);
    // A user-defined token is matched whole too, but is not special.
    assert_eq!(tok.encode("<tool>hi"), [16, 8]);
    assert!(tok.is_special(0) && tok.is_special(1) && !tok.is_special(16) && !tok.is_special(8));
    assert!(!tok.is_special(999));
    assert_eq!(tok.decode(&[1, 8, 0]), "<|start|>hi<|end|>");
    assert_eq!(tok.decode_skip_special(&[1, 8, 0, 16]), "hi<tool>");
    assert_eq!(tok.token(9).as_deref(), Some("Ġhi"));
    assert_eq!(tok.token_id("<|end|>"), Some(0));
    // Ids past the vocabulary are skipped.
    assert_eq!(tok.decode(&[8, 1000]), "hi");
}

#[test]
fn toy_add_bos() {
    let tok = Tokenizer::from_vocab(TokenizerSpec {
        add_bos: true,
        ..toy_spec()
    })
    .unwrap();
    assert_eq!(tok.encode("hi"), [1, 8]);
}

#[test]
fn toy_stream_waits_for_whole_characters() {
    let tok = Tokenizer::from_vocab(toy_spec()).unwrap();
    // 🦀 is F0 9F A6 80: byte-level "ðŁ¦Ģ", here the tokens "ðŁ", "¦", "Ģ".
    assert_eq!(tok.encode("🦀"), [15, 13, 14]);
    let mut stream = tok.decode_stream();
    assert_eq!(stream.push(8).as_deref(), Some("hi"));
    assert_eq!(stream.push(15), None);
    assert_eq!(stream.push(13), None);
    assert_eq!(stream.push(14).as_deref(), Some("🦀"));
    assert_eq!(stream.push(9).as_deref(), Some(" hi"));
    assert_eq!(stream.push(5000), None);
    assert_eq!(stream.push(0).as_deref(), Some("<|end|>"));
    // A cut character decodes to U+FFFD in one go.
    assert_eq!(tok.decode(&[15, 13]), "\u{fffd}");
}

#[test]
fn toy_errors() {
    let err = |spec| Tokenizer::from_vocab(spec).unwrap_err();
    assert_eq!(err(TokenizerSpec::new(vec![])), TokenizerError::EmptyVocab);
    assert_eq!(
        err(TokenizerSpec {
            model: "llama".into(),
            ..toy_spec()
        }),
        TokenizerError::UnsupportedModel("llama".into())
    );
    assert_eq!(
        err(TokenizerSpec {
            pre: "qwen2".into(),
            ..toy_spec()
        }),
        TokenizerError::UnsupportedPre("qwen2".into())
    );
    assert_eq!(
        err(TokenizerSpec {
            token_types: vec![1, 3],
            ..toy_spec()
        }),
        TokenizerError::TokenTypesLength {
            tokens: 17,
            types: 2
        }
    );
    let mut spec = toy_spec();
    spec.token_types[5] = 9;
    assert_eq!(
        err(spec),
        TokenizerError::BadTokenType {
            id: 5,
            token_type: 9
        }
    );
    let mut spec = toy_spec();
    spec.tokens[7] = "h".into();
    assert_eq!(
        err(spec),
        TokenizerError::DuplicateToken {
            token: "h".into(),
            first: 2,
            second: 7
        }
    );
    for bad in ["hi", "h  i", " h", "a b c"] {
        let mut spec = toy_spec();
        spec.merges.push(bad.into());
        assert_eq!(
            err(spec),
            TokenizerError::MalformedMerge {
                index: 4,
                merge: bad.into()
            },
            "{bad:?}"
        );
    }
    for (merge, missing) in [("x i", "x"), ("h x", "x"), ("i h", "ih")] {
        let mut spec = toy_spec();
        spec.merges.push(merge.into());
        assert_eq!(
            err(spec),
            TokenizerError::UnknownMergeToken {
                index: 4,
                token: missing.into()
            }
        );
    }
    assert_eq!(
        err(TokenizerSpec {
            eos: Some(17),
            ..toy_spec()
        }),
        TokenizerError::BadId {
            which: "eos",
            id: 17,
            vocab_size: 17
        }
    );
    // Errors print as sentences.
    assert_eq!(
        TokenizerError::UnsupportedPre("qwen2".into()).to_string(),
        "pre-tokenizer \"qwen2\" is not supported"
    );
}

#[test]
fn toy_gpt2_pre_keeps_digit_runs() {
    let mut spec = toy_spec();
    spec.pre = "gpt-2".into();
    spec.tokens.push("12".into());
    spec.token_types.push(1);
    spec.merges.push("1 2".into());
    let tok = Tokenizer::from_vocab(spec).unwrap();
    assert_eq!(tok.encode("12"), [17]);
    // With `smollm`'s digit split the merge never sees both digits.
    let mut spec = toy_spec();
    spec.tokens.push("12".into());
    spec.token_types.push(1);
    spec.merges.push("1 2".into());
    assert_eq!(Tokenizer::from_vocab(spec).unwrap().encode("12"), [6, 7]);
}

// ------------------------------------------------------------------ chat template

fn messages(raw: &[(&str, &str)]) -> Vec<Message> {
    raw.iter()
        .map(|&(role, content)| {
            let role = match role {
                "system" => Role::System,
                "user" => Role::User,
                "assistant" => Role::Assistant,
                other => panic!("unknown role {other}"),
            };
            Message::new(role, content)
        })
        .collect()
}

#[test]
fn chat_template_matches_the_ggufs_jinja() {
    // The template the fixture was rendered from is the one `ChatTemplate::smollm2`
    // implements (a change in the GGUF's template must show up here).
    assert!(fixture::CHAT_TEMPLATE.contains(ChatTemplate::SMOLLM2_SYSTEM));
    for (raw, expected) in fixture::CHATS {
        assert_eq!(
            ChatTemplate::smollm2().render(&messages(raw)),
            *expected,
            "{raw:?}"
        );
    }
}

#[test]
fn chat_template_variants() {
    let t = ChatTemplate::chatml(None);
    assert_eq!(
        t.render(&[Message::user("Hi")]),
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(t.render(&[]), "<|im_start|>assistant\n");
    assert_eq!(
        ChatTemplate::smollm2().render(&[]),
        "<|im_start|>assistant\n"
    );
    assert_eq!(
        ChatTemplate::smollm2().render_messages(&[Message::system("S"), Message::assistant("A")]),
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
    );
    assert_eq!(Role::Assistant.to_string(), "assistant");
}

// ------------------------------------------------------------------ SmolLM2's vocabulary

/// SmolLM2's tokenizer, or `None` (with a message) when the model file is absent.
fn smollm2() -> Option<&'static Tokenizer> {
    static TOK: OnceLock<Option<Tokenizer>> = OnceLock::new();
    TOK.get_or_init(|| {
        let Some(path) = support::smollm2_path() else {
            eprintln!(
                "SKIPPED: SmolLM2-135M-Instruct GGUF not found (run scripts/fetch_model.py \
                 or set $VOLTA_SMOLLM2)"
            );
            return None;
        };
        let meta = gguf::tokenizer_metadata(&path);
        Some(Tokenizer::from_vocab(meta).expect("SmolLM2's vocabulary builds"))
    })
    .as_ref()
}

#[test]
fn smollm2_metadata() {
    let Some(tok) = smollm2() else { return };
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!(
        (tok.bos(), tok.eos(), tok.pad()),
        (Some(1), Some(2), Some(2))
    );
    assert_eq!(tok.token(2).as_deref(), Some("<|im_end|>"));
    assert!((0..=16).all(|i| tok.is_special(i)) && !tok.is_special(17));
}

#[test]
fn smollm2_matches_the_reference_ids() {
    let Some(tok) = smollm2() else { return };
    for &(prompt, ids, decoded) in fixture::CASES {
        assert_eq!(tok.encode(prompt), ids, "encoding {prompt:?}");
        assert_eq!(tok.decode(ids), decoded, "decoding {prompt:?}");
        assert_eq!(decoded, prompt);
    }
}

#[test]
fn smollm2_chat_prompt_is_37_tokens() {
    let Some(tok) = smollm2() else { return };
    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tok.encode(&prompt);
    assert_eq!(ids.len(), 37);
    assert_eq!(ids[0], tok.token_id("<|im_start|>").unwrap());
    assert_eq!(ids.iter().filter(|&&i| i == tok.eos().unwrap()).count(), 2);
    assert_eq!(
        tok.decode_skip_special(&ids),
        "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face\n\
         user\nWhat is the capital of France?\nassistant\n"
    );
}

#[test]
fn smollm2_stream_equals_full_decode() {
    let Some(tok) = smollm2() else { return };
    let mut split_emoji = false;
    for &(prompt, ids, _) in fixture::CASES {
        let mut stream = tok.decode_stream();
        let mut text = String::new();
        for &id in ids {
            match stream.push(id) {
                Some(piece) => text.push_str(&piece),
                None => split_emoji |= prompt.contains('🦀'),
            }
        }
        assert_eq!(text, tok.decode(ids), "streaming {prompt:?}");
    }
    // Some emoji in the fixture spans several tokens, so the stream had to wait.
    assert!(split_emoji, "no multi-token character exercised the stream");
}

/// The least of a GGUF reader that finds the tokenizer's metadata: test-only, so the
/// library's GGUF support (another module) is not duplicated.
mod gguf {
    use std::io::{BufReader, Read};
    use std::path::Path;

    use volta::models::TokenizerSpec;

    enum Value {
        Int(i64),
        Str(String),
        Strs(Vec<String>),
        Ints(Vec<i64>),
        Other,
    }

    struct R<T>(T);

    impl<T: Read> R<T> {
        fn bytes<const N: usize>(&mut self) -> [u8; N] {
            let mut b = [0; N];
            self.0.read_exact(&mut b).unwrap();
            b
        }
        fn u32(&mut self) -> u32 {
            u32::from_le_bytes(self.bytes())
        }
        fn u64(&mut self) -> u64 {
            u64::from_le_bytes(self.bytes())
        }
        fn string(&mut self) -> String {
            let mut s = vec![0; self.u64() as usize];
            self.0.read_exact(&mut s).unwrap();
            String::from_utf8(s).unwrap()
        }
        /// A scalar of GGUF type `ty` (integers widened; floats and bools skipped).
        fn scalar(&mut self, ty: u32) -> Value {
            match ty {
                0 => Value::Int(self.bytes::<1>()[0] as i64),
                1 => Value::Int(self.bytes::<1>()[0] as i8 as i64),
                2 => Value::Int(u16::from_le_bytes(self.bytes()) as i64),
                3 => Value::Int(i16::from_le_bytes(self.bytes()) as i64),
                4 => Value::Int(self.u32() as i64),
                5 => Value::Int(i32::from_le_bytes(self.bytes()) as i64),
                6 => {
                    self.bytes::<4>();
                    Value::Other
                }
                7 => Value::Int(self.bytes::<1>()[0] as i64),
                8 => Value::Str(self.string()),
                10 => Value::Int(self.u64() as i64),
                11 => Value::Int(i64::from_le_bytes(self.bytes())),
                12 => {
                    self.bytes::<8>();
                    Value::Other
                }
                _ => panic!("GGUF value type {ty}"),
            }
        }
        fn value(&mut self) -> Value {
            let ty = self.u32();
            if ty != 9 {
                return self.scalar(ty);
            }
            let (ety, n) = (self.u32(), self.u64());
            let items: Vec<Value> = (0..n).map(|_| self.scalar(ety)).collect();
            match ety {
                8 => Value::Strs(
                    items
                        .into_iter()
                        .map(|v| match v {
                            Value::Str(s) => s,
                            _ => unreachable!(),
                        })
                        .collect(),
                ),
                6 | 12 => Value::Other,
                _ => Value::Ints(
                    items
                        .into_iter()
                        .map(|v| match v {
                            Value::Int(i) => i,
                            _ => unreachable!(),
                        })
                        .collect(),
                ),
            }
        }
    }

    /// The `tokenizer.ggml.*` values of the GGUF at `path`, as a spec.
    pub fn tokenizer_metadata(path: &Path) -> TokenizerSpec {
        let mut r = R(BufReader::new(std::fs::File::open(path).unwrap()));
        assert_eq!(&r.bytes::<4>(), b"GGUF");
        assert!(r.u32() >= 2, "GGUF v1 is not supported");
        let (_tensors, kvs) = (r.u64(), r.u64());
        let mut spec = TokenizerSpec::new(Vec::new());
        for _ in 0..kvs {
            let key = r.string();
            let value = r.value();
            let id = |v: &Value| match v {
                Value::Int(i) => Some(*i as u32),
                _ => None,
            };
            match (key.as_str(), value) {
                ("tokenizer.ggml.model", Value::Str(s)) => spec.model = s,
                ("tokenizer.ggml.pre", Value::Str(s)) => spec.pre = s,
                ("tokenizer.ggml.tokens", Value::Strs(v)) => spec.tokens = v,
                ("tokenizer.ggml.merges", Value::Strs(v)) => spec.merges = v,
                ("tokenizer.ggml.token_type", Value::Ints(v)) => {
                    spec.token_types = v.into_iter().map(|t| t as i32).collect()
                }
                ("tokenizer.ggml.bos_token_id", v) => spec.bos = id(&v),
                ("tokenizer.ggml.eos_token_id", v) => spec.eos = id(&v),
                ("tokenizer.ggml.padding_token_id", v) => spec.pad = id(&v),
                ("tokenizer.ggml.add_bos_token", Value::Int(b)) => spec.add_bos = b != 0,
                _ => {}
            }
        }
        spec
    }
}
