//! ggml's tensor types as GGUF files store them: plain floats, the block
//! quantisations of 32 weights (one or two f16 scales) and the K-quants' super-blocks
//! of 256 (sub-blocks of 32 or 16 weights with 6- or 8-bit scales), with their exact
//! reference dequantisation. The raw blocks are what a quantised matmul reads.
use half::f16;

/// A ggml tensor type (the `type` field of a GGUF tensor info), named as ggml
/// names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
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
    /// Blocks of 32: an f16 scale `d` and 5-bit `q` (4 low bits packed as Q4_0's, the
    /// fifth in a 32-bit mask); `x = (q − 16)·d`.
    Q5_0,
    /// Blocks of 32: f16 `d` and `m` and 5-bit `q`; `x = q·d + m`.
    Q5_1,
    /// Super-blocks of 256: f16 `d` and `dmin`, eight 6-bit scales and mins, 4-bit
    /// `q` (two sub-blocks of 32 per 32 bytes: low nibbles, then high);
    /// `x = d·sc·q − dmin·m` per sub-block of 32.
    Q4_K,
    /// Q4_K with a fifth bit per weight (bit `j` of byte `l` of a 32-byte mask for
    /// weight `l` of sub-block `j`).
    Q5_K,
    /// Super-blocks of 256: 6-bit `q` (4 low bits in 128 bytes, 2 high bits in 64),
    /// sixteen signed 8-bit scales and an f16 `d`; `x = d·sc·(q − 32)` per 16 weights.
    Q6_K,
    /// A type ggml defines (its id is in [`KNOWN_TYPES`]) that this reader does not
    /// decode: Q2_K, Q3_K, Q8_K, IQ, BF16, … Its size is known, so its bytes can
    /// still be located and bounds-checked.
    Other(u32),
}

/// Weights per block of the 32-weight block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0),
/// and per sub-block of Q4_K and Q5_K.
pub const BLOCK: usize = 32;

/// Weights per K-quant super-block.
pub const SUPER_BLOCK: usize = 256;

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
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            12 => GgmlType::Q4_K,
            13 => GgmlType::Q5_K,
            14 => GgmlType::Q6_K,
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
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
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
    check_len(ty, bytes, n)?;
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
        GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => {
            let size = ty.block().expect("a known type").1 as usize;
            for b in bytes.chunks_exact(size) {
                for sub in sub_blocks(ty, b) {
                    out.extend(sub.dequantize());
                }
            }
        }
        GgmlType::Other(_) => unreachable!("checked by is_supported"),
    }
    Ok(out)
}

/// Whether `bytes` are exactly `n` elements of `ty`: whole blocks of it, no more.
pub fn check_len(ty: GgmlType, bytes: &[u8], n: u64) -> Result<(), QuantError> {
    let expected = ty.bytes_for(n).ok_or(QuantError::PartialBlock { ty, n })?;
    if expected != bytes.len() as u64 {
        return Err(QuantError::Length {
            ty,
            n,
            expected,
            found: bytes.len() as u64,
        });
    }
    Ok(())
}

/// 32 weights of any decoded block type as `x = q·d + m` with f32 `d` (one per
/// 16 weights: `d[0]` for the first 16, `d[1]` for the rest) and `m`, and one
/// 8-bit `q` per weight (signed where the type's are). Every type's reference
/// formula is this one with exact f32 scales (an f16 times a 6- or 8-bit integer
/// needs at most 19 bits), so decoding through it is bit-exact; devices repack
/// blocks of any type to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SubBlock {
    /// The scale of each half.
    pub d: [f32; 2],
    /// The offset (0 where the type has none).
    pub m: f32,
    /// The quants, as `i8` where [`signed`](Self::signed), else as `u8`.
    pub q: [u8; BLOCK],
    /// Whether the quants are signed.
    pub signed: bool,
}

impl SubBlock {
    /// Its 32 weights.
    pub fn dequantize(&self) -> [f32; BLOCK] {
        // As the references compute: `q·d` for the signed types, `q·d + m` (or
        // `− dmin·m`) for the others.
        std::array::from_fn(|i| {
            let d = self.d[i / 16];
            if self.signed {
                f32::from(self.q[i] as i8) * d
            } else {
                f32::from(self.q[i]) * d + self.m
            }
        })
    }
}

/// The sub-blocks of one block of a 32-weight type (one) or a K-quant (eight),
/// `b` being its bytes as ggml lays them out.
///
/// # Panics
/// When `b` is not one block of `ty`, or `ty` is a plain or undecoded type.
pub fn sub_blocks(ty: GgmlType, b: &[u8]) -> Vec<SubBlock> {
    let size = ty.block().map(|(_, s)| s as usize);
    assert_eq!(Some(b.len()), size, "sub_blocks: one block of {ty}");
    let unsigned = |d: f32, m: f32, q: [u8; BLOCK]| SubBlock {
        d: [d; 2],
        m,
        q,
        signed: false,
    };
    let signed = |d: [f32; 2], q: [i8; BLOCK]| SubBlock {
        d,
        m: 0.0,
        q: q.map(|q| q as u8),
        signed: true,
    };
    // Q4_0's nibble order: byte j holds weight j (low) and j + 16 (high).
    let nibbles = |qs: &[u8]| -> [u8; BLOCK] {
        std::array::from_fn(|i| if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 })
    };
    // Q5_0's and Q5_1's fifth bits: bit i of a little-endian u32.
    let fifth = |qh: &[u8], i: usize| (qh[i / 8] >> (i % 8)) & 1;
    match ty {
        GgmlType::Q4_0 => {
            let d = half_at(b, 0).to_f32();
            vec![signed([d; 2], nibbles(&b[2..]).map(|q| q as i8 - 8))]
        }
        GgmlType::Q4_1 => {
            let (d, m) = (half_at(b, 0).to_f32(), half_at(b, 2).to_f32());
            vec![unsigned(d, m, nibbles(&b[4..]))]
        }
        GgmlType::Q8_0 => {
            let d = half_at(b, 0).to_f32();
            vec![signed([d; 2], std::array::from_fn(|i| b[2 + i] as i8))]
        }
        GgmlType::Q5_0 => {
            let d = half_at(b, 0).to_f32();
            let low = nibbles(&b[6..]);
            let q = std::array::from_fn(|i| (low[i] | (fifth(&b[2..6], i) << 4)) as i8 - 16);
            vec![signed([d; 2], q)]
        }
        GgmlType::Q5_1 => {
            let (d, m) = (half_at(b, 0).to_f32(), half_at(b, 2).to_f32());
            let low = nibbles(&b[8..]);
            let q = std::array::from_fn(|i| low[i] | (fifth(&b[4..8], i) << 4));
            vec![unsigned(d, m, q)]
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let (d, dmin) = (half_at(b, 0).to_f32(), half_at(b, 2).to_f32());
            let scales = &b[4..16];
            let (qh, qs) = if ty == GgmlType::Q5_K {
                (Some(&b[16..48]), &b[48..176])
            } else {
                (None, &b[16..144])
            };
            (0..8)
                .map(|j| {
                    let (sc, m) = scale_min_k4(j, scales);
                    // Sub-blocks 2c and 2c + 1: the low and high nibbles of bytes 32c...
                    let bytes = &qs[32 * (j / 2)..][..32];
                    let q = std::array::from_fn(|l| {
                        let low = if j % 2 == 0 {
                            bytes[l] & 15
                        } else {
                            bytes[l] >> 4
                        };
                        low | qh.map_or(0, |qh| ((qh[l] >> j) & 1) << 4)
                    });
                    unsigned(d * f32::from(sc), -(dmin * f32::from(m)), q)
                })
                .collect()
        }
        GgmlType::Q6_K => {
            let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
            let d = half_at(b, 208).to_f32();
            // Per 128 weights (c): 64 bytes of low nibbles, 32 of 2-bit pairs;
            // group k of 32 takes nibble k / 2 of bytes 64c + 32·(k % 2).., pair k.
            (0..8)
                .map(|g| {
                    let (c, k) = (g / 4, g % 4);
                    let low = &ql[64 * c + 32 * (k % 2)..][..32];
                    let high = &qh[32 * c..][..32];
                    let q = std::array::from_fn(|l| {
                        let lo = if k < 2 { low[l] & 15 } else { low[l] >> 4 };
                        let hi = (high[l] >> (2 * k)) & 3;
                        (lo | (hi << 4)) as i8 - 32
                    });
                    let s = |half: usize| d * f32::from(sc[2 * g + half] as i8);
                    signed([s(0), s(1)], q)
                })
                .collect()
        }
        other => panic!("sub_blocks: {other} has no sub-blocks"),
    }
}

impl SubBlock {
    /// Bytes of one sub-block in [`QFormat::SubBlocks`]: `d[0]`, `d[1]`, `m` as
    /// little-endian f32, then the 32 quants as `i8` (unsigned quants stay below
    /// 128: at most 5 bits).
    pub const BYTES: usize = 12 + BLOCK;

    /// Appends it in the [`QFormat::SubBlocks`] layout.
    pub fn write(&self, out: &mut Vec<u8>) {
        for x in [self.d[0], self.d[1], self.m] {
            out.extend(x.to_le_bytes());
        }
        out.extend(self.q);
    }
}

/// How a quantised matrix sits in a device's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QFormat {
    /// ggml's own blocks of one of the types the kernels read directly:
    /// [`GgmlType::Q4_0`], [`GgmlType::Q4_1`] or [`GgmlType::Q8_0`].
    Ggml(GgmlType),
    /// [`SubBlock`]s ([`SubBlock::BYTES`] each): every other decoded block type,
    /// and matrices whose parts differ in type (a K-quant mix's fused projections).
    /// Every weight takes 11 bits.
    SubBlocks,
}

impl QFormat {
    /// The format for a matrix of parts of `types`: ggml's blocks when they all
    /// share one type the kernels read, else sub-blocks.
    pub fn for_types(types: &[GgmlType]) -> QFormat {
        match types {
            [first, rest @ ..]
                if matches!(first, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0)
                    && rest.iter().all(|t| t == first) =>
            {
                QFormat::Ggml(*first)
            }
            _ => QFormat::SubBlocks,
        }
    }
}

/// Repacks `bytes` (whole blocks of `ty`, as a GGUF file holds them) into the
/// [`QFormat::SubBlocks`] layout, appended to `out`.
///
/// # Panics
/// When `ty` is not a decoded block type or `bytes` is not whole blocks.
pub fn repack_sub_blocks(ty: GgmlType, bytes: &[u8], out: &mut Vec<u8>) {
    let size = ty.block().expect("a known type").1 as usize;
    assert!(
        bytes.len().is_multiple_of(size),
        "repack_sub_blocks: whole blocks of {ty}"
    );
    for b in bytes.chunks_exact(size) {
        for sub in sub_blocks(ty, b) {
            sub.write(out);
        }
    }
}

/// Scale and min `j` (0..8) of a Q4_K/Q5_K super-block's 12 packed bytes
/// (ggml's `get_scale_min_k4`): 6 bits each, the first four whole in bytes 0..8,
/// the last four split between bytes 8..12 and the top bits of bytes 0..8.
fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
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
        let q2k = GgmlType::from_id(10).unwrap();
        let e = dequantize(q2k, &b, 256).unwrap_err();
        assert_eq!(e, QuantError::Unsupported(q2k));
        assert_eq!(
            e.to_string(),
            "Q2_K (ggml type 10) is not decoded by this reader"
        );
    }

    #[test]
    fn sizes_and_ids() {
        assert_eq!(GgmlType::Q4_1.bytes_for(576 * 2), Some(36 * 20));
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
        assert_eq!(GgmlType::Q6_K.bytes_for(512), Some(420));
        for &(id, name, _, _) in KNOWN_TYPES {
            let ty = GgmlType::from_id(id).unwrap();
            assert_eq!((ty.id(), ty.name()), (id, name));
            assert_eq!(
                ty.is_supported(),
                [0, 1, 2, 3, 6, 7, 8, 12, 13, 14].contains(&id)
            );
        }
        for id in [4, 5, 31, 36, 42, 1000, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "{id}");
        }
        assert_eq!(GgmlType::Q6_K.to_string(), "Q6_K (ggml type 14)");
    }
}
