//! The GGUF reader: files these tests write (valid, and corrupt in every field),
//! and SmolLM2-135M's real file when it is present (`scripts/fetch_model.py`;
//! `scripts/test.sh` sets `VOLTA_SMOLLM2`, so CI always reads it).
use crate::support;
use half::f16;
use support::gguf_writer::Writer;
use volta::io::gguf::{Gguf, GgufErrorKind, Value};
use volta::io::quant::{GgmlType, dequantize};

#[allow(dead_code)]
mod reference {
    include!("reference/gguf_quant_fixture.rs");
}

/// A Q4_0 block (d = 0.5, low nibbles 0..16, high 15..=0) and a Q4_1 block
/// (d = 0.25, m = −1, nibbles i and i).
fn q4_blocks() -> (Vec<u8>, Vec<u8>) {
    let mut q4_0 = f16::from_f32(0.5).to_le_bytes().to_vec();
    q4_0.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
    let mut q4_1 = f16::from_f32(0.25).to_le_bytes().to_vec();
    q4_1.extend(f16::from_f32(-1.0).to_le_bytes());
    q4_1.extend((0..16u8).map(|i| i | (i << 4)));
    (q4_0, q4_1)
}

/// A valid file: metadata of all 13 value types (nested arrays too), an alignment
/// of 64, and an F32, an F16, a Q8_0, a Q4_0 and a Q4_1 tensor.
fn valid() -> Vec<u8> {
    let mut w = Writer::default();
    w.header(3, 5, 19);
    w.str("general.architecture").u32(8).str("llama");
    w.str("general.alignment").u32(4).u32(64);
    w.str("a.u8").u32(0).0.push(7);
    w.str("a.i8").u32(1).0.push(-7i8 as u8);
    w.str("a.u16").u32(2).0.extend(65535u16.to_le_bytes());
    w.str("a.i16").u32(3).0.extend((-3i16).to_le_bytes());
    w.str("a.u32").u32(4).u32(4_000_000_000);
    w.str("a.i32").u32(5).0.extend(i32::MIN.to_le_bytes());
    w.str("a.f32").u32(6).0.extend(1.5f32.to_le_bytes());
    w.str("a.bool").u32(7).0.push(1);
    w.str("a.u64").u32(10).u64(1 << 40);
    w.str("a.i64").u32(11).0.extend((-1i64 << 40).to_le_bytes());
    w.str("a.f64").u32(12).0.extend(0.1f64.to_le_bytes());
    w.str("a.empty").u32(8).str("");
    w.str("a.words").u32(9).u32(8).u64(2).str("hi").str("ü");
    w.str("a.nested").u32(9).u32(9).u64(1).u32(5).u64(2);
    w.0.extend(4i32.to_le_bytes());
    w.0.extend((-5i32).to_le_bytes());
    // An array of arrays of strings, the second of them empty.
    w.str("a.deep").u32(9).u32(9).u64(2).u32(8).u64(1).str("x");
    w.u32(8).u64(0);
    w.str("a.no_items").u32(9).u32(12).u64(0);
    w.str("a.floats").u32(9).u32(6).u64(2);
    w.0.extend(0.5f32.to_le_bytes());
    w.0.extend((-2f32).to_le_bytes());
    w.tensor("f32", &[3, 2], 0, 0);
    w.tensor("f16", &[2], 1, 64);
    w.tensor("q8", &[32], 8, 128);
    w.tensor("q4_0", &[32], 2, 192);
    w.tensor("q4_1", &[32, 1], 3, 256);
    w.pad_to(64);
    for i in 0..6 {
        w.0.extend((i as f32).to_le_bytes());
    }
    w.pad_to(64);
    w.0.extend(f16::from_f32(0.5).to_le_bytes());
    w.0.extend(f16::from_f32(-1.0).to_le_bytes());
    w.pad_to(64);
    w.0.extend(f16::from_f32(0.25).to_le_bytes());
    w.0.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let (q4_0, q4_1) = q4_blocks();
    w.pad_to(64);
    w.0.extend(q4_0);
    w.pad_to(64);
    w.0.extend(q4_1);
    w.0
}

#[test]
fn a_valid_file_reads_back() {
    let g = Gguf::parse("valid.gguf", valid()).expect("valid");
    assert_eq!((g.version(), g.alignment()), (3, 64));
    assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(g.get("a.u8"), Some(&Value::U8(7)));
    assert_eq!(g.get("a.i8"), Some(&Value::I8(-7)));
    assert_eq!(g.get("a.u16"), Some(&Value::U16(65535)));
    assert_eq!(g.get("a.i16"), Some(&Value::I16(-3)));
    assert_eq!(g.get_u32("a.u32").unwrap(), 4_000_000_000);
    assert_eq!(g.get_i64("a.i32").unwrap(), i64::from(i32::MIN));
    assert_eq!(g.get_f32("a.f32").unwrap(), 1.5);
    assert_eq!(g.get_f64("a.f32").unwrap(), 1.5);
    assert!(g.get_bool("a.bool").unwrap());
    assert_eq!(g.get_u64("a.u64").unwrap(), 1 << 40);
    assert_eq!(g.get_i64("a.i64").unwrap(), -1 << 40);
    assert_eq!(g.get("a.f64"), Some(&Value::F64(0.1)));
    assert_eq!(g.get_str("a.empty").unwrap(), "");
    assert_eq!(g.metadata().len(), 19);
    assert_eq!(g.metadata()[0].0, "general.architecture");
    assert_eq!(
        g.get_array("a.deep").unwrap(),
        [
            Value::Array(vec![Value::String("x".into())]),
            Value::Array(vec![])
        ]
    );
    assert_eq!(g.get_array("a.no_items").unwrap(), []);
    assert_eq!(
        g.get("a.floats"),
        Some(&Value::Array(vec![Value::F32(0.5), Value::F32(-2.0)]))
    );
    assert_eq!(g.get_str_array("a.words").unwrap(), ["hi", "ü"]);
    assert_eq!(
        g.get("a.nested"),
        Some(&Value::Array(vec![Value::Array(vec![
            Value::I32(4),
            Value::I32(-5)
        ])]))
    );
    let (shape, values) = g.dequantize("f32").unwrap();
    assert_eq!(
        (shape, values),
        (vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    );
    assert_eq!(g.dequantize("f16").unwrap().1, vec![0.5, -1.0]);
    let (info, bytes) = g.tensor("q8").unwrap();
    assert_eq!((info.ty, bytes.len()), (GgmlType::Q8_0, 34));
    let q8 = g.dequantize("q8").unwrap().1;
    assert_eq!((q8[0], q8[16], q8[31]), (-4.0, 0.0, 3.75));
    let (q4_0, q4_1) = q4_blocks();
    assert_eq!(g.tensor("q4_0").unwrap().1, q4_0);
    let (info, bytes) = g.tensor("q4_1").unwrap();
    assert_eq!(
        (info.ty, info.shape(), bytes),
        (GgmlType::Q4_1, vec![1, 32], &q4_1[..])
    );
    let x = g.dequantize("q4_0").unwrap().1;
    assert_eq!((x[0], x[15], x[16], x[31]), (-4.0, 3.5, 3.5, -4.0));
    let (shape, x) = g.dequantize("q4_1").unwrap();
    assert_eq!(shape, [1, 32]);
    assert_eq!((x[0], x[15], x[16], x[31]), (-1.0, 2.75, -1.0, 2.75));
    let names: Vec<_> = g.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["f32", "f16", "q8", "q4_0", "q4_1"]);

    // Asking for what is not there, or of another type, is a typed error too.
    let e = g.get_u64("a.words").unwrap_err();
    assert!(matches!(e.kind, GgufErrorKind::KeyType { .. }), "{e}");
    assert!(e.to_string().contains("valid.gguf"), "{e}");
    let e = g.get_u32("a.u64").unwrap_err();
    assert_eq!(
        e.to_string(),
        "GGUF file valid.gguf: metadata `a.u64` is u64, expected an integer in 0..2^32"
    );
    let e = g.get_f32("a.f64").unwrap_err();
    assert!(matches!(
        e.kind,
        GgufErrorKind::KeyType {
            expected: "f32",
            found: "f64",
            ..
        }
    ));
    assert!(g.get_str_array("a.nested").is_err());
    let e = g.get_str("nope").unwrap_err();
    assert!(matches!(e.kind, GgufErrorKind::MissingKey(_)), "{e}");
    assert!(matches!(
        g.tensor("nope").unwrap_err().kind,
        GgufErrorKind::MissingTensor(_)
    ));
}

/// Random blocks of every decoded type give bit for bit the values of the Python
/// `gguf` package's `gguf.quants.dequantize` (`reference/gguf_quant.py`).
#[test]
fn dequantization_matches_the_python_gguf_package_bit_for_bit() {
    assert_eq!(reference::BLOCKS.len(), 4);
    for &(id, raw, bits) in reference::BLOCKS {
        let ty = GgmlType::from_id(id).unwrap();
        let n =
            raw.len() as u64 / ty.bytes_for(ty.block().unwrap().0).unwrap() * ty.block().unwrap().0;
        let values = dequantize(ty, raw, n).unwrap_or_else(|e| panic!("{ty}: {e}"));
        let got: Vec<u32> = values.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, bits, "{ty}");
    }
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = valid();
    // The data section: four tensors padded to 64 bytes, then the 20-byte Q4_1 block.
    let data_start = bytes.len() - (4 * 64 + 20);
    for cut in 0..bytes.len() - 1 {
        let e = Gguf::parse("cut.gguf", bytes[..cut].to_vec()).expect_err("cut parsed");
        assert!(e.to_string().starts_with("GGUF file cut.gguf: "), "{e}");
        // Inside the header, the file ends inside a field (or a count is found
        // not to fit what is left); after it, a tensor's data is out of bounds.
        if cut <= data_start - 64 {
            assert!(
                matches!(e.kind, GgufErrorKind::Truncated { len, .. } if len == cut as u64)
                    || matches!(e.kind, GgufErrorKind::TooLong { .. }),
                "cut at {cut}: {e}"
            );
        } else if cut >= data_start {
            assert!(
                matches!(e.kind, GgufErrorKind::OutOfBounds { .. }),
                "cut at {cut}: {e}"
            );
        }
    }
}

/// Every byte of a valid file overwritten with 0x00, 0x01, 0x80 or 0xff: each
/// variant parses or is an error naming the file, and whatever parses reads every
/// tensor and key without panicking.
#[test]
fn single_byte_corruptions_never_panic() {
    let bytes = valid();
    for i in 0..bytes.len() {
        for v in [0x00, 0x01, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[i] = v;
            match Gguf::parse("flip.gguf", bad) {
                Err(e) => assert!(e.to_string().starts_with("GGUF file flip.gguf: "), "{e}"),
                Ok(g) => {
                    for t in g.tensors() {
                        let _ = g.dequantize(&t.name);
                    }
                    for (k, _) in g.metadata() {
                        let _ = (g.get_u32(k), g.get_str_array(k), g.get_i64_array(k));
                    }
                }
            }
        }
    }
}

fn parse_err(bytes: Vec<u8>) -> GgufErrorKind {
    let e = Gguf::parse("bad.gguf", bytes).expect_err("corrupt");
    assert!(e.to_string().starts_with("GGUF file bad.gguf: "), "{e}");
    e.kind
}

#[test]
fn corrupt_headers_are_typed_errors() {
    let mut bad = valid();
    bad[..4].copy_from_slice(b"GGML");
    assert!(matches!(parse_err(bad), GgufErrorKind::BadMagic(_)));
    for version in [1, 99] {
        let mut bad = valid();
        bad[4..8].copy_from_slice(&u32::to_le_bytes(version));
        assert!(matches!(parse_err(bad), GgufErrorKind::Version(v) if v == version));
    }
    // Counts and lengths far beyond the file are rejected before allocating.
    let mut w = Writer::default();
    w.header(3, 1 << 60, 0);
    assert!(matches!(parse_err(w.0), GgufErrorKind::TooLong { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 1).u64(1 << 40);
    assert!(matches!(parse_err(w.0), GgufErrorKind::TooLong { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(9).u32(4).u64(1 << 60);
    assert!(matches!(parse_err(w.0), GgufErrorKind::TooLong { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 1)
        .str("k")
        .u32(8)
        .u64(1 << 40)
        .0
        .extend(b"abc");
    assert!(matches!(
        parse_err(w.0),
        GgufErrorKind::TooLong { count, .. } if count == 1 << 40
    ));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(9).u32(8).u64(1 << 60);
    assert!(matches!(parse_err(w.0), GgufErrorKind::TooLong { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(9).u32(0).u64(u64::MAX);
    assert!(matches!(parse_err(w.0), GgufErrorKind::TooLong { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(9).u32(99).u64(0);
    assert!(matches!(
        parse_err(w.0),
        GgufErrorKind::ValueType { id: 99, .. }
    ));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(13).u32(0);
    assert!(matches!(
        parse_err(w.0),
        GgufErrorKind::ValueType { id: 13, .. }
    ));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(8).u64(2);
    w.0.extend([0xff, 0xfe]);
    assert!(matches!(parse_err(w.0), GgufErrorKind::Utf8 { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("k").u32(9);
    for _ in 0..6 {
        w.u32(9).u64(1);
    }
    w.0.extend([0u8; 64]);
    assert!(matches!(parse_err(w.0), GgufErrorKind::TooDeep { .. }));
    let mut w = Writer::default();
    w.header(3, 0, 2)
        .str("k")
        .u32(4)
        .u32(1)
        .str("k")
        .u32(4)
        .u32(2);
    assert!(matches!(parse_err(w.0), GgufErrorKind::Duplicate(k) if k == "k"));
    let mut w = Writer::default();
    w.header(3, 0, 1).str("general.alignment").u32(4).u32(24);
    assert!(matches!(parse_err(w.0), GgufErrorKind::Alignment(_)));
}

#[test]
fn corrupt_tensor_entries_are_typed_errors() {
    let file = |dims: &[u64], ty: u32, offset: u64, data: usize| {
        let mut w = Writer::default();
        w.header(3, 1, 0).tensor("t", dims, ty, offset).pad_to(32);
        w.0.extend(vec![0u8; data]);
        w.0
    };
    assert!(Gguf::parse("ok.gguf", file(&[32], 3, 0, 20)).is_ok());
    assert!(matches!(
        parse_err(file(&[32], 3, 32, 20)),
        GgufErrorKind::OutOfBounds { .. }
    ));
    assert!(matches!(
        parse_err(file(&[64], 3, 0, 20)),
        GgufErrorKind::OutOfBounds { .. }
    ));
    assert!(matches!(
        parse_err(file(&[32], 3, 4, 64)),
        GgufErrorKind::Misaligned { .. }
    ));
    assert!(matches!(
        parse_err(file(&[33], 3, 0, 64)),
        GgufErrorKind::Dims { .. }
    ));
    assert!(matches!(
        parse_err(file(&[1 << 40, 1 << 40], 0, 0, 64)),
        GgufErrorKind::Dims { .. }
    ));
    assert!(matches!(
        parse_err(file(&[1 << 33, 4], 0, 0, 64)),
        GgufErrorKind::OutOfBounds { .. }
    ));
    // A type this reader does not decode parses (its bounds checked by its known
    // size), gives its raw bytes, and is an error when dequantised.
    assert!(matches!(
        parse_err(file(&[256], 10, 0, 83)),
        GgufErrorKind::OutOfBounds { bytes: 84, .. }
    ));
    let g = Gguf::parse("k.gguf", file(&[256], 10, 0, 84)).unwrap();
    let (info, bytes) = g.tensor("t").unwrap();
    assert_eq!((info.ty.name(), bytes.len()), ("Q2_K", 84));
    let e = g.dequantize("t").unwrap_err();
    assert!(
        matches!(e.kind, GgufErrorKind::UnsupportedType { .. }),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "GGUF file k.gguf: tensor `t` has type Q2_K (ggml type 10), which this reader does not decode"
    );
    // A K-quant that it decodes: Q4_K's 144 bytes per 256 weights.
    assert!(matches!(
        parse_err(file(&[256], 12, 0, 143)),
        GgufErrorKind::OutOfBounds { bytes: 144, .. }
    ));
    let g = Gguf::parse("k.gguf", file(&[256], 12, 0, 144)).unwrap();
    assert_eq!(g.dequantize("t").unwrap().1.len(), 256);
    // An id ggml does not define is an error when parsing: its size is unknown.
    for id in [4, 42, u32::MAX] {
        assert!(matches!(
            parse_err(file(&[32], id, 0, 64)),
            GgufErrorKind::UnknownType { id: found, ref name, .. } if found == id && name == "t"
        ));
    }
    // Too many dims.
    assert!(matches!(
        parse_err(file(&[1; 9], 0, 0, 64)),
        GgufErrorKind::TooLong {
            what: "a dim count",
            ..
        }
    ));
    // Empty tensors and a data section that starts past the end of the file (an
    // alignment of 2^40) are fine as long as nothing is read from it.
    let g = Gguf::parse("e.gguf", file(&[0, 5], 0, 0, 0)).unwrap();
    assert_eq!(g.dequantize("t").unwrap(), (vec![5, 0], vec![]));
    let mut w = Writer::default();
    w.header(3, 1, 1)
        .str("general.alignment")
        .u32(10)
        .u64(1 << 40);
    w.tensor("t", &[0], 0, 0);
    let g = Gguf::parse("a.gguf", w.0.clone()).unwrap();
    assert_eq!(g.tensor("t").unwrap().1, &[] as &[u8]);
    let mut w = Writer::default();
    w.header(3, 1, 1)
        .str("general.alignment")
        .u32(10)
        .u64(1 << 40);
    w.tensor("t", &[1], 0, 0).0.extend([0u8; 64]);
    assert!(matches!(parse_err(w.0), GgufErrorKind::OutOfBounds { .. }));
    let mut w = Writer::default();
    w.header(3, 2, 0)
        .tensor("t", &[1], 0, 0)
        .tensor("t", &[1], 0, 32)
        .pad_to(32);
    w.0.extend([0u8; 64]);
    assert!(matches!(parse_err(w.0), GgufErrorKind::Duplicate(ref n) if n == "t"));
}

#[test]
fn a_missing_file_is_an_io_error() {
    let e = Gguf::open("/nonexistent/model.gguf").unwrap_err();
    assert!(matches!(e.kind, GgufErrorKind::Io(_)), "{e}");
    assert!(e.to_string().contains("/nonexistent/model.gguf"));
}

#[test]
fn smollm2_reads_with_its_architecture_and_weights() {
    let Some(path) = support::smollm2_path() else {
        eprintln!("SKIPPED: no SmolLM2 GGUF (run scripts/fetch_model.py or set VOLTA_SMOLLM2)");
        return;
    };
    let g = Gguf::open(&path).expect("the real file parses");
    assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
    for (key, want) in [
        ("llama.block_count", 30),
        ("llama.embedding_length", 576),
        ("llama.feed_forward_length", 1536),
        ("llama.attention.head_count", 9),
        ("llama.attention.head_count_kv", 3),
    ] {
        assert_eq!(g.get_u64(key).unwrap(), want, "{key}");
    }
    assert_eq!(g.get_u32("llama.context_length").unwrap(), 8192);
    assert_eq!(g.get_u32("llama.vocab_size").unwrap(), 49152);
    assert_eq!(g.get_u32("llama.rope.dimension_count").unwrap(), 64);
    assert_eq!(g.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(
        g.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(),
        1e-5
    );
    assert_eq!(g.get_u32("general.file_type").unwrap(), 3); // mostly Q4_1
    assert_eq!((g.version(), g.alignment()), (3, 32));
    assert_eq!(
        g.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        49152
    );
    assert_eq!(
        g.get_i64_array("tokenizer.ggml.token_type").unwrap().len(),
        49152
    );
    assert_eq!(
        g.get_str_array("tokenizer.ggml.merges").unwrap().len(),
        48900
    );
    assert_eq!(g.metadata().len(), 33);

    // Every tensor's type and ggml dims: the matrices are Q4_1, the norms F32 and
    // the (tied) embedding Q8_0.
    let expected = |name: &str| -> (GgmlType, Vec<u64>) {
        let layer = name.strip_prefix("blk.").and_then(|r| r.split_once('.'));
        match layer.map_or(name, |(_, rest)| rest) {
            "token_embd.weight" => (GgmlType::Q8_0, vec![576, 49152]),
            "output_norm.weight" | "attn_norm.weight" | "ffn_norm.weight" => {
                (GgmlType::F32, vec![576])
            }
            "attn_q.weight" | "attn_output.weight" => (GgmlType::Q4_1, vec![576, 576]),
            "attn_k.weight" | "attn_v.weight" => (GgmlType::Q4_1, vec![576, 192]),
            "ffn_gate.weight" | "ffn_up.weight" => (GgmlType::Q4_1, vec![576, 1536]),
            "ffn_down.weight" => (GgmlType::Q4_1, vec![1536, 576]),
            other => panic!("unexpected tensor {other}"),
        }
    };
    let mut census = std::collections::BTreeMap::new();
    for t in g.tensors() {
        eprintln!("{:<28} {:<5} {:?}", t.name, t.ty.name(), t.dims);
        assert_eq!((t.ty, t.dims.clone()), expected(&t.name), "{}", t.name);
        *census.entry(t.ty.name()).or_insert(0) += 1;
    }
    assert_eq!(
        census.into_iter().collect::<Vec<_>>(),
        [("F32", 61), ("Q4_1", 210), ("Q8_0", 1)]
    );
    for i in 0..30 {
        assert!(g.has_tensor(&format!("blk.{i}.ffn_down.weight")));
    }
    // 30 blocks of 9 tensors, the embedding and the final norm (the output layer is
    // tied to the embedding).
    assert_eq!(g.tensors().len(), 30 * 9 + 2, "{:?}", g.tensors().len());
    let (info, _) = g.tensor("token_embd.weight").unwrap();
    assert_eq!(info.shape(), [49152, 576]);
    let (info, _) = g.tensor("blk.0.attn_k.weight").unwrap();
    assert_eq!(info.shape(), [192, 576]);
    let (shape, norm) = g.dequantize("output_norm.weight").unwrap();
    assert_eq!(shape, [576]);
    assert!(norm.iter().all(|x| x.is_finite()));
    // token_embd.weight's first values of a few rows, bit for bit as the Python
    // `gguf` package decodes them.
    let (info, _) = g.tensor("token_embd.weight").unwrap();
    assert_eq!(info.ty.id(), reference::EMBD_TYPE);
    let (_, embd) = g.dequantize("token_embd.weight").unwrap();
    assert_eq!(reference::EMBD_ROWS.len(), 6);
    for &(row, bits) in reference::EMBD_ROWS {
        let got: Vec<u32> = embd[row * 576..][..bits.len()]
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(got, bits, "token_embd.weight row {row}");
    }
    let (_, q) = g.dequantize("blk.0.attn_q.weight").unwrap();
    assert_eq!(reference::Q4_1_ROWS.len(), 3);
    for &(row, bits) in reference::Q4_1_ROWS {
        let got: Vec<u32> = q[row * 576..][..bits.len()]
            .iter()
            .map(|x| x.to_bits())
            .collect();
        assert_eq!(got, bits, "blk.0.attn_q.weight row {row}");
    }
    // Every tensor decodes to finite values of plausible size.
    for t in g.tensors() {
        let (_, values) = g.dequantize(&t.name).unwrap();
        assert_eq!(values.len() as u64, t.len());
        assert!(
            values.iter().all(|x| x.is_finite() && x.abs() < 1e3),
            "{}",
            t.name
        );
    }
}

/// A model fuses a layer's projections into one matrix. Tensors stored in
/// different block types (as "K-quant mix" files store them: a layer's Q and K in
/// Q5_0, its V in Q8_0) fuse into sub-blocks, and the fused product is the
/// product of the parts; a block type the reader does not decode is an error
/// naming the tensor and the type.
#[test]
fn fused_tensors_of_different_block_types_fuse() {
    use volta::Cpu;
    use volta::io::quant::QFormat;
    use volta::tensor::QTensor;
    let mut w = Writer::default();
    w.header(3, 4, 0);
    w.tensor("q8", &[32, 1], 8, 0);
    w.tensor("q4", &[32, 1], 2, 64);
    w.tensor("q5", &[32, 1], 6, 128);
    w.tensor("q2k", &[256, 1], 10, 192);
    w.pad_to(32);
    w.0.extend(f16::from_f32(0.25).to_le_bytes());
    w.0.extend((0..32).map(|i| i as u8));
    w.pad_to(64);
    w.0.extend(q4_blocks().0);
    w.pad_to(64);
    // One Q5_0 block: d = 0.5, low nibbles 0..16, fifth bits of weights 0..8 set.
    w.0.extend(f16::from_f32(0.5).to_le_bytes());
    w.0.extend([0xff, 0, 0, 0]);
    w.0.extend((0..16).map(|i| i as u8));
    w.pad_to(64);
    w.0.extend([0u8; 84]); // one Q2_K block
    let g = Gguf::parse("mix.gguf", w.0).unwrap();
    let fused = QTensor::<Cpu>::from_gguf_stacked(&g, &["q8", "q4", "q5"], 32).unwrap();
    assert_eq!(fused.shape().rows, 3);
    assert_eq!(fused.shape().format, QFormat::SubBlocks);
    let mut want = Vec::new();
    for name in ["q8", "q4", "q5"] {
        want.extend(g.dequantize(name).unwrap().1);
    }
    assert_eq!(fused.dequantize().to_vec(), want);
    let err = QTensor::<Cpu>::from_gguf_stacked(&g, &["q8", "q2k"], 32).unwrap_err();
    assert!(
        matches!(err.kind, GgufErrorKind::UnsupportedType { ref name, ty } if name == "q2k" && ty.name() == "Q2_K"),
        "{err:?}"
    );
    // One block type the kernels read directly: ggml's blocks as they are.
    let fused = QTensor::<Cpu>::from_gguf_stacked(&g, &["q8", "q8"], 32).unwrap();
    assert_eq!(fused.shape().rows, 2);
    assert_eq!(
        fused.shape().format,
        QFormat::Ggml(volta::io::quant::GgmlType::Q8_0)
    );
}
