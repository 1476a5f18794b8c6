//! Products on tensor cores: `f16` products, and `f32` ones under
//! `MatmulPrecision::Half`, match the CPU's `f32` product of the same (rounded)
//! operands within `f16`'s error, on shapes that leave partial tiles on every
//! edge, with transposed operands and batches. Where the adapter has no tensor
//! cores (lavapipe in CI), `Half` is exact and `f16` products take the `f32`
//! kernel: the same checks hold, and `Half` must equal `Full` bit for bit.
#![cfg(feature = "gpu")]

use volta::RawTensor;
use volta::backend::gpu::MatmulPrecision;
use volta::dtype::f16;
use volta::prelude::*;

/// `(batch, m, k, n, a transposed, b transposed)`: every contiguous axis a
/// multiple of 4 (the tensor-core kernels load vectors) but none of a tile, K not
/// a multiple of the K step; some of 8 (16-byte loads of f16), some not; N not a
/// multiple of 4 once (C stored by elements).
#[allow(clippy::type_complexity)]
const SHAPES: [(usize, usize, usize, usize, bool, bool); 9] = [
    (1, 100, 72, 132, false, false),
    (1, 40, 64, 30, false, true),
    (1, 36, 200, 20, true, false),
    (1, 68, 40, 92, false, true),
    (3, 52, 24, 44, true, true),
    (2, 260, 136, 132, false, false),
    // Split along K: partial products summed after (in 4 on the f32 kernel, in
    // 2 on tensor cores, whose slices are at least 1024 long).
    (1, 64, 1024, 48, false, false),
    (1, 64, 2048, 48, false, false),
    (1, 256, 4096, 128, false, true),
];

fn values(n: usize, seed: u32) -> Vec<f32> {
    // Small integers over 8: exact in f16, so the reference needs no rounding.
    // (The seed goes in before the hash: each seed gives its own sequence.)
    (0..n)
        .map(|i| {
            ((i as u32) ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(2654435761) >> 7 & 0xffff
        })
        .map(|v| v % 17)
        .map(|v| (v as f32 - 8.0) / 8.0)
        .collect()
}

/// The operands as stored (`[batch, k, m]` when transposed) and the product's
/// operands as views.
fn operands<D: volta::backend::Backend<E>, E: volta::dtype::Float>(
    (batch, m, k, n, at, bt): (usize, usize, usize, usize, bool, bool),
    a: &[E],
    b: &[E],
) -> (RawTensor<D, E>, RawTensor<D, E>) {
    let a = if at {
        RawTensor::from_vec(a.to_vec(), &[batch, k, m]).transpose_last()
    } else {
        RawTensor::from_vec(a.to_vec(), &[batch, m, k])
    };
    let b = if bt {
        RawTensor::from_vec(b.to_vec(), &[batch, n, k]).transpose_last()
    } else {
        RawTensor::from_vec(b.to_vec(), &[batch, k, n])
    };
    (a, b)
}

/// Largest |x − reference| over the largest |reference|.
fn rel_error(x: &[f32], reference: &[f32]) -> f32 {
    assert_eq!(x.len(), reference.len());
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    let err = x.iter().zip(reference).fold(0f32, |m, (x, y)| {
        // `max` passes over NaN: a NaN result is an infinite error.
        let d = (x - y).abs();
        if d.is_nan() { f32::INFINITY } else { m.max(d) }
    });
    err / scale
}

#[test]
fn tensor_core_products_match_the_cpu_within_f16_error() {
    let _gpu = crate::support::gpu_alone();
    let info =
        Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    for (s, &shape) in SHAPES.iter().enumerate() {
        let (batch, m, k, n, _, _) = shape;
        let (a, b) = (
            values(batch * m * k, s as u32),
            values(batch * k * n, 99 + s as u32),
        );
        let (ca, cb) = operands::<Cpu, f32>(shape, &a, &b);
        let want = ca.matmul(&cb).to_vec();

        let (ga, gb) = operands::<Gpu, f32>(shape, &a, &b);
        let full = ga.matmul(&gb).to_vec();
        Gpu::set_matmul_precision(MatmulPrecision::Half);
        let half = ga.matmul(&gb).to_vec();
        Gpu::set_matmul_precision(MatmulPrecision::Full);
        assert!(rel_error(&full, &want) < 1e-6, "{shape:?}: full precision");
        // The operands are exact in f16 and the sums are accumulated in f32.
        let err = rel_error(&half, &want);
        assert!(err < 1e-5, "{shape:?}: half precision, error {err}");
        if !info.tensor_cores {
            assert_eq!(half, full, "{shape:?}: Half without tensor cores is Full");
        }

        if info.f16 {
            let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
            let (ha, hb) = operands::<Gpu, f16>(shape, &h(&a), &h(&b));
            let got: Vec<f32> = ha.matmul(&hb).to_vec().iter().map(|x| x.to_f32()).collect();
            // One rounding to f16 of each output.
            let err = rel_error(&got, &want);
            assert!(err < 1e-3, "{shape:?}: f16 product, error {err}");
        }

        // The same product started from a bias along its columns (a linear
        // layer's `addmm`: the accumulators start from it on tensor cores).
        if batch == 1 {
            let bias = values(n, 7 + s as u32);
            let want: Vec<f32> = want
                .iter()
                .enumerate()
                .map(|(i, v)| v + bias[i % n])
                .collect();
            let full = with_bias(&ga, &gb, &bias).to_vec();
            Gpu::set_matmul_precision(MatmulPrecision::Half);
            let half = with_bias(&ga, &gb, &bias).to_vec();
            Gpu::set_matmul_precision(MatmulPrecision::Full);
            assert!(rel_error(&full, &want) < 1e-6, "{shape:?}: full, bias");
            let err = rel_error(&half, &want);
            assert!(err < 1e-5, "{shape:?}: half precision, bias, error {err}");
            if info.f16 {
                let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
                let (ha, hb) = operands::<Gpu, f16>(shape, &h(&a), &h(&b));
                let got = with_bias(&ha, &hb, &h(&bias)).to_vec();
                let got: Vec<f32> = got.iter().map(|x| x.to_f32()).collect();
                let err = rel_error(&got, &want);
                assert!(
                    err < 1e-3,
                    "{shape:?}: f16 product, bias, error {err}\n{:?}\n{:?}",
                    &got[..20],
                    &want[..20]
                );
            }
        }
    }
}

/// `a·b + bias` for a batch of one, the bias along the columns.
fn with_bias<D: volta::backend::Backend<E>, E: volta::dtype::Float>(
    a: &RawTensor<D, E>,
    b: &RawTensor<D, E>,
    bias: &[E],
) -> RawTensor<D, E> {
    let (m, k, n) = (a.dims()[1], a.dims()[2], b.dims()[2]);
    let bias = RawTensor::from_vec(bias.to_vec(), &[1, n]).expand(&[m, n]);
    a.reshape(&[m, k]).matmul_add(&b.reshape(&[k, n]), &bias)
}

/// Attention in half precision (`MatmulPrecision::Half`: every product of the
/// forward and backward on tensor cores where the adapter has them, head widths
/// of 16 to 64) matches the CPU's f32 within f16's error, output and gradients:
/// causal and not, grouped queries, a query count that is no multiple of the
/// 64-row tiles, keys that start mid-tile, dropout on the weights (the devices
/// drop the same ones), the backward in one launch (dq added atomically) and in
/// two, and keys that grow along the sequence (each tile's scores pass the
/// maximum so far, so the forward rescales its output), and padded batches
/// (rows that see no key give zeros). Without tensor cores it is the f32
/// kernels.
#[test]
fn attention_in_half_precision_matches_the_cpu() {
    use volta::Gradients;
    use volta::backend::Backend;
    use volta_kernels::{BinaryOp, ReduceOp};
    let _gpu = crate::support::gpu_alone();
    /// The output and the gradients of `Σ out·w` for q, k, v.
    fn run<D: Backend<f32>>(
        dims: [[usize; 4]; 2],
        causal: Option<usize>,
        keys: Option<Vec<std::ops::Range<usize>>>,
        p: f64,
        growing: bool,
    ) -> [Vec<f32>; 4] {
        /// Feature 0 of row t, where a leaf sets it.
        type First<'a> = Option<&'a dyn Fn(usize) -> f32>;
        let leaf = |dims: [usize; 4], seed: u32, first: First| {
            let n = dims.iter().product();
            let (t, d) = (dims[2], dims[3]);
            let mut v: Vec<f32> = values(n, seed).iter().map(|x| x * 2.0).collect();
            if let Some(first) = first {
                for (row, x) in v.iter_mut().step_by(d).enumerate() {
                    *x = first(row % t);
                }
            }
            RawTensor::<D, f32>::from_vec(v, &dims).tracked_leaf()
        };
        // Growing keys: every query's score gains t/4 at key t (8 · t/4 · 1/√64,
        // exact in f16), 16 a tile of 64 keys, past the kernel's rescale threshold.
        let (eight, ramp) = (|_| 8.0, |t: usize| t as f32 / 4.0);
        let (qf, kf): (First, First) = if growing {
            (Some(&eight), Some(&ramp))
        } else {
            (None, None)
        };
        let (q, k, v) = (
            leaf(dims[0], 1, qf),
            leaf(dims[1], 2, kf),
            leaf(dims[1], 3, None),
        );
        let spec = volta::backend::AttentionSpec {
            dropout: p,
            seed: 5,
            keys: keys.map(Into::into),
            ..volta::backend::AttentionSpec::new(1.0 / (dims[0][3] as f64).sqrt(), causal)
        };
        let out = q.attention_with(&k, &v, spec);
        let w = RawTensor::<D, f32>::from_vec(values(out.layout().numel(), 4), out.dims());
        let got = out.to_vec();
        let grads: Gradients<D> = out
            .binary(BinaryOp::Mul, &w)
            .reduce_all(ReduceOp::Sum)
            .backward();
        let grad = |x: &RawTensor<D, f32>| grads.get_raw(x.id()).expect("a gradient").to_vec();
        [got, grad(&q), grad(&k), grad(&v)]
    }
    // Deterministic: the backward in two launches; else, where the adapter adds
    // `f32` atomically, one that adds dq atomically.
    for deterministic in [false, true] {
        Gpu::set_deterministic(deterministic);
        // Padded batches (each batch element's range of keys): left padding
        // under a causal mask, whose first rows see no key, and a batch element
        // that is all padding beside one whose keys start past a tile.
        let cases = [
            (64, 100, Some(0), None, false),
            (32, 70, None, None, false),
            (16, 130, Some(5), None, false),
            (64, 200, Some(0), None, true),
            (64, 150, Some(0), Some(vec![0..150, 70..150]), false),
            (32, 140, None, Some(vec![0..0, 66..131]), false),
        ];
        for (d, t, causal, keys, growing) in cases {
            for p in [0.0, 0.2] {
                let (b, h, hkv) = (2, 4, 2);
                let s = if causal == Some(5) { t + 5 } else { t };
                let dims = [[b, h, t, d], [b, hkv, s, d]];
                let want = run::<Cpu>(dims, causal, keys.clone(), p, growing);
                Gpu::set_matmul_precision(MatmulPrecision::Half);
                let got = run::<Gpu>(dims, causal, keys.clone(), p, growing);
                Gpu::set_matmul_precision(MatmulPrecision::Full);
                for (what, (g, w)) in ["out", "dq", "dk", "dv"].iter().zip(got.iter().zip(&want)) {
                    let err = rel_error(g, w);
                    assert!(
                        err < 1e-2,
                        "d {d}, T {t}, {causal:?}, keys {keys:?}, dropout {p}, growing keys {growing}, \
                         deterministic {deterministic}: {what} error {err}"
                    );
                }
            }
        }
    }
    Gpu::set_deterministic(false);
}

/// Products in half precision of operands that are still pending values (an
/// elementwise tree, a softmax's rows, a normalisation's rows times a scale):
/// each is rounded to `f16` from its tree, once, and a later product of it (the
/// weight's gradient `xᵀ·g` after the forward's `x·Wᵀ`) reads that copy. The
/// results match the CPU's products of the same operands rounded to `f16`; and
/// after the operand is read back (in memory from then on), the same products
/// give the same bits. Without tensor cores, `Half` is `Full`.
#[test]
fn half_precision_products_of_pending_operands_match_the_cpu() {
    use volta::backend::Backend;
    use volta_kernels::{BinaryOp, UnaryOp};
    let _gpu = crate::support::gpu_alone();
    let info =
        Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    let (m, k, n) = (100, 64, 36);
    /// The three operands (pending where the device fuses), `W (n, k)` and `g (m, n)`.
    type Inputs<D> = ([RawTensor<D, f32>; 3], RawTensor<D, f32>, RawTensor<D, f32>);
    fn inputs<D: Backend<f32>>((m, k, n): (usize, usize, usize)) -> Inputs<D> {
        let t = |dims: &[usize], seed| {
            RawTensor::<D, f32>::from_vec(values(dims.iter().product(), seed), dims)
        };
        let (x, scale) = (t(&[m, k], 1), t(&[m, k], 2));
        let tree = x.unary(UnaryOp::Tanh).binary(BinaryOp::Mul, &x);
        let rows = x.softmax(1);
        let norm = x.normalize(1, true, 1e-5).binary(BinaryOp::Mul, &scale);
        ([tree, rows, norm], t(&[n, k], 3), t(&[m, n], 4))
    }
    /// `a·Wᵀ` and `aᵀ·g`.
    fn products<D: Backend<f32>>(
        a: &RawTensor<D, f32>,
        w: &RawTensor<D, f32>,
        g: &RawTensor<D, f32>,
    ) -> [Vec<f32>; 2] {
        [
            a.matmul(&w.transpose_last()).to_vec(),
            a.transpose_last().matmul(g).to_vec(),
        ]
    }
    let round =
        |v: Vec<f32>| -> Vec<f32> { v.iter().map(|&x| f16::from_f32(x).to_f32()).collect() };
    let (cpu, cw, cg) = inputs::<Cpu>((m, k, n));
    for (what, (c, g)) in ["tree", "softmax rows", "normalised rows"]
        .iter()
        .zip(cpu.iter().zip(inputs::<Gpu>((m, k, n)).0))
    {
        let (_, gw, gg) = inputs::<Gpu>((m, k, n));
        let rounded = RawTensor::<Cpu, f32>::from_vec(round(c.to_vec()), &[m, k]);
        let want = products(&rounded, &cw, &cg);
        Gpu::set_matmul_precision(MatmulPrecision::Half);
        let pending = products(&g, &gw, &gg);
        let in_memory = {
            g.to_vec();
            products(&g, &gw, &gg)
        };
        Gpu::set_matmul_precision(MatmulPrecision::Full);
        let full = products(&g, &gw, &gg);
        for (i, (got, want)) in pending.iter().zip(&want).enumerate() {
            // Operands a rounding apart where the devices' f32 values differ
            // in their last bits.
            let err = rel_error(got, want);
            assert!(err < 2e-3, "{what}, product {i}: error {err}");
        }
        assert_eq!(pending, in_memory, "{what}: from the tree and from memory");
        if !info.tensor_cores {
            assert_eq!(pending, full, "{what}: Half without tensor cores is Full");
        }
    }
}

/// An operand in memory that half precision rounded to `f16` (the copy is kept
/// for its next products; here for every operand, not only those read often) is
/// rounded again once it is written in place, as a KV cache's rows are: the
/// product after the write reads the new values, and it equals the CPU's
/// product of them (small integers over 8, exact in `f16`).
#[test]
fn half_precision_products_follow_writes_in_place() {
    use volta::backend::Backend;
    use volta::layout::Layout;
    let _gpu = crate::support::gpu_alone();
    Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    let (m, k, n) = (64, 48, 40);
    let (old, new, w) = (values(m * k, 1), values(m * k, 5), values(k * n, 2));
    assert_ne!(old, new);
    let a = RawTensor::<Gpu, f32>::from_vec(old.clone(), &[m, k]);
    let gw = RawTensor::<Gpu, f32>::from_vec(w.clone(), &[k, n]);
    let cw = RawTensor::<Cpu, f32>::from_vec(w, &[k, n]);
    let cpu = |x: &[f32]| {
        RawTensor::<Cpu, f32>::from_vec(x.to_vec(), &[m, k])
            .matmul(&cw)
            .to_vec()
    };
    Gpu::set_matmul_precision(MatmulPrecision::Half);
    Gpu::set_matmul_copy_reads(Some(1));
    let before = [a.matmul(&gw).to_vec(), a.matmul(&gw).to_vec()];
    let src = RawTensor::<Gpu, f32>::from_vec(new.clone(), &[m, k]);
    let mut shared = a.buffer().clone();
    <Gpu as Backend<f32>>::write_into(&mut shared, &Layout::contiguous(&[m, k]), src.view());
    let after = a.matmul(&gw).to_vec();
    Gpu::set_matmul_copy_reads(None);
    Gpu::set_matmul_precision(MatmulPrecision::Full);
    assert_eq!(before[0], cpu(&old), "before the write");
    assert_eq!(before[1], cpu(&old), "before the write, from the kept copy");
    assert_eq!(after, cpu(&new), "after the write in place");
}

/// An `f16` product whose K splits (its `f32` partial products summed in a
/// pending reduction) plus an `f16` bias, the product itself dropped: the sum
/// with the bias as its epilogue would read the bias as `f32`, so the bias is
/// added after the sum instead (it once came out wrong by 5%).
#[test]
fn f16_split_products_plus_a_bias_match_the_cpu() {
    let _gpu = crate::support::gpu_alone();
    let info =
        Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    if !info.f16 {
        // No f16 tensors on this adapter (lavapipe in CI has them).
        return;
    }
    let (m, k, n) = (64, 1024, 48);
    let a = values(m * k, 1);
    let b = values(k * n, 2);
    let bias = values(n, 3);
    let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
    let ca = RawTensor::<Cpu, f32>::from_vec(a.clone(), &[m, k]);
    let cb = RawTensor::<Cpu, f32>::from_vec(b.clone(), &[k, n]);
    let cbias = RawTensor::<Cpu, f32>::from_vec(bias.clone(), &[1, n]).expand(&[m, n]);
    let want = ca
        .matmul(&cb)
        .binary(volta_kernels::BinaryOp::Add, &cbias)
        .to_vec();
    let ga = RawTensor::<Gpu, f16>::from_vec(h(&a), &[m, k]);
    let gb = RawTensor::<Gpu, f16>::from_vec(h(&b), &[k, n]);
    let gbias = RawTensor::<Gpu, f16>::from_vec(h(&bias), &[1, n]).expand(&[m, n]);
    let y = ga.matmul(&gb);
    let z = y.binary(volta_kernels::BinaryOp::Add, &gbias);
    drop(y);
    let got: Vec<f32> = z.to_vec().iter().map(|x| x.to_f32()).collect();
    let err = rel_error(&got, &want);
    assert!(err < 1e-3, "f16 split product plus a bias: error {err}");
}

/// A bias's gradient in half precision: the column sum of a pending gradient
/// whose `f16` copy the products before it read (`gᵀ·x`, `g·W`) sums that copy,
/// as PyTorch's `autocast` sums the `f16` gradient its product returns. Each
/// element is 1 + 2⁻¹², which `f16` rounds to 1: with tensor cores the sums are
/// the row count exactly; without them (`Half` is `Full`) they keep the 2⁻¹²s.
#[test]
fn half_precision_bias_gradients_sum_the_products_f16_copy() {
    use volta_kernels::{BinaryOp, ReduceOp};
    let _gpu = crate::support::gpu_alone();
    let info =
        Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    let (m, k, n) = (256, 64, 48);
    let t = |v: Vec<f32>, dims: &[usize]| RawTensor::<Gpu, f32>::from_vec(v, dims);
    let x = t(values(m * k, 1), &[m, k]);
    let w = t(values(n * k, 2), &[n, k]);
    let near_one = 1.0 + (-12f32).exp2();
    Gpu::set_matmul_precision(MatmulPrecision::Half);
    // A pending gradient: a product of two tensors in memory.
    let g = t(vec![near_one; m * n], &[m, n]).binary(BinaryOp::Mul, &t(vec![1.0; m * n], &[m, n]));
    let gw = g.transpose_last().matmul(&x).to_vec();
    let gx = g.matmul(&w).to_vec();
    let sums = g.reduce(ReduceOp::Sum, 0).to_vec();
    Gpu::set_matmul_precision(MatmulPrecision::Full);
    assert!(gw.iter().chain(&gx).all(|v| v.is_finite()));
    let want = if info.tensor_cores {
        m as f32
    } else {
        m as f32 * near_one
    };
    assert!(
        sums.iter().all(|&s| s == want),
        "column sums {:?}, want {want} (tensor cores: {})",
        &sums[..4],
        info.tensor_cores
    );
    // Once the gradient is in memory, the sum reads its f32 values.
    g.to_vec();
    let sums = g.reduce(ReduceOp::Sum, 0).to_vec();
    assert!(
        sums.iter().all(|&s| s == m as f32 * near_one),
        "{:?}",
        &sums[..4]
    );
}

/// `MatmulPrecision::Split` keeps `f32`'s accuracy on tensor cores: operands
/// with whole 24-bit mantissas (no `f16` holds them), magnitudes spread over
/// 2¹⁶ inside each operand, and whole operands far outside `f16`'s range (a
/// gradient near 2⁻³⁰, an activation near 2²⁰), on every shape of [`SHAPES`]
/// with and without a bias, on the tiles chosen by size and on the large split
/// tiles. Its error against an `f64` product stays within a small multiple of
/// the `f32` kernel's, where `Half` would be near 2⁻¹¹. Without tensor cores,
/// `Split` is `Full` bit for bit.
#[test]
fn split_precision_products_keep_f32_accuracy() {
    use volta::backend::gpu::CoopTiles;
    let _gpu = crate::support::gpu_alone();
    let info =
        Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    // Uniform in ±[1, 2) times 2^(−8..8) times `scale`, from a seeded LCG.
    let spread = |n: usize, seed: u64, scale: f32| -> Vec<f32> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mantissa = 1.0 + ((s >> 40) as f32) / (1u64 << 24) as f32;
                let exponent = ((s >> 20) % 17) as i32 - 8;
                let sign = if (s >> 10) & 1 == 0 { 1.0 } else { -1.0 };
                sign * mantissa * 2f32.powi(exponent) * scale
            })
            .collect()
    };
    let large = CoopTiles::SPLIT_LARGE;
    let split = |f: &dyn Fn() -> Vec<f32>| {
        Gpu::set_matmul_precision(MatmulPrecision::Split);
        let out = f();
        Gpu::set_matmul_precision(MatmulPrecision::Full);
        out
    };
    for (s, &shape) in SHAPES.iter().enumerate() {
        let (batch, m, k, n, at, bt) = shape;
        let (sa, sb) = [(1.0, 1.0), (2f32.powi(-30), 1.0), (1.0, 2f32.powi(20))][s % 3];
        let a = spread(batch * m * k, s as u64, sa);
        let b = spread(batch * k * n, 50 + s as u64, sb);
        let bias = spread(n, 90 + s as u64, sa * sb * 16.0);
        // The product in f64 from the operands as stored.
        let at_a = |z: usize, i: usize, l: usize| {
            f64::from(if at {
                a[(z * k + l) * m + i]
            } else {
                a[(z * m + i) * k + l]
            })
        };
        let at_b = |z: usize, l: usize, j: usize| {
            f64::from(if bt {
                b[(z * n + j) * k + l]
            } else {
                b[(z * k + l) * n + j]
            })
        };
        let want = |with_bias: bool| -> Vec<f32> {
            let mut out = Vec::with_capacity(batch * m * n);
            for z in 0..batch {
                for i in 0..m {
                    for (j, &add) in bias.iter().enumerate() {
                        let dot: f64 = (0..k).map(|l| at_a(z, i, l) * at_b(z, l, j)).sum();
                        let add = if with_bias { f64::from(add) } else { 0.0 };
                        out.push((dot + add) as f32);
                    }
                }
            }
            out
        };
        let (ga, gb) = operands::<Gpu, f32>(shape, &a, &b);
        let (plain, biased) = (want(false), want(true));
        for tiles in [None, Some(large)] {
            Gpu::set_tensor_core_tiles(tiles).unwrap();
            let full = ga.matmul(&gb).to_vec();
            let mut cases = vec![(&plain, full, split(&|| ga.matmul(&gb).to_vec()))];
            if batch == 1 {
                let full = with_bias(&ga, &gb, &bias).to_vec();
                let split = split(&|| with_bias(&ga, &gb, &bias).to_vec());
                cases.push((&biased, full, split));
            }
            for (want, full, split) in cases {
                let (e_full, e_split) = (rel_error(&full, want), rel_error(&split, want));
                eprintln!("{shape:?} tiles {tiles:?}: split {e_split:e}, full {e_full:e}");
                assert!(
                    e_split <= 2.0 * e_full + 1e-7,
                    "{shape:?}, tiles {tiles:?}: split error {e_split}, the f32 kernel's {e_full}"
                );
                if !info.tensor_cores {
                    assert_eq!(
                        &split, &full,
                        "{shape:?}: Split without tensor cores is Full"
                    );
                }
            }
        }
        Gpu::set_tensor_core_tiles(None).unwrap();
    }
}
