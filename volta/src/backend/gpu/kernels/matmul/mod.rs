//! Batched matmul on strided rank-3 views: picks tiles and load modes, then runs
//! the generated kernel of `tiled` (or `coop` on tensor cores); products with too few output tiles to
//! fill the GPU split their K axis.
pub(crate) mod coop;
pub(crate) mod scales;
pub(crate) mod split;
pub(crate) mod tiled;
pub(crate) mod tuning;

use super::Small;
use super::elementwise::{copy, map};
use super::slices::{self, Part};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Kernel, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use crate::shape::Dims;
use coop::{CoopTiles, CoopVariant};
use smallvec::smallvec;
use std::sync::{Arc, Mutex};
use tiled::{Load, MatmulTiles, Staging, Variant, source};
use tuning::{Class, Tuning};
use volta_kernels::BinaryOp;
use volta_kernels::wgsl::{Elem, Expr};

/// Tiles for large products: 128×128 per workgroup, 16×8 per thread in 8×4
/// blocks of 32 threads, K steps of 8, prefetched (the best of the sweep at 2048
/// and 4096 on an H100, 2026-11-24: 45.3 TFLOP/s at 4096², against 42.5 for the
/// earlier 256×128 tiles).
pub(crate) const LARGE: MatmulTiles = MatmulTiles {
    bm: 128,
    bn: 128,
    bk: 8,
    tm: 16,
    tn: 8,
    staging: Staging::Prefetch,
    warp_cols: 8,
};
/// Tiles for mid-sized products, where 128×128 tiles would leave the GPU's cores
/// idle: 128×64 per workgroup.
pub(crate) const MEDIUM: MatmulTiles = MatmulTiles {
    bm: 128,
    bn: 64,
    bk: 16,
    tm: 8,
    tn: 8,
    staging: Staging::Prefetch,
    warp_cols: 0,
};
/// Tiles for small products: 64×64 per workgroup, 4×4 per thread.
pub(crate) const SMALL: MatmulTiles = MatmulTiles {
    bm: 64,
    bn: 64,
    bk: 8,
    tm: 4,
    tn: 4,
    staging: Staging::Prefetch,
    warp_cols: 0,
};

/// A tile override for tuning (`None`: choose by size).
pub(crate) static OVERRIDE: Mutex<Option<MatmulTiles>> = Mutex::new(None);

/// Tensor-core tiles for large products: 2×2 subgroups of 4×4 fragments.
const COOP_LARGE: CoopTiles = CoopTiles {
    wm: 2,
    wn: 2,
    fm: 4,
    fn_: 4,
    bk: 32,
    pad: 8,
    staging: Staging::Prefetch,
};
/// Tensor-core tiles for a few rows of a quantised product: 16 × 128.
const COOP_ROWS: CoopTiles = CoopTiles {
    wm: 1,
    wn: 4,
    fm: 1,
    fn_: 2,
    bk: 32,
    pad: 8,
    staging: Staging::Prefetch,
};
/// Tensor-core tiles for products too small to fill the GPU with large ones.
const COOP_SMALL: CoopTiles = CoopTiles {
    wm: 2,
    wn: 2,
    fm: 2,
    fn_: 2,
    bk: 32,
    pad: 8,
    staging: Staging::Prefetch,
};

/// A tensor-core tile override for tuning (`None`: choose by size).
pub(crate) static COOP_OVERRIDE: Mutex<Option<CoopTiles>> = Mutex::new(None);

/// How `f32` products compute on the GPU ([`Gpu::set_matmul_precision`]).
///
/// [`Gpu::set_matmul_precision`]: crate::Gpu::set_matmul_precision
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MatmulPrecision {
    /// `f32` operands and arithmetic (CUDA cores).
    #[default]
    Full,
    /// Operands rounded to `f16` on tensor cores, products accumulated in `f32`:
    /// several times faster, with a relative error near `f16`'s 2⁻¹¹ per operand.
    Half,
    /// `f32` accuracy from tensor cores: each operand, scaled by a power of two,
    /// is split into two `f16`s (`x ≈ hi + lo`), and the product is
    /// `hi·hi + hi·lo + lo·hi` (the `lo·lo` term left out is below `f32`'s
    /// rounding), the large term summed outside the tensor cores. CUTLASS's
    /// three-TF32 products take the same path. Without tensor cores, `Full`.
    Split,
}

static PRECISION: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

pub(crate) fn set_precision(p: MatmulPrecision) {
    PRECISION.store(p as u8, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn precision() -> MatmulPrecision {
    match PRECISION.load(std::sync::atomic::Ordering::Relaxed) {
        1 => MatmulPrecision::Half,
        2 => MatmulPrecision::Split,
        _ => MatmulPrecision::Full,
    }
}

/// Whether half precision rounds pending `f32` operands to `f16` before the
/// product (a tuning switch, on by default; off, they are written in `f32` and the
/// product rounds them in its loads).
pub(crate) static ROUND_OPERANDS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

/// How many times a product in half precision must read an operand already in
/// memory (once per tile of its other axis) for the operand to be rounded to
/// `f16` by a copy kept with its memory (`fusion::half_operand`) rather than in
/// the product's loads. H200, 2026-12-03, the GPT step in half precision: its
/// weights, read 128 times a product, copied once a step: products 9.44 → 8.86
/// ms, copies +0.17 ms; its activations and gradients too (read 3–12 times):
/// products 8.28 ms, but copies +0.88 ms and the peak 2,924 → 3,541 MiB.
/// A tuning knob (`usize::MAX`: none copied).
pub(crate) static COPY_READS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(DEFAULT_COPY_READS);

/// The default of [`COPY_READS`].
pub(crate) const DEFAULT_COPY_READS: usize = 16;

/// Whether half precision rounds each operand of a `(batch, m, k) × (batch, k,
/// n)` product that is already in memory by a kept copy ([`COPY_READS`]),
/// counting the tiles of the kernel that runs it (split-K's slices run on large
/// tiles).
pub(crate) fn copies_operands(batch: usize, m: usize, k: usize, n: usize) -> [bool; 2] {
    let splits = split_k(batch, m, k, n, true);
    let t = choose_coop_tiles(batch * splits, m, n, false);
    let least = COPY_READS.load(std::sync::atomic::Ordering::Relaxed);
    [
        n.div_ceil(t.bn() as usize) >= least,
        m.div_ceil(t.bm() as usize) >= least,
    ]
}

/// Whether products may split K (a tuning switch, on by default).
pub(crate) static SPLIT_K: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

fn aligned(vals: &[usize]) -> bool {
    vals.iter().all(|v| v.is_multiple_of(4))
}

/// Workgroups a product should launch at least: fewer output tiles than this
/// leave most of a large GPU's cores idle (an H200 has 132), so the K axis is
/// split instead (see [`split_k`]).
const FILL: usize = 512;
/// Shortest K slice a split leaves to each workgroup.
const MIN_SLICE: usize = 128;
/// Shortest slice of an f32 product split past [`FILL`] (see [`split_k`]).
const LONG_SLICE: usize = 1024;
/// The same on tensor cores, where a short slice is a few K steps of a kernel
/// that needs many to pay for its start (H100, 2026-11-25, f16: 1024³ unsplit
/// on small tiles 97 TFLOP/s, split 8 ways 31; 4096×14336×512 split 4 ways 202,
/// unsplit 92).
const COOP_MIN_SLICE: usize = 1024;

/// The element types of a product's operands, A's and B's.
pub(crate) type Elems = [Elem; 2];

/// Whether products of `elems` go to tensor cores (when both operands load as
/// vectors): those with an `f16` operand, and `f32` ones in half or split
/// precision, on adapters that have them.
fn for_tensor_cores(rt: &Runtime, elems: Elems) -> bool {
    let half = elems.contains(&Elem::F16) || precision() != MatmulPrecision::Full;
    rt.gpu.info.tensor_cores && half
}

/// Whether a tensor-core product of operands holding `elems` splits them into
/// `f16` halves ([`MatmulPrecision::Split`]).
fn splits_operands(elems: Elems) -> bool {
    precision() == MatmulPrecision::Split && elems == [Elem::F32; 2]
}

/// A bias along a product's columns: its buffer, holding C's element type, and
/// the element its `n` values start at.
pub(crate) type Bias<'a> = (&'a Arc<Pooled>, usize);

/// A product, or the partial products of its K slices ([`matmul`]).
pub(crate) enum Product {
    /// The product, `(batch, m, n)`.
    Done(Arc<Pooled>),
    /// Split-K's partial products, `(splits, m, n)` in `f32`: their sum along
    /// axis 0 is the product (batch 1).
    Partials(Arc<Pooled>, [usize; 3]),
}

/// `(batch, m, k) × (batch, k, n)` of two strided views holding `elems` (`F32` or
/// `F16`; products accumulate in `f32`; operands of two types only where
/// [`rounds_operands`]), stored as `out_elem`, leaving split-K's sum of partial
/// products to the caller (a pending reduction, so the product's consumer can run
/// in its kernel: `fusion::rows_of`). A `bias` is in [`Product::Done`]'s
/// product; the caller adds it to split-K's sum.
pub(crate) fn matmul(
    rt: &Runtime,
    tuning: &Tuning,
    (elems, out_elem): (Elems, Elem),
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
    bias: Option<Bias>,
) -> Product {
    let (batch, m, k, n) = (a.1.dims[0], a.1.dims[1], a.1.dims[2], b.1.dims[2]);
    if slices::needed(rt, &[a, b]) {
        let out = in_slices(rt, tuning, (elems, out_elem), a, b);
        // Past a binding's size (rare): the bias in a kernel of its own.
        return Product::Done(match bias {
            Some((buf, offset)) => {
                let dims = [batch, m, n];
                let along_columns = Layout {
                    dims: Dims::new(&dims),
                    strides: Dims::new(&[0, 0, 1]),
                    offset,
                };
                let sum = Expr::input(0).binary(BinaryOp::Add, Expr::input(1));
                let ops = [(&out, &Layout::contiguous(&dims)), (buf, &along_columns)];
                map(rt, out_elem, sum, &ops, &[], &dims)
            }
            None => out,
        });
    }
    let splits = split_k(batch, m, k, n, for_tensor_cores(rt, elems));
    if splits == 1 {
        return Product::Done(product(rt, tuning, (elems, out_elem), a, b, bias));
    }
    // Split-K: K as `splits` batches of slices (pure strides: no copies), one
    // partial product per slice, then their sum.
    let slice = k / splits;
    let view = |l: &Layout, dims: [usize; 3], k_axis: usize| Layout {
        dims: Dims::new(&dims),
        strides: Dims::new(&[slice * l.strides[k_axis], l.strides[1], l.strides[2]]),
        offset: l.offset,
    };
    let sa = view(a.1, [splits, m, slice], 2);
    let sb = view(b.1, [splits, slice, n], 1);
    // The partial products stay in f32 until their sum is rounded.
    let partials = product(rt, tuning, (elems, Elem::F32), (a.0, &sa), (b.0, &sb), None);
    Product::Partials(partials, [splits, m, n])
}

/// A product with an operand larger than one binding, in slices of the batch, of
/// the rows of `a` or of the columns of `b` (whichever takes the fewest), each
/// binding windows of the operands and of the result.
fn in_slices(
    rt: &Runtime,
    tuning: &Tuning,
    (elems, out_elem): (Elems, Elem),
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
) -> Arc<Pooled> {
    let (batch, m, n) = (a.1.dims[0], a.1.dims[1], b.1.dims[2]);
    let out = alloc(rt, batch * m * n * out_elem.size());
    let out_layout = Layout::contiguous(&[batch, m, n]);
    let part = |view, axis, exact, elem| Part {
        view,
        axis,
        exact,
        elem,
    };
    let o = (&out, &out_layout);
    // (a's axis, b's axis, the result's axis, the sliced length)
    let choices = [
        (Some(0), Some(0), 0, batch),
        (Some(1), None, 1, m),
        (None, Some(2), 2, n),
    ];
    let best = choices
        .iter()
        .filter(|c| c.3 > 1)
        .filter_map(|&(sa, sb, so, len)| {
            let parts = [
                part(a, sa, false, elems[0]),
                part(b, sb, false, elems[1]),
                part(o, Some(so), true, out_elem),
            ];
            slices::slice_len(rt, &parts, len).map(|per| (parts, len, per))
        })
        .min_by_key(|(_, len, per)| len.div_ceil(*per));
    match best {
        Some((parts, len, per)) => slices::by_slices(rt, &parts, (len, per), copy, |ops, _, _| {
            product_into(
                rt,
                tuning,
                (elems, out_elem),
                ops[0],
                ops[1],
                ops[2].0,
                None,
            );
        }),
        None => rt.report(slices::too_large(rt, "matmul", &[a, b], elems[0].size())),
    }
    out
}

/// Into how many K slices to split a product: 1 unless it is a single product
/// whose output tiles fill less than half of [`FILL`] and whose K is long; then the smallest
/// power of two that brings the workgroups up to [`FILL`], keeping slices of at
/// least [`MIN_SLICE`] that are multiples of 4 (for `vec4` loads); f32 products
/// go on to twice [`FILL`] while slices stay [`LONG_SLICE`] long. Products on
/// `tensor_cores` count the large tensor-core tiles, which the slices then use,
/// and keep slices of [`COOP_MIN_SLICE`].
fn split_k(batch: usize, m: usize, k: usize, n: usize, tensor_cores: bool) -> usize {
    let overridden = OVERRIDE.lock().unwrap_or_else(|p| p.into_inner()).is_some()
        || (tensor_cores
            && COOP_OVERRIDE
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some());
    if batch != 1 || overridden || !SPLIT_K.load(std::sync::atomic::Ordering::Relaxed) {
        return 1;
    }
    let (bm, bn) = if tensor_cores {
        (COOP_LARGE.bm(), COOP_LARGE.bn())
    } else {
        let t = choose_tiles(batch, m, n);
        (t.bm, t.bn)
    };
    let groups = m.div_ceil(bm as usize) * n.div_ceil(bn as usize);
    if groups >= FILL / 2 {
        // Half full already: a split costs more than the idle cores (2048³ ran at
        // 27.5 TFLOP/s split in two, 33.7 unsplit, H200).
        return 1;
    }
    let min_slice = if tensor_cores {
        COOP_MIN_SLICE
    } else {
        MIN_SLICE
    };
    // Whether K splits into twice `splits` slices of at least `shortest`.
    let halves = |splits: usize, shortest: usize| {
        let next = splits * 2;
        k.is_multiple_of(next) && k / next >= shortest && (k / next).is_multiple_of(4)
    };
    let mut splits = 1;
    while groups * splits < FILL && halves(splits, min_slice) {
        splits *= 2;
    }
    // f32 products whose slices stay long (a transformer's weight gradients:
    // 384 × 1536 outputs, K = 16384 tokens) go on to twice as many workgroups,
    // evening the waves: that step's products 27.5 → 27.1 ms (H200, 2026-12-03).
    // Raising `FILL` itself split products of 256–511 tiles as well, which
    // cost the step 1–1.5 ms (H100, 2026-11-27). Going on with shorter slices
    // too gained the step's 1152 × 384 outputs nothing, its 384 × 384 ones
    // 0.07 ms, and would split a 1024³ product further, unmeasured.
    while !tensor_cores && groups * splits < 2 * FILL && halves(splits, LONG_SLICE) {
        splits *= 2;
    }
    splits
}

/// The tiles for a product of this size (unless overridden for tuning).
fn choose_tiles(batch: usize, m: usize, n: usize) -> MatmulTiles {
    let large_tiles = m.div_ceil(128) * n.div_ceil(128) * batch;
    if m < 256 || n < 256 {
        SMALL
    } else if large_tiles < 256 {
        MEDIUM
    } else {
        LARGE
    }
}

/// The tensor-core kernel for a `(batch, m, n)` product of operands holding `elems`
/// stored as `out_elem`, A contiguous along k (else m) and B along n (else k) as
/// `layouts` says, and its grid.
fn tensor_core_kernel(
    rt: &Runtime,
    (elems, out_elem): (Elems, Elem),
    (a_k, b_n, wide): (bool, bool, bool),
    (batch, m, n, bias): (usize, usize, usize, bool),
) -> (Arc<Kernel>, [u32; 3]) {
    let split = splits_operands(elems);
    let t = COOP_OVERRIDE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or_else(|| choose_coop_tiles(batch, m, n, split));
    // A split product stages one buffer holding both halves; an override that
    // does not fit so gives way to the small tiles, which do.
    let fits = |t: &CoopTiles| {
        t.staging != Staging::Double
            && t.split_shared_bytes() <= rt.gpu.limits.max_compute_workgroup_storage_size
    };
    let t = if split && !fits(&t) { COOP_SMALL } else { t };
    let v = CoopVariant {
        tiles: t,
        a_k,
        b_n,
        a_f32: elems[0] == Elem::F32,
        b_f32: elems[1] == Elem::F32,
        half_out: out_elem == Elem::F16,
        wide: wide && elems.contains(&Elem::F16),
        c_vec: n.is_multiple_of(4),
        b_blocks: None,
        a_scale: false,
        bias,
        split,
    };
    let key = vec![
        t.wm,
        t.wn,
        t.fm,
        t.fn_,
        t.bk,
        t.pad,
        t.staging as u32,
        u32::from(a_k),
        u32::from(b_n),
        u32::from(v.a_f32),
        u32::from(v.b_f32),
        u32::from(v.half_out),
        u32::from(v.wide),
        u32::from(v.c_vec),
        u32::from(bias),
        u32::from(split),
    ];
    let bindings = Bindings {
        reads: 2 + 2 * usize::from(split) + usize::from(bias),
        writes: 1,
    };
    let kern = kernel(
        rt,
        &Key::Named("volta matmul tensor-core", key),
        bindings,
        "main",
        || coop::source(&v),
    );
    let groups = [
        u(n.div_ceil(t.bn() as usize)),
        u(m.div_ceil(t.bm() as usize)),
        u(batch),
    ];
    (kern, groups)
}

/// `x·Wᵀ` on tensor cores for `x` `(m, k)` (f32, rows contiguous and 16-byte
/// aligned) and a quantised `W` `(n, k)` held as `blocks` in `w`: each tile of W
/// is dequantised to `f16` on its way into shared memory (no dequantised copy
/// of W is made), `x` is rounded to `f16` there, and products accumulate in f32.
/// With `scale` (an RMS norm's weights: a buffer and the element its `k`
/// values start at), `x`'s columns are multiplied by it on their way in.
/// Few rows (a batch of decoded tokens) leave too few output tiles to fill the
/// GPU, so K is split as for dense products ([`quantized_splits`]) and the result
/// is the partial products, to be summed. `None` where the adapter has no
/// tensor cores, `x` does not load as vectors, or the scale does not start on
/// a multiple of 4 (the caller then multiplies by the dequantised matrix, or
/// scales `x` first).
pub(crate) fn quantized(
    rt: &Runtime,
    x: (&Arc<Pooled>, &Layout),
    w: &Arc<Pooled>,
    blocks: coop::Blocks,
    n: usize,
    scale: Option<(&Arc<Pooled>, usize)>,
) -> Option<Product> {
    let l = x.1;
    let (m, k) = (l.dims[0], l.dims[1]);
    let loads = l.rank() == 2 && l.strides[1] == 1 && aligned(&[l.offset, l.strides[0], k]);
    let scale_loads = scale.is_none_or(|(_, offset)| offset.is_multiple_of(4));
    if !rt.gpu.info.tensor_cores || !loads || !scale_loads || !k.is_multiple_of(32) {
        return None;
    }
    let t = quantized_tiles(m);
    let v = CoopVariant {
        tiles: t,
        a_k: true,
        b_n: false,
        a_f32: true,
        b_f32: false,
        half_out: false,
        wide: false,
        c_vec: n.is_multiple_of(4),
        b_blocks: Some(blocks),
        a_scale: scale.is_some(),
        bias: false,
        split: false,
    };
    let key = vec![
        t.wm,
        t.wn,
        t.fm,
        t.fn_,
        t.pad,
        t.staging as u32,
        u32::from(v.c_vec),
        blocks.qtype,
        blocks.words,
        u32::from(v.a_scale),
    ];
    let bindings = Bindings {
        reads: if scale.is_some() { 3 } else { 2 },
        writes: 1,
    };
    let kern = kernel(
        rt,
        &Key::Named("volta qmatmul tensor-core", key),
        bindings,
        "main",
        || coop::source(&v),
    );
    let splits = quantized_splits(m, n, k);
    let slice = k / splits;
    let out = alloc(rt, splits * m * n * 4);
    // A slice of K is a batch: A's batch stride is the slice, B's the slice's
    // words; C's batches are the partial products.
    let b_sb = slice / 32 * blocks.words as usize;
    let p = [
        u(m),
        u(n),
        u(slice),
        u(l.offset),
        u(slice),
        u(l.strides[0]),
        1,
        0,
        u(b_sb),
        0,
        0,
        u(k / 32),
        u(scale.map_or(0, |(_, offset)| offset)),
    ];
    let grid = [
        u(n.div_ceil(t.bn() as usize)),
        u(m.div_ceil(t.bm() as usize)),
        u(splits),
    ];
    match scale {
        Some((s, _)) => launch(rt, &kern, &p, &[x.0, w, s, &out], grid),
        None => launch(rt, &kern, &p, &[x.0, w, &out], grid),
    }
    Some(if splits == 1 {
        Product::Done(out)
    } else {
        Product::Partials(out, [splits, m, n])
    })
}

/// The quantised product's tensor-core tiles for `m` rows of x: one fragment's
/// 16 rows by 128 columns where the rows fit them (a batch's decode step: the
/// output matrix at B 4 took 40 µs against 63 in 64 × 64 tiles, H100,
/// 2026-11-27), else 64 × 64.
fn quantized_tiles(m: usize) -> CoopTiles {
    COOP_OVERRIDE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .filter(|t| t.bk == 32)
        .unwrap_or(if m <= COOP_ROWS.bm() as usize {
            COOP_ROWS
        } else {
            COOP_SMALL
        })
}

/// Into how many slices [`quantized`] splits the K of an `(m, k)` by `(n, k)`
/// product. Only a few rows (a batch of decoded tokens, one tile of them) split
/// K: a prompt's products fill the GPU along M, and the partial sums would cost
/// more than they save (H100, pp512: 3.58 ms split against 3.48 unsplit).
pub(crate) fn quantized_splits(m: usize, n: usize, k: usize) -> usize {
    let t = quantized_tiles(m);
    if m > t.bm() as usize {
        return 1;
    }
    let groups = n.div_ceil(t.bn() as usize) * m.div_ceil(t.bm() as usize);
    split_k_blocks(groups, k / 32)
}

/// Into how many slices to split the K of a quantised product with `groups`
/// output tiles and `blocks` 32-weight blocks per row: 1 when the tiles fill
/// half of [`FILL`]; else the fewest slices (a divisor of `blocks`, each at
/// least [`MIN_SLICE`] long) that bring the workgroups to [`FILL`], or the most
/// such slices.
fn split_k_blocks(groups: usize, blocks: usize) -> usize {
    if groups >= FILL / 2 || !SPLIT_K.load(std::sync::atomic::Ordering::Relaxed) {
        return 1;
    }
    let most = blocks / (MIN_SLICE / 32);
    let mut divisors = (1..=most.max(1)).filter(|d| blocks.is_multiple_of(*d));
    let mut largest = 1;
    divisors
        .find(|&d| {
            largest = d;
            groups * d >= FILL
        })
        .unwrap_or(largest)
}

/// The tensor-core tiles for a product of this size: large ones when they fill
/// the GPU ([`CoopTiles::SPLIT_LARGE`] for `split` products).
fn choose_coop_tiles(batch: usize, m: usize, n: usize, split: bool) -> CoopTiles {
    let large = if split {
        CoopTiles::SPLIT_LARGE
    } else {
        COOP_LARGE
    };
    let groups = m.div_ceil(large.bm() as usize) * n.div_ceil(large.bn() as usize) * batch;
    if groups >= FILL / 2 {
        large
    } else {
        COOP_SMALL
    }
}

/// How the kernel loads A and B of a `(batch, m, k) × (batch, k, n)` product:
/// four elements at a time along a contiguous axis whose rows start on a multiple
/// of four, else one at a time.
fn loads(la: &Layout, lb: &Layout) -> (Load, Load) {
    let (batch, m, k, n) = (la.dims[0], la.dims[1], la.dims[2], lb.dims[2]);
    // A batch of one has no batch stride to respect.
    let sb = |l: &Layout| if batch == 1 { 0 } else { l.strides[0] };
    let (a_sb, a_sm, a_sk) = (sb(la), la.strides[1], la.strides[2]);
    let (b_sb, b_sk, b_sn) = (sb(lb), lb.strides[1], lb.strides[2]);
    // A prefers vectors along k, B along n.
    let a_load = load(
        [
            (Load::K4, a_sk == 1 && aligned(&[k, la.offset, a_sb, a_sm])),
            (
                Load::Outer4,
                a_sm == 1 && aligned(&[m, la.offset, a_sb, a_sk]),
            ),
        ],
        a_sk == 1,
    );
    let b_load = load(
        [
            (
                Load::Outer4,
                b_sn == 1 && aligned(&[n, lb.offset, b_sb, b_sk]),
            ),
            (Load::K4, b_sk == 1 && aligned(&[k, lb.offset, b_sb, b_sn])),
        ],
        b_sk == 1,
    );
    (a_load, b_load)
}

/// The first vector load of `tries` that the operand allows, else scalar loads
/// along k where k is its contiguous axis (along the outer axis otherwise).
fn load(tries: [(Load, bool); 2], k_contiguous: bool) -> Load {
    match tries.into_iter().find(|&(_, allowed)| allowed) {
        Some((l, _)) => l,
        None if k_contiguous => Load::ScalarK,
        None => Load::ScalarOuter,
    }
}

/// Whether a load moves four elements at a time (what tensor cores need).
fn vectors(l: Load) -> bool {
    matches!(l, Load::K4 | Load::Outer4)
}

/// Whether an `f32` product of these views runs on tensor cores in half precision
/// (both operands load as vectors), so that its operands can be rounded to
/// `f16` before it (`fusion::half_operand`) at no cost in accuracy.
pub(crate) fn rounds_operands(rt: &Runtime, la: &Layout, lb: &Layout) -> bool {
    let (a, b) = loads(la, lb);
    ROUND_OPERANDS.load(std::sync::atomic::Ordering::Relaxed)
        && precision() == MatmulPrecision::Half
        && for_tensor_cores(rt, [Elem::F32; 2])
        && vectors(a)
        && vectors(b)
}

/// One launch of the generated kernel: operands holding `elems`, the product
/// stored as `out_elem`.
fn product(
    rt: &Runtime,
    tuning: &Tuning,
    (elems, out_elem): (Elems, Elem),
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
    bias: Option<Bias>,
) -> Arc<Pooled> {
    let (batch, m, n) = (a.1.dims[0], a.1.dims[1], b.1.dims[2]);
    let out = alloc(rt, batch * m * n * out_elem.size());
    product_into(rt, tuning, (elems, out_elem), a, b, &out, bias);
    out
}

/// [`product`] into `out` (contiguous, from its binding's start), plus `bias`
/// along its columns.
fn product_into(
    rt: &Runtime,
    tuning: &Tuning,
    (elems, out_elem): (Elems, Elem),
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
    out: &Arc<Pooled>,
    bias: Option<Bias>,
) {
    let (la, lb) = (a.1, b.1);
    let (batch, m, k, n) = (la.dims[0], la.dims[1], la.dims[2], lb.dims[2]);
    if batch * m * n == 0 {
        return;
    }
    // A batch of one has no batch stride to respect.
    let sb = |l: &Layout| if batch == 1 { 0 } else { l.strides[0] };
    let (a_sb, a_sm, a_sk) = (sb(la), la.strides[1], la.strides[2]);
    let (b_sb, b_sk, b_sn) = (sb(lb), lb.strides[1], lb.strides[2]);
    let (a_load, b_load) = loads(la, lb);
    let p = [
        u(m),
        u(n),
        u(k),
        u(la.offset),
        u(a_sb),
        u(a_sm),
        u(a_sk),
        u(lb.offset),
        u(b_sb),
        u(b_sk),
        u(b_sn),
        u(bias.map_or(0, |(_, offset)| offset)),
    ];
    // The buffers bound: the operands, the bias if any, then C.
    let mut buffers: Small<&Arc<Pooled>> = smallvec![a.0, b.0];
    buffers.extend(bias.map(|(buf, _)| buf));
    buffers.push(out);
    let bindings = Bindings {
        reads: buffers.len() - 1,
        writes: 1,
    };
    let max = rt.gpu.limits.max_compute_workgroups_per_dimension as usize;
    assert!(
        batch <= max,
        "GPU matmul: a batch of {batch} exceeds the grid limit {max}"
    );
    // Tensor cores take f16 products, and f32 ones in half precision, when both
    // operands load as vectors.
    let on_tensor_cores = for_tensor_cores(rt, elems) && vectors(a_load) && vectors(b_load);
    if on_tensor_cores {
        let (a_k, b_n) = (a_load == Load::K4, b_load == Load::Outer4);
        // Eight halves per load where every row of the f16 operands starts on a
        // 16-byte boundary and their contiguous extents are whole loads.
        let eights = |v: &[usize]| v.iter().all(|x| x.is_multiple_of(8));
        let a_eights = elems[0] == Elem::F32
            || eights(&if a_k {
                [k, la.offset, a_sb, a_sm]
            } else {
                [m, la.offset, a_sb, a_sk]
            });
        let b_eights = elems[1] == Elem::F32
            || eights(&if b_n {
                [n, lb.offset, b_sb, b_sk]
            } else {
                [k, lb.offset, b_sb, b_sn]
            });
        let layouts = (a_k, b_n, a_eights && b_eights);
        let shape = (batch, m, n, bias.is_some());
        let (kern, groups) = tensor_core_kernel(rt, (elems, out_elem), layouts, shape);
        if splits_operands(elems) {
            // The operands' largest magnitudes first, bound after B.
            let [(la, na), (lb, nb)] = scales::largest(rt, a, b);
            let mut p = p.to_vec();
            p.extend([na, nb]);
            let mut bound: Small<&Arc<Pooled>> = buffers.iter().copied().collect();
            bound.insert(2, &la);
            bound.insert(3, &lb);
            launch(rt, &kern, &p, &bound, groups);
        } else {
            launch(rt, &kern, &p, &buffers, groups);
        }
        return;
    }
    // Mixed operands come only from `rounds_operands`, whose views load as vectors.
    assert!(
        elems[0] == elems[1],
        "GPU matmul: operands of two types off tensor cores (a caller of `matmul` bug)"
    );
    let elem = elems[0];
    // The generated kernel for `tiles` (compiled on first use).
    let prepare = |tiles: MatmulTiles| {
        let v = Variant {
            tiles,
            a: a_load,
            b: b_load,
            c_vec: n.is_multiple_of(4),
            half: elem == Elem::F16,
            half_out: out_elem == Elem::F16,
            bias: bias.is_some(),
        };
        let key = vec![
            tiles.bm,
            tiles.bn,
            tiles.bk,
            tiles.tm,
            tiles.tn,
            tiles.staging as u32,
            tiles.warp_cols,
            a_load as u32,
            b_load as u32,
            u32::from(v.c_vec),
            u32::from(v.half),
            u32::from(v.half_out),
            u32::from(v.bias),
        ];
        kernel(
            rt,
            &Key::Named("volta matmul", key),
            bindings,
            "main",
            || source(&v),
        )
    };
    // One launch of it.
    let run = |tiles: MatmulTiles| {
        let kern = prepare(tiles);
        let groups = [
            u(n.div_ceil(tiles.bn as usize)),
            u(m.div_ceil(tiles.bm as usize)),
            u(batch),
        ];
        launch(rt, &kern, &p, &buffers, groups);
    };
    let overridden = *OVERRIDE.lock().unwrap_or_else(|p| p.into_inner());
    let tiles = overridden.unwrap_or_else(|| {
        let class = Class::new(
            (batch, m, k, n),
            (a_load as u32, b_load as u32),
            (elem == Elem::F16, out_elem == Elem::F16),
        );
        tuning.tiles(rt, class, choose_tiles(batch, m, n), &prepare, &run)
    });
    run(tiles);
}

#[cfg(test)]
mod tests {
    use super::split_k;

    #[test]
    fn splits_k_only_when_tiles_cannot_fill_the_gpu() {
        let f32 = |b, m, k, n| split_k(b, m, k, n, false);
        // The MLP benchmark's products: 512×1024 outputs split 8 ways, a 10-wide
        // output as far as 128-long slices allow.
        assert_eq!(f32(1, 512, 1024, 1024), 8);
        assert_eq!(f32(1, 512, 1024, 10), 8);
        assert_eq!(f32(1, 20, 512, 12), 4);
        // Enough tiles, a batch, a short K, or slices that are not 4-aligned.
        assert_eq!(f32(1, 4096, 4096, 4096), 1);
        assert_eq!(f32(1, 2048, 2048, 2048), 1);
        assert_eq!(f32(1, 1024, 1024, 1024), 4);
        // A transformer's weight gradients (K = 16384 tokens): past FILL while
        // slices stay 1024 long.
        assert_eq!(f32(1, 384, 16384, 1536), 16);
        assert_eq!(f32(1, 1152, 16384, 384), 16);
        assert_eq!(f32(1, 384, 16384, 384), 32);
        assert_eq!(f32(2, 20, 512, 12), 1);
        assert_eq!(f32(1, 20, 128, 12), 1);
        assert_eq!(f32(1, 33, 260, 9), 1);
        // Tensor cores count their 128×128 tiles: 4096×512 outputs make 128 of
        // them (256 of the f32 kernel's 128×64), so a K of 14336 splits 4 ways.
        let tc = |b, m, k, n| split_k(b, m, k, n, true);
        assert_eq!(f32(1, 4096, 14336, 512), 1);
        assert_eq!(tc(1, 4096, 14336, 512), 4);
        assert_eq!(tc(1, 512, 4096, 4096), 4);
        assert_eq!(tc(1, 2048, 2048, 2048), 1);
        // Slices of at least 1024 on tensor cores.
        assert_eq!(tc(1, 1024, 1024, 1024), 1);
        assert_eq!(tc(1, 64, 2048, 48), 2);
    }
}
