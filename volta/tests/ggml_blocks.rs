//! Every block type Volta decodes against PyPI's `gguf` package (its numpy
//! reference): random blocks and the values the reference decodes them to, written
//! by `scripts/ggml_blocks_fixture.py` into `fixtures/ggml_blocks.txt`.
use volta::io::quant::{GgmlType, KNOWN_TYPES, dequantize};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn block_types_decode_as_the_gguf_package_does() {
    let fixture = include_str!("fixtures/ggml_blocks.txt");
    let mut seen = Vec::new();
    for line in fixture.lines().filter(|l| !l.starts_with('#')) {
        let [name, n, bytes, values] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("a fixture line has four fields: {line:.60}");
        };
        let id = KNOWN_TYPES
            .iter()
            .find(|t| t.1 == name)
            .expect("a ggml type")
            .0;
        let ty = GgmlType::from_id(id).expect("a known type");
        let n: u64 = n.parse().expect("an element count");
        let want: Vec<f32> = hex(values)
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let got = dequantize(ty, &hex(bytes), n).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // Equal values (the reference's −0.0 and 0.0 compare equal).
            assert!(g == w, "{name}[{i}]: {g} vs the reference's {w}");
        }
        seen.push(name);
    }
    assert_eq!(
        seen,
        [
            "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"
        ]
    );
}
