//! ggml's tensor types as GGUF files store them: plain floats and the block
//! quantisations (32 weights per block, one or two f16 scales), with their exact
//! reference dequantisation. The raw blocks are what a quantised matmul reads.
use half::f16;

/// A ggml tensor type (the `type` field of a GGUF tensor info).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit floats.
    F32,
    /// 16-bit floats.
    F16,
    /// Blocks of 32: an f16 scale `d` and 4-bit `q`; `x = (q − 8)·d`.
    Q4_0,
    /// Blocks of 32: f16 `d` and `m` and 4-bit `q`; `x = q·d + m`.
    Q4_1,
    /// Blocks of 32: an f16 scale `d` and 8-bit signed `q`; `x = q·d`.
    Q8_0,
    /// A type this reader knows by id but does not decode (Q5, K-quants, …).
    Other(u32),
}

/// Weights per block of the block types.
pub const BLOCK: usize = 32;

impl GgmlType {
    /// The type with ggml id `id`.
    pub fn from_id(id: u32) -> Self {
        match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            8 => GgmlType::Q8_0,
            other => GgmlType::Other(other),
        }
    }

    /// ggml's id of the type.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q8_0 => 8,
            GgmlType::Other(id) => id,
        }
    }

    /// `(elements, bytes)` of one block (a single element for float types); `None`
    /// for types this reader does not decode.
    pub fn block(self) -> Option<(usize, usize)> {
        match self {
            GgmlType::F32 => Some((1, 4)),
            GgmlType::F16 => Some((1, 2)),
            GgmlType::Q4_0 => Some((BLOCK, 2 + BLOCK / 2)),
            GgmlType::Q4_1 => Some((BLOCK, 4 + BLOCK / 2)),
            GgmlType::Q8_0 => Some((BLOCK, 2 + BLOCK)),
            GgmlType::Other(_) => None,
        }
    }

    /// The bytes of `n` elements, or `None` when the type is not decoded, `n` is
    /// not a whole number of blocks, or the size overflows.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        let (elems, bytes) = self.block()?;
        if !n.is_multiple_of(elems as u64) {
            return None;
        }
        (n / elems as u64).checked_mul(bytes as u64)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GgmlType::Other(id) => write!(f, "ggml type {id}"),
            known => write!(f, "{known:?}"),
        }
    }
}

fn half_at(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Decodes `bytes` of type `ty` to f32 values, as ggml's reference
/// `dequantize_row_*` does. `None` when the type is not decoded or `bytes` is not
/// a whole number of blocks.
pub fn dequantize(ty: GgmlType, bytes: &[u8]) -> Option<Vec<f32>> {
    let (elems, size) = ty.block()?;
    if !bytes.len().is_multiple_of(size) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / size * elems);
    for b in bytes.chunks_exact(size) {
        match ty {
            GgmlType::F32 => out.push(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            GgmlType::F16 => out.push(half_at(b, 0)),
            // The low nibbles are the block's first 16 weights, the high ones the rest.
            GgmlType::Q4_0 => {
                let d = half_at(b, 0);
                let q = &b[2..];
                out.extend(q.iter().map(|&v| ((v & 0x0f) as i32 - 8) as f32 * d));
                out.extend(q.iter().map(|&v| ((v >> 4) as i32 - 8) as f32 * d));
            }
            GgmlType::Q4_1 => {
                let (d, m) = (half_at(b, 0), half_at(b, 2));
                let q = &b[4..];
                out.extend(q.iter().map(|&v| (v & 0x0f) as f32 * d + m));
                out.extend(q.iter().map(|&v| (v >> 4) as f32 * d + m));
            }
            GgmlType::Q8_0 => {
                let d = half_at(b, 0);
                out.extend(b[2..].iter().map(|&v| v as i8 as f32 * d));
            }
            GgmlType::Other(_) => unreachable!("block() is None for Other"),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(x: f32) -> [u8; 2] {
        f16::from_f32(x).to_le_bytes()
    }

    #[test]
    fn blocks_decode_by_ggml_reference_formulas() {
        // Q4_0: d = 0.5, nibbles 0..16 low and 15..=0 high.
        let mut b = h(0.5).to_vec();
        b.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
        let x = dequantize(GgmlType::Q4_0, &b).unwrap();
        assert_eq!(x.len(), 32);
        assert_eq!(x[0], -4.0);
        assert_eq!(x[15], 3.5);
        assert_eq!(x[16], 3.5);
        assert_eq!(x[31], -4.0);

        // Q4_1: d = 0.25, m = -1.
        let mut b = h(0.25).to_vec();
        b.extend(h(-1.0));
        b.extend((0..16u8).map(|i| i | (i << 4)));
        let x = dequantize(GgmlType::Q4_1, &b).unwrap();
        assert_eq!((x[0], x[15], x[16], x[31]), (-1.0, 2.75, -1.0, 2.75));

        // Q8_0: d = 2, q = -16..16.
        let mut b = h(2.0).to_vec();
        b.extend((-16i8..16).map(|q| q as u8));
        let x = dequantize(GgmlType::Q8_0, &b).unwrap();
        assert_eq!((x[0], x[16], x[31]), (-32.0, 0.0, 30.0));

        let x = dequantize(GgmlType::F16, &[h(1.5), h(-2.0)].concat()).unwrap();
        assert_eq!(x, vec![1.5, -2.0]);
        assert_eq!(dequantize(GgmlType::Q8_0, &b[..33]), None);
        assert_eq!(dequantize(GgmlType::Other(12), &b), None);
    }

    #[test]
    fn sizes_and_ids() {
        assert_eq!(GgmlType::Q4_1.bytes_for(576 * 2), Some(36 * 20));
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
        for id in [0, 1, 2, 3, 8, 14] {
            assert_eq!(GgmlType::from_id(id).id(), id);
        }
        assert_eq!(GgmlType::Other(14).to_string(), "ggml type 14");
    }
}
