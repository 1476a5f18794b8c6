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
    /// Blocks of 32: an f16 scale `d` and 4-bit `q`; `x = (q − 8)·d` ([`BlockQ4_0`]).
    Q4_0,
    /// Blocks of 32: f16 `d` and `m` and 4-bit `q`; `x = q·d + m` ([`BlockQ4_1`]).
    Q4_1,
    /// Blocks of 32: an f16 scale `d` and 8-bit signed `q`; `x = q·d` ([`BlockQ8_0`]).
    Q8_0,
    /// A type ggml defines (its id is in [`KNOWN_TYPES`]) that this reader does not
    /// decode: Q5, K-quants, IQ, BF16, … Its size is known, so its bytes can still
    /// be located and bounds-checked.
    Other(u32),
}

/// Weights per block of the 32-weight block types (Q4_0, Q4_1, Q8_0).
pub const BLOCK: usize = 32;

/// Every type id ggml defines, with its name and `(elements, bytes)` per block (as
/// `gguf.constants.GGML_QUANT_SIZES`; ids 4, 5, 31–33 and 36–38 were removed).
pub const KNOWN_TYPES: &[(u32, &str, u64, u64)] = &[
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 40),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
];

fn known(id: u32) -> Option<&'static (u32, &'static str, u64, u64)> {
    KNOWN_TYPES.iter().find(|t| t.0 == id)
}

impl GgmlType {
    /// The type with ggml id `id`; `None` for an id ggml does not define.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            8 => GgmlType::Q8_0,
            other => {
                known(other)?;
                GgmlType::Other(other)
            }
        })
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

    /// ggml's name of the type (`"Q4_1"`, `"Q6_K"`).
    pub fn name(self) -> &'static str {
        known(self.id()).map_or("unknown", |t| t.1)
    }

    /// Whether [`dequantize`] decodes the type.
    pub fn is_supported(self) -> bool {
        !matches!(self, GgmlType::Other(_))
    }

    /// `(elements, bytes)` of one block (a single element for plain types), for
    /// every type ggml defines. `None` only for an `Other` id not in [`KNOWN_TYPES`]
    /// (which [`GgmlType::from_id`] never makes).
    pub fn block(self) -> Option<(u64, u64)> {
        known(self.id()).map(|t| (t.2, t.3))
    }

    /// The bytes of `n` elements, or `None` when `n` is not a whole number of
    /// blocks or the size overflows.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        let (elems, bytes) = self.block()?;
        if !n.is_multiple_of(elems) {
            return None;
        }
        (n / elems).checked_mul(bytes)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (ggml type {})", self.name(), self.id())
    }
}

/// Why bytes could not be dequantised.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantError {
    /// A type this module does not decode.
    Unsupported(GgmlType),
    /// `n` elements are not a whole number of blocks of the type.
    PartialBlock {
        /// The type.
        ty: GgmlType,
        /// The element count asked for.
        n: u64,
    },
    /// The bytes are not the size that `n` elements of the type take.
    Length {
        /// The type.
        ty: GgmlType,
        /// The element count asked for.
        n: u64,
        /// Bytes `n` elements take.
        expected: u64,
        /// Bytes given.
        found: u64,
    },
}

impl std::fmt::Display for QuantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuantError::Unsupported(ty) => write!(f, "{ty} is not decoded by this reader"),
            QuantError::PartialBlock { ty, n } => {
                write!(f, "{n} elements are not whole blocks of {ty}")
            }
            QuantError::Length {
                ty,
                n,
                expected,
                found,
            } => write!(
                f,
                "{n} elements of {ty} take {expected} bytes, but {found} were given"
            ),
        }
    }
}

impl std::error::Error for QuantError {}

fn half_at(b: &[u8], i: usize) -> f16 {
    f16::from_le_bytes([b[i], b[i + 1]])
}

/// One Q4_0 block as ggml lays it out (`block_q4_0`, 18 bytes): an f16 scale and 32
/// 4-bit quants, two per byte: byte `j`'s low nibble is weight `j`, its high
/// nibble weight `j + 16`. `x = (q − 8)·d`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ4_0 {
    /// The scale.
    pub d: f16,
    /// The quants, two per byte.
    pub qs: [u8; BLOCK / 2],
}

/// One Q4_1 block as ggml lays it out (`block_q4_1`, 20 bytes): an f16 scale, an f16
/// minimum and 32 4-bit quants packed as in [`BlockQ4_0`]. `x = q·d + m`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ4_1 {
    /// The scale.
    pub d: f16,
    /// The minimum (the value of quant 0).
    pub m: f16,
    /// The quants, two per byte.
    pub qs: [u8; BLOCK / 2],
}

/// One Q8_0 block as ggml lays it out (`block_q8_0`, 34 bytes): an f16 scale and 32
/// signed 8-bit quants. `x = q·d`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8_0 {
    /// The scale.
    pub d: f16,
    /// The quants.
    pub qs: [i8; BLOCK],
}

impl BlockQ4_0 {
    /// Bytes per block in a file.
    pub const BYTES: usize = 2 + BLOCK / 2;

    /// The block in its first [`Self::BYTES`] bytes (little-endian scale).
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        let mut qs = [0; BLOCK / 2];
        qs.copy_from_slice(&b[2..]);
        BlockQ4_0 {
            d: half_at(b, 0),
            qs,
        }
    }

    /// Its 32 weights, as ggml's `dequantize_row_q4_0`.
    pub fn dequantize(&self) -> [f32; BLOCK] {
        let d = self.d.to_f32();
        let mut x = [0.0; BLOCK];
        for (j, &q) in self.qs.iter().enumerate() {
            x[j] = ((q & 0x0f) as i32 - 8) as f32 * d;
            x[j + BLOCK / 2] = ((q >> 4) as i32 - 8) as f32 * d;
        }
        x
    }
}

impl BlockQ4_1 {
    /// Bytes per block in a file.
    pub const BYTES: usize = 4 + BLOCK / 2;

    /// The block in its first [`Self::BYTES`] bytes (little-endian scales).
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        let mut qs = [0; BLOCK / 2];
        qs.copy_from_slice(&b[4..]);
        BlockQ4_1 {
            d: half_at(b, 0),
            m: half_at(b, 2),
            qs,
        }
    }

    /// Its 32 weights, as ggml's `dequantize_row_q4_1`.
    pub fn dequantize(&self) -> [f32; BLOCK] {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        let mut x = [0.0; BLOCK];
        for (j, &q) in self.qs.iter().enumerate() {
            x[j] = (q & 0x0f) as f32 * d + m;
            x[j + BLOCK / 2] = (q >> 4) as f32 * d + m;
        }
        x
    }
}

impl BlockQ8_0 {
    /// Bytes per block in a file.
    pub const BYTES: usize = 2 + BLOCK;

    /// The block in its first [`Self::BYTES`] bytes (little-endian scale).
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        let mut qs = [0; BLOCK];
        for (q, &v) in qs.iter_mut().zip(&b[2..]) {
            *q = v as i8;
        }
        BlockQ8_0 {
            d: half_at(b, 0),
            qs,
        }
    }

    /// Its 32 weights, as ggml's `dequantize_row_q8_0`.
    pub fn dequantize(&self) -> [f32; BLOCK] {
        let d = self.d.to_f32();
        self.qs.map(|q| q as f32 * d)
    }
}

// The in-memory layouts equal the file's, so a block slice can be uploaded as is.
const _: () = assert!(std::mem::size_of::<BlockQ4_0>() == BlockQ4_0::BYTES);
const _: () = assert!(std::mem::size_of::<BlockQ4_1>() == BlockQ4_1::BYTES);
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == BlockQ8_0::BYTES);

fn blocks<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = &[u8; N]> {
    bytes
        .chunks_exact(N)
        .map(|c| c.try_into().expect("chunks_exact gives N bytes"))
}

/// Decodes `n` elements of type `ty` from `bytes` to f32 values, exactly as ggml's
/// reference `dequantize_row_*` (and the Python `gguf` package) does. `bytes` must
/// be exactly `ty.bytes_for(n)` long.
pub fn dequantize(ty: GgmlType, bytes: &[u8], n: u64) -> Result<Vec<f32>, QuantError> {
    if !ty.is_supported() {
        return Err(QuantError::Unsupported(ty));
    }
    let expected = ty.bytes_for(n).ok_or(QuantError::PartialBlock { ty, n })?;
    if expected != bytes.len() as u64 {
        return Err(QuantError::Length {
            ty,
            n,
            expected,
            found: bytes.len() as u64,
        });
    }
    let mut out = Vec::with_capacity(n as usize);
    match ty {
        GgmlType::F32 => out.extend(blocks::<4>(bytes).map(|b| f32::from_le_bytes(*b))),
        GgmlType::F16 => out.extend(blocks::<2>(bytes).map(|b| f16::from_le_bytes(*b).to_f32())),
        GgmlType::Q4_0 => {
            for b in blocks::<{ BlockQ4_0::BYTES }>(bytes) {
                out.extend(BlockQ4_0::from_bytes(b).dequantize());
            }
        }
        GgmlType::Q4_1 => {
            for b in blocks::<{ BlockQ4_1::BYTES }>(bytes) {
                out.extend(BlockQ4_1::from_bytes(b).dequantize());
            }
        }
        GgmlType::Q8_0 => {
            for b in blocks::<{ BlockQ8_0::BYTES }>(bytes) {
                out.extend(BlockQ8_0::from_bytes(b).dequantize());
            }
        }
        GgmlType::Other(_) => unreachable!("checked by is_supported"),
    }
    Ok(out)
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
        let x = dequantize(GgmlType::Q4_0, &b, 32).unwrap();
        assert_eq!(x.len(), 32);
        assert_eq!(x[0], -4.0);
        assert_eq!(x[15], 3.5);
        assert_eq!(x[16], 3.5);
        assert_eq!(x[31], -4.0);

        // Q4_1: d = 0.25, m = -1.
        let mut b = h(0.25).to_vec();
        b.extend(h(-1.0));
        b.extend((0..16u8).map(|i| i | (i << 4)));
        let x = dequantize(GgmlType::Q4_1, &b, 32).unwrap();
        assert_eq!((x[0], x[15], x[16], x[31]), (-1.0, 2.75, -1.0, 2.75));

        // Q8_0: d = 2, q = -16..16.
        let mut b = h(2.0).to_vec();
        b.extend((-16i8..16).map(|q| q as u8));
        let x = dequantize(GgmlType::Q8_0, &b, 32).unwrap();
        assert_eq!((x[0], x[16], x[31]), (-32.0, 0.0, 30.0));

        let x = dequantize(GgmlType::F16, &[h(1.5), h(-2.0)].concat(), 2).unwrap();
        assert_eq!(x, vec![1.5, -2.0]);
        assert_eq!(
            dequantize(GgmlType::Q8_0, &b[..33], 32),
            Err(QuantError::Length {
                ty: GgmlType::Q8_0,
                n: 32,
                expected: 34,
                found: 33
            })
        );
        assert_eq!(
            dequantize(GgmlType::Q8_0, &b, 31),
            Err(QuantError::PartialBlock {
                ty: GgmlType::Q8_0,
                n: 31
            })
        );
        let q4k = GgmlType::from_id(12).unwrap();
        let e = dequantize(q4k, &b, 256).unwrap_err();
        assert_eq!(e, QuantError::Unsupported(q4k));
        assert_eq!(
            e.to_string(),
            "Q4_K (ggml type 12) is not decoded by this reader"
        );
    }

    #[test]
    fn sizes_and_ids() {
        assert_eq!(GgmlType::Q4_1.bytes_for(576 * 2), Some(36 * 20));
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
        assert_eq!(GgmlType::Other(14).bytes_for(512), Some(420));
        for &(id, name, _, _) in KNOWN_TYPES {
            let ty = GgmlType::from_id(id).unwrap();
            assert_eq!((ty.id(), ty.name()), (id, name));
            assert_eq!(ty.is_supported(), [0, 1, 2, 3, 8].contains(&id));
        }
        for id in [4, 5, 31, 36, 42, 1000, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "{id}");
        }
        assert_eq!(GgmlType::Other(14).to_string(), "Q6_K (ggml type 14)");
    }
}
