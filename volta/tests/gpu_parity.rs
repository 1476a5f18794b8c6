//! GPU parity: every op, forward values and gradients, on `Gpu` against `Cpu`, over
//! seeded random shapes and values, with broadcast, permuted, sliced and strided
//! inputs. Every case runs on the GPU twice, with elementwise fusion on and off, and
//! both must match the CPU. Runs on any Vulkan/Metal/DX12 adapter; on a machine
//! without a GPU, Mesa's lavapipe (`apt-get install mesa-vulkan-drivers libvulkan1`)
//! provides one.
#![cfg(feature = "gpu")]

use volta::backend::Backend;
use volta::prelude::*;
use volta::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

// Tests share one GPU queue; running them one at a time keeps the batch counters
// of the laziness tests meaningful (and the fusion switch, a global, theirs).

fn lock() -> std::sync::RwLockWriteGuard<'static, ()> {
    let g = crate::support::gpu_alone();
    // A test that failed with fusion off must not leave it off for the next one.
    Gpu::set_fusion(true);
    // Kernel and wait counts here are the program's own: tuning (on by default
    // on GPUs, `gpu_autotune.rs` tests it) would add its timing runs.
    Gpu::set_autotune(false).expect("a GPU");
    g
}

/// How an input's values are drawn.
#[derive(Clone, Copy)]
enum Dist {
    /// Standard normal.
    Normal,
    /// Uniform in [0.5, 2): for log, sqrt, recip, pow bases, divisors.
    Positive,
}

/// A computation over raw tensors, written once for every device.
trait Case {
    fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32>;
}

/// Output and input gradients of `case` on device `D`.
fn eval<D: Backend<f32>>(
    case: &impl Case,
    inputs: &[(Vec<usize>, Vec<f32>)],
    weights_seed: u64,
) -> (Vec<usize>, Vec<f32>, Vec<Option<Vec<f32>>>) {
    let leaves: Vec<Tensor<(usize,), D>> = inputs
        .iter()
        .map(|(_, v)| {
            Tensor::from_vec_shaped(v.clone(), (v.len(),))
                .unwrap()
                .requires_grad()
        })
        .collect();
    let raws: Vec<RawTensor<D, f32>> = leaves
        .iter()
        .zip(inputs)
        .map(|(l, (dims, _))| l.raw().reshape(dims))
        .collect();
    let out = case.run(&raws);
    let dims = out.dims().to_vec();
    let value = out.to_vec();
    // Weight the outputs so every gradient element differs.
    let mut rng = Rng::seed(weights_seed);
    let w: Vec<f32> = (0..value.len()).map(|_| rng.normal() as f32).collect();
    let w = RawTensor::<D, f32>::from_vec(w, &dims);
    let loss = out.binary(BinaryOp::Mul, &w).reduce_all(ReduceOp::Sum);
    let loss = Tensor::<(), D>::try_from_raw(loss).unwrap();
    let grads = loss.backward();
    let g = leaves
        .iter()
        .map(|l| grads.get(l).map(|g| g.to_vec()))
        .collect();
    (dims, value, g)
}

fn close(what: &str, cpu: &[f32], gpu: &[f32]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths differ");
    for (i, (&c, &g)) in cpu.iter().zip(gpu).enumerate() {
        let ok = (c - g).abs() <= 2e-4 + 2e-4 * c.abs() || (c.is_nan() && g.is_nan()) || c == g;
        assert!(ok, "{what}: element {i}: cpu {c} vs gpu {g}");
    }
}

/// Runs `case` on both devices with inputs of `dims` and compares everything.
fn check(name: &str, seed: u64, inputs: &[(Vec<usize>, Dist)], case: impl Case) {
    let mut rng = Rng::seed(seed);
    let data: Vec<(Vec<usize>, Vec<f32>)> = inputs
        .iter()
        .map(|(dims, dist)| {
            let n = dims.iter().product();
            let v = (0..n)
                .map(|_| match dist {
                    Dist::Normal => rng.normal() as f32,
                    Dist::Positive => 0.5 + 1.5 * rng.uniform() as f32,
                })
                .collect();
            (dims.clone(), v)
        })
        .collect();
    let (cd, cv, cg) = eval::<Cpu>(&case, &data, seed + 1);
    for fusion in [true, false] {
        Gpu::set_fusion(fusion);
        let (gd, gv, gg) = eval::<Gpu>(&case, &data, seed + 1);
        let what = format!(
            "{name} (fusion {fusion}, seed {seed}, inputs {:?})",
            inputs.iter().map(|i| &i.0).collect::<Vec<_>>()
        );
        assert_eq!(cd, gd, "{what}: dims differ");
        close(&format!("{what} forward"), &cv, &gv);
        for (i, (c, g)) in cg.iter().zip(&gg).enumerate() {
            match (c, g) {
                (Some(c), Some(g)) => close(&format!("{what} grad {i}"), c, g),
                (None, None) => {}
                _ => panic!("{what}: grad {i} exists on one device only"),
            }
        }
    }
    Gpu::set_fusion(true);
}

/// Random dims of `rank` in `1..=max`.
fn dims(rng: &mut Rng, rank: usize, max: usize) -> Vec<usize> {
    (0..rank)
        .map(|_| 1 + (rng.uniform() * max as f64) as usize % max)
        .collect()
}

const SEEDS: [u64; 3] = [1, 2, 3];

#[test]
fn init_reports_the_adapter() {
    let _g = lock();
    let info = Gpu::init().expect("a GPU adapter (install mesa-vulkan-drivers for lavapipe)");
    println!("{info}");
    assert!(!info.name.is_empty());
    assert!(info.max_storage_buffer_binding_size >= 128 << 20);
}

#[test]
fn unary_ops_on_permuted_inputs() {
    let _g = lock();
    struct C(UnaryOp);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].permute(&[2, 0, 1]).unary(self.0)
        }
    }
    for op in UnaryOp::ALL {
        let dist = match op {
            UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Recip => Dist::Positive,
            _ => Dist::Normal,
        };
        for seed in SEEDS {
            let mut rng = Rng::seed(seed * 100);
            let d = dims(&mut rng, 3, 5);
            check(&format!("{op:?}"), seed, &[(d, dist)], C(op));
        }
    }
}

fn binary_dist(op: BinaryOp) -> (Dist, Dist) {
    match op {
        BinaryOp::Pow => (Dist::Positive, Dist::Normal),
        BinaryOp::Div | BinaryOp::Mod => (Dist::Normal, Dist::Positive),
        _ => (Dist::Normal, Dist::Normal),
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    let _g = lock();
    struct C(BinaryOp);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            // b is (1, n1, 1): a stride-0 broadcast on two axes.
            x[0].binary(self.0, &x[1].expand(x[0].dims()))
        }
    }
    for op in BinaryOp::ALL {
        let (da, db) = binary_dist(op);
        for seed in SEEDS {
            let mut rng = Rng::seed(seed * 200);
            let d = dims(&mut rng, 3, 5);
            let b = vec![1, d[1], 1];
            check(&format!("{op:?}"), seed, &[(d, da), (b, db)], C(op));
        }
    }
}

#[test]
fn binary_ops_on_sliced_and_strided_views() {
    let _g = lock();
    struct C(BinaryOp);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            // a: every other row of a slice; b: a transposed view.
            let a = x[0].narrow(1, 1, 4).step(0, 2);
            let b = x[1].transpose_last();
            a.binary(self.0, &b)
        }
    }
    for op in BinaryOp::ALL {
        let (da, db) = binary_dist(op);
        check(
            &format!("{op:?}"),
            7,
            &[(vec![6, 6], da), (vec![4, 3], db)],
            C(op),
        );
    }
}

#[test]
fn scalar_ops() {
    let _g = lock();
    struct C(BinaryOp, f32);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].permute(&[1, 0]).scalar(self.0, self.1)
        }
    }
    for op in BinaryOp::ALL {
        let (dist, c) = match op {
            BinaryOp::Pow => (Dist::Positive, 2.5),
            BinaryOp::Mod => (Dist::Normal, 0.7),
            _ => (Dist::Normal, 0.25),
        };
        for seed in SEEDS {
            check(
                &format!("{op:?} scalar"),
                seed,
                &[(vec![3, 5], dist)],
                C(op, c),
            );
        }
    }
}

#[test]
fn select_and_clamp() {
    let _g = lock();
    struct Sel;
    impl Case for Sel {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let cond = x[0].binary(BinaryOp::Gt, &x[1]);
            RawTensor::select(&cond, &x[0], &x[1].expand(x[0].dims()).unary(UnaryOp::Exp))
        }
    }
    struct Clamp;
    impl Case for Clamp {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].scalar(BinaryOp::Max, -0.5).scalar(BinaryOp::Min, 0.5)
        }
    }
    for seed in SEEDS {
        let mut rng = Rng::seed(seed * 300);
        let d = dims(&mut rng, 2, 6);
        let _ = &d;
        check(
            "select",
            seed,
            &[(vec![4, 5], Dist::Normal), (vec![4, 5], Dist::Normal)],
            Sel,
        );
        check("clamp", seed, &[(d, Dist::Normal)], Clamp);
    }
}

/// A long strided axis with few outputs (a bias gradient's column sums): sums,
/// maxima and minima, of a plain input, of a fused product, and of a broadcast
/// operand, with gradients.
#[test]
fn column_reductions_in_two_passes() {
    let _g = lock();
    struct C(ReduceOp, bool);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let y = if self.1 {
                x[0].binary(BinaryOp::Mul, &x[1].expand(x[0].dims()))
            } else {
                x[0].clone()
            };
            y.reduce(self.0, 0)
        }
    }
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        // A bias gradient's shape, split-K's (few rows), rows that no chunk
        // length divides, and short axes.
        let shapes = [
            (4096, 24),
            (1536, 7),
            (2048, 3),
            (16384, 72),
            (16384, 384),
            (16, 4096),
            (1000, 68),
            (37, 8),
            (2, 4),
        ];
        for (rows, cols) in shapes {
            for fused in [false, true] {
                check(
                    &format!("{op:?} of [{rows}, {cols}] fused {fused}"),
                    9,
                    &[
                        (vec![rows, cols], Dist::Normal),
                        (vec![1, cols], Dist::Normal),
                    ],
                    C(op, fused),
                );
            }
        }
    }
}

/// Column reductions of views: rows starting past the buffer's start (an
/// offset a multiple of four, and one that is not), a column block of a wider
/// matrix, and a matrix as the last two axes of a rank-3 tensor with a leading
/// axis of one.
#[test]
fn column_reductions_of_views() {
    let _g = lock();
    struct V(usize);
    impl Case for V {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            match self.0 {
                0 => x[0].narrow(0, 3, 900).reduce(ReduceOp::Sum, 0),
                1 => x[0]
                    .reshape(&[903 * 64])
                    .narrow(0, 2, 900 * 64)
                    .reshape(&[900, 64])
                    .reduce(ReduceOp::Max, 0),
                2 => x[0].narrow(1, 8, 32).reduce(ReduceOp::Sum, 0),
                _ => x[0].reshape(&[1, 903, 64]).reduce(ReduceOp::Min, 1),
            }
        }
    }
    for case in 0..4 {
        check(
            &format!("column view {case}"),
            11,
            &[(vec![903, 64], Dist::Normal)],
            V(case),
        );
    }
}

/// Neighbouring axes reduced together (a bias gradient's sum over batch and
/// time) are one reduction over the merged axis: on a contiguous tensor and on a
/// permuted one (which cannot merge), the values of reducing axis by axis.
#[test]
fn neighbouring_axes_reduce_as_one() {
    let _g = lock();
    struct Axes(Vec<usize>, bool);
    impl Case for Axes {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let x = if self.1 {
                x[0].permute(&[1, 0, 2])
            } else {
                x[0].clone()
            };
            x.reduce_axes(ReduceOp::Sum, &self.0)
        }
    }
    for axes in [vec![0, 1], vec![1, 2], vec![0, 1, 2]] {
        for permuted in [false, true] {
            check(
                &format!("sum over {axes:?}, permuted {permuted}"),
                4,
                &[(vec![16, 128, 72], Dist::Normal)],
                Axes(axes.clone(), permuted),
            );
        }
    }
}

#[test]
fn reductions_every_axis_both_kernels() {
    let _g = lock();
    struct C(ReduceOp, usize, bool);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let x = if self.2 {
                x[0].permute(&[2, 1, 0])
            } else {
                x[0].clone()
            };
            x.reduce(self.0, self.1)
        }
    }
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        for seed in SEEDS {
            let mut rng = Rng::seed(seed * 400);
            let mut d = dims(&mut rng, 3, 5);
            // A long axis takes the workgroup-tree kernel.
            d[(seed as usize) % 3] = 40 + seed as usize * 70;
            for axis in 0..3 {
                for permuted in [false, true] {
                    let name = format!("{op:?} axis {axis} permuted {permuted}");
                    check(
                        &name,
                        seed,
                        &[(d.clone(), Dist::Normal)],
                        C(op, axis, permuted),
                    );
                }
            }
        }
    }
}

#[test]
fn mean_and_reduce_all() {
    let _g = lock();
    struct Mean;
    impl Case for Mean {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].mean_axis(1)
        }
    }
    struct All(ReduceOp);
    impl Case for All {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].transpose_last().reduce_all(self.0)
        }
    }
    for seed in SEEDS {
        check("mean", seed, &[(vec![3, 7, 2], Dist::Normal)], Mean);
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            check(
                &format!("{op:?} all"),
                seed,
                &[(vec![9, 33], Dist::Normal)],
                All(op),
            );
        }
    }
}

#[test]
fn matmul_shapes_edges_transposes_and_batches() {
    let _g = lock();
    struct Mm {
        ta: bool,
        tb: bool,
    }
    impl Case for Mm {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let a = if self.ta {
                x[0].transpose_last()
            } else {
                x[0].clone()
            };
            let b = if self.tb {
                x[1].transpose_last()
            } else {
                x[1].clone()
            };
            a.matmul(&b)
        }
    }
    // (batch, m, k, n): edges that are not tile multiples, k not a multiple of 4,
    // vector-friendly sizes, one size that takes the large tiles, and split-K.
    let shapes = [
        (1, 1, 1, 1),
        (1, 5, 3, 7),
        (2, 17, 9, 33),
        (3, 8, 16, 12),
        (1, 65, 64, 70),
        (2, 260, 36, 264),
        // Few output tiles and a long K split K into slices (forward; backward
        // for ∂b, whose K is m); K = 260 cannot split into 4-aligned slices.
        (1, 20, 512, 12),
        (1, 512, 20, 12),
        (1, 33, 260, 9),
    ];
    for (i, &(bs, m, k, n)) in shapes.iter().enumerate() {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a = if ta { vec![bs, k, m] } else { vec![bs, m, k] };
            let b = if tb { vec![bs, n, k] } else { vec![bs, k, n] };
            let name = format!("matmul {bs}x{m}x{k}x{n} ta {ta} tb {tb}");
            check(
                &name,
                i as u64,
                &[(a, Dist::Normal), (b, Dist::Normal)],
                Mm { ta, tb },
            );
        }
    }
}

#[test]
fn matmul_broadcast_batch_and_shared_weight() {
    let _g = lock();
    struct Bcast;
    impl Case for Bcast {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            // b's batch axis has stride 0.
            let b = x[1].expand(&[3, 6, 5]);
            x[0].matmul(&b)
        }
    }
    struct Shared;
    impl Case for Shared {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].matmul(&x[1])
        }
    }
    check(
        "bmm broadcast",
        1,
        &[(vec![3, 4, 6], Dist::Normal), (vec![1, 6, 5], Dist::Normal)],
        Bcast,
    );
    check(
        "shared weight",
        2,
        &[(vec![2, 3, 8], Dist::Normal), (vec![8, 4], Dist::Normal)],
        Shared,
    );
    check(
        "vector",
        3,
        &[(vec![8], Dist::Normal), (vec![8, 4], Dist::Normal)],
        Shared,
    );
}

/// `x·Wᵀ + b` as one product that starts from the bias, as a linear layer runs
/// it: columns not a multiple of 4 (scalar stores), of 4 (vector stores), a
/// long K that splits (the bias joins the partial products' sum), rows in a
/// batch, and an addend that is not a bias (added after the product).
#[test]
fn products_start_from_their_bias() {
    let _g = lock();
    struct Linear;
    impl Case for Linear {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let (dims, n) = (x[0].dims(), x[2].dims()[0]);
            let mut out = dims[..dims.len() - 1].to_vec();
            out.push(n);
            let mut one = vec![1; out.len() - 1];
            one.push(n);
            let bias = x[2].reshape(&one).expand(&out);
            x[0].matmul_add(&x[1].transpose_last(), &bias)
        }
    }
    struct Full;
    impl Case for Full {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].matmul_add(&x[1], &x[2])
        }
    }
    let n = Dist::Normal;
    for (seed, (m, k, n_out)) in [(4, 5, 3), (33, 20, 12), (20, 512, 12), (70, 9, 65)]
        .into_iter()
        .enumerate()
    {
        check(
            "linear",
            seed as u64,
            &[(vec![m, k], n), (vec![n_out, k], n), (vec![n_out], n)],
            Linear,
        );
    }
    check(
        "linear over a batch",
        5,
        &[(vec![2, 7, 6], n), (vec![5, 6], n), (vec![5], n)],
        Linear,
    );
    check(
        "a full addend",
        6,
        &[(vec![7, 6], n), (vec![6, 5], n), (vec![7, 5], n)],
        Full,
    );
}

#[test]
fn movement_ops() {
    let _g = lock();
    struct Permute;
    impl Case for Permute {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            // reshape of a permuted view copies through the strided copy kernel.
            x[0].permute(&[1, 2, 0])
                .reshape(&[x[0].dims()[1], x[0].dims()[2] * x[0].dims()[0]])
        }
    }
    struct Expand;
    impl Case for Expand {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            // Broadcast backward is a reduction over the expanded axes.
            x[0].expand(&[4, x[0].dims()[1], 3]).unary(UnaryOp::Sin)
        }
    }
    struct NarrowStep;
    impl Case for NarrowStep {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].narrow(0, 1, 3).step(1, 3).contiguous()
        }
    }
    struct Pad;
    impl Case for Pad {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].transpose_last().pad(&[(1, 2), (0, 3)], 0.5)
        }
    }
    struct Cat;
    impl Case for Cat {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let b = x[1].transpose_last();
            RawTensor::cat(&[x[0].clone(), b, x[2].step(1, 1)], 1)
        }
    }
    for seed in SEEDS {
        let mut rng = Rng::seed(seed * 500);
        let d = dims(&mut rng, 3, 5);
        check(
            "permute+reshape",
            seed,
            &[(d.clone(), Dist::Normal)],
            Permute,
        );
        check("expand", seed, &[(vec![1, d[1], 1], Dist::Normal)], Expand);
        check(
            "narrow+step",
            seed,
            &[(vec![5, 7 + seed as usize], Dist::Normal)],
            NarrowStep,
        );
        check("pad", seed, &[(d[1..].to_vec(), Dist::Normal)], Pad);
        check(
            "cat",
            seed,
            &[
                (vec![3, 2], Dist::Normal),
                (vec![d[0], 3], Dist::Normal),
                (vec![3, 4], Dist::Normal),
            ],
            Cat,
        );
    }
}

#[test]
fn gather_and_index_select() {
    let _g = lock();
    struct Gather;
    impl Case for Gather {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            // Repeated indices: the scatter-add backward must sum them.
            let idx: Vec<u32> = (0..4 * 6).map(|i| (i * 7 % 5) as u32).collect();
            let idx = RawTensor::<D, u32>::from_vec(idx, &[4, 6]);
            x[0].permute(&[1, 0]).gather(1, &idx)
        }
    }
    struct Select;
    impl Case for Select {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let ids = RawTensor::<D, u32>::from_vec(vec![3, 0, 3, 2, 1, 3], &[6]);
            x[0].index_select(&ids).unary(UnaryOp::Tanh)
        }
    }
    // An embedding's shape: many ids (several chunks of the scatter's scan),
    // most rows hit many times, some never, lines no multiple of 16.
    struct Embedding;
    impl Case for Embedding {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let ids: Vec<u32> = (0..5000u32).map(|i| (i * i * 7 + i) % 290).collect();
            let ids = RawTensor::<D, u32>::from_vec(ids, &[5000]);
            x[0].index_select(&ids)
        }
    }
    for seed in SEEDS {
        check("gather", seed, &[(vec![5, 4], Dist::Normal)], Gather);
        check("index_select", seed, &[(vec![4, 3], Dist::Normal)], Select);
    }
    check("embedding", 1, &[(vec![300, 40], Dist::Normal)], Embedding);
    // An id past the table is reported by the embedding's backward too.
    let src = RawTensor::<Gpu, f32>::from_vec(vec![1.0; 3 * 40], &[3, 40]);
    let ids = RawTensor::<Gpu, u32>::from_vec(vec![0, 300, 2], &[3, 1]).expand_any(&[3, 40]);
    assert!(matches!(
        src.scatter_add(&[300, 40], 0, &ids).try_to_vec(),
        Err(volta::backend::gpu::GpuError::IndexOutOfRange)
    ));
}

/// Two pre-norm residual blocks (`x + (norm(x)·W)·s`, the scale standing for
/// dropout): the values and gradients match the CPU's, and the gradient each
/// residual hands on (its own plus the norm's) is written by the norm
/// gradient's kernel, once, rather than the norm gradient written alone, read
/// by the branch, and added to the residual's by a kernel of its own.
#[test]
fn residual_gradients_are_written_by_the_norm_gradient() {
    let _g = lock();
    struct Blocks;
    impl Case for Blocks {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let block = |x: &RawTensor<D, f32>, w: &RawTensor<D, f32>| {
                let branch = x
                    .normalize(1, true, 1e-5)
                    .matmul(w)
                    .scalar(BinaryOp::Mul, 0.5);
                x.binary(BinaryOp::Add, &branch)
            };
            let y = x[0].scalar(BinaryOp::Mul, 1.5);
            block(&block(&y, &x[1]), &x[2])
        }
    }
    let (r, c) = (24, 32);
    let inputs = [
        (vec![r, c], Dist::Normal),
        (vec![c, c], Dist::Normal),
        (vec![c, c], Dist::Normal),
    ];
    check("residual blocks", 31, &inputs, Blocks);
    let gpu = |n: usize, k: f32| {
        Tensor::<(usize,), Gpu>::from_vec_shaped(
            (0..n).map(|i| (i as f32 * k).sin()).collect(),
            (n,),
        )
        .unwrap()
        .requires_grad()
    };
    let leaves = [gpu(r * c, 0.37), gpu(c * c, 0.11), gpu(c * c, 0.23)];
    let raws: Vec<_> = leaves
        .iter()
        .zip(&inputs)
        .map(|(l, (dims, _))| l.raw().reshape(dims))
        .collect();
    // Weighted, so that the last residual's gradient is a buffer (as the
    // next block's would be), not a constant.
    let weights = gpu(r * c, 0.71).raw().reshape(&[r, c]).detach();
    let loss = Blocks
        .run(&raws)
        .binary(BinaryOp::Mul, &weights)
        .reduce_all(ReduceOp::Sum);
    let loss = Tensor::<(), Gpu>::try_from_raw(loss).unwrap();
    loss.raw().buffer().realize();
    let before = Gpu::dispatches_recorded();
    let grads = loss.backward();
    for l in &leaves {
        grads.get(l).unwrap().raw().buffer().realize();
    }
    // Nine kernels. Before the residual's gradient was settled when handed on,
    // ten: the second block's norm gradient alone, then the branch reading it
    // with the residual's gradient, then their sum for the first block.
    assert_eq!(Gpu::dispatches_recorded() - before, 9);
}

/// Many short rows (a transformer's features) run a row per subgroup: sums,
/// maxima, softmax and layer/RMS norms of a fused expression, with gradients.
#[test]
fn many_short_rows() {
    let _g = lock();
    struct C(u8);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let y = x[0].binary(BinaryOp::Mul, &x[1].expand(x[0].dims()));
            match self.0 {
                0 => y.reduce(ReduceOp::Sum, 1),
                1 => y.reduce(ReduceOp::Max, 1),
                2 => y.softmax(1),
                3 => y.normalize(1, true, 1e-5),
                _ => y.normalize(1, false, 1e-5),
            }
        }
    }
    for (rows, cols) in [(512, 64), (300, 200), (260, 1024)] {
        for op in 0..5 {
            check(
                &format!("op {op} over rows of [{rows}, {cols}]"),
                3,
                &[
                    (vec![rows, cols], Dist::Normal),
                    (vec![1, cols], Dist::Normal),
                ],
                C(op),
            );
        }
    }
}

#[test]
fn softmax_and_log_softmax() {
    let _g = lock();
    struct C(bool, usize);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            if self.0 {
                x[0].softmax(self.1)
            } else {
                x[0].log_softmax(self.1)
            }
        }
    }
    for seed in SEEDS {
        for axis in 0..2 {
            check(
                "softmax",
                seed,
                &[(vec![6, 37], Dist::Normal)],
                C(true, axis),
            );
            check(
                "log_softmax",
                seed,
                &[(vec![6, 37], Dist::Normal)],
                C(false, axis),
            );
            // Rows of 64: vec4 reductions and splat broadcasts.
            let rows = [(vec![5, 64], Dist::Normal)];
            check("softmax rows of 64", seed, &rows, C(true, axis));
            check("log_softmax rows of 64", seed, &rows, C(false, axis));
        }
    }
}

#[test]
fn typed_api_and_device_moves() {
    let _g = lock();
    let mut rng = Rng::seed(9);
    let x = Tensor::<Rank2<4, 3>>::randn(&mut rng);
    let w = Tensor::<Rank2<3, 2>>::randn(&mut rng);
    let run = |x: Tensor<Rank2<4, 3>, Gpu>, w: Tensor<Rank2<3, 2>, Gpu>| {
        let w = w.requires_grad();
        let loss = x.matmul(&w).gelu().softmax::<Axis<1>>().sum_all();
        let g = loss.backward().get(&w).unwrap();
        g.to::<Cpu>()
    };
    let wc = w.requires_grad();
    let gc = x
        .matmul(&wc)
        .gelu()
        .softmax::<Axis<1>>()
        .sum_all()
        .backward()
        .get(&wc)
        .unwrap();
    let gg = run(x.to::<Gpu>(), w.to::<Gpu>());
    close("typed", &gc.to_vec(), &gg.to_vec());
    let z = Tensor::<Rank1<5>, Gpu>::zeros();
    assert_eq!(z.to_vec(), vec![0.0; 5]);
    let ids = Tensor::<Rank1<3>, Gpu, u32>::from_array([4, 1, 2]);
    assert_eq!(ids.to_vec(), vec![4, 1, 2]);
}

#[test]
fn u32_buffers_copy_and_fill() {
    let _g = lock();
    let t = RawTensor::<Gpu, u32>::from_vec((0..12).collect(), &[3, 4]);
    let p = RawTensor::<Gpu, u32>::leaf(t.buffer().clone(), t.layout().permute(&[1, 0]));
    assert_eq!(p.to_vec(), vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    let c = p.reshape_any(&[12]);
    assert_eq!(c.to_vec(), vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    let f = Tensor::<Rank1<3>, Gpu, u32>::full(7);
    assert_eq!(f.to_vec(), vec![7, 7, 7]);
}

#[test]
fn a_thousand_chained_ops_then_one_read_back() {
    let _g = lock();
    fn chain<D: Backend<f32>>() -> Vec<f32> {
        let mut rng = Rng::seed(5);
        let mut t = Tensor::<Rank2<8, 8>, D>::randn(&mut rng);
        for i in 0..1000 {
            t = match i % 4 {
                0 => t.mul_scalar(0.9),
                1 => t.add_scalar(0.01),
                2 => t.tanh(),
                _ => t.sin(),
            };
        }
        t.to_vec()
    }
    let cpu = chain::<Cpu>();
    for fusion in [false, true] {
        Gpu::set_fusion(fusion);
        let (batches, dispatches) = (Gpu::batches_submitted(), Gpu::dispatches_recorded());
        let g = chain::<Gpu>();
        let batches = Gpu::batches_submitted() - batches;
        let dispatches = Gpu::dispatches_recorded() - dispatches;
        if fusion {
            // Fused, the chain is cut only where a tree reaches its size limit.
            assert!(dispatches <= 60, "fused chain: {dispatches} dispatches");
        } else {
            // 1000 dispatches do not fit one batch: the recorder submitted full
            // batches on its own, then once more for the read-back.
            assert!(dispatches > 1000, "unfused chain: {dispatches} dispatches");
            assert!(batches >= 4, "expected several batches, saw {batches}");
        }
        close(&format!("chain (fusion {fusion})"), &cpu, &g);
    }
    Gpu::set_fusion(true);
}

/// Full batches are submitted by another thread while recording goes on: uploads,
/// kernels and buffers that return to the pool and serve the next batch keep
/// their recording order across those hand-overs.
#[test]
fn batches_handed_to_the_submitting_thread_keep_recording_order() {
    let _g = lock();
    fn run<D: Backend<f32>>() -> (Vec<f32>, Vec<f32>) {
        let mut x = RawTensor::<D, f32>::from_vec((0..256).map(|i| i as f32).collect(), &[256]);
        let mut kept = Vec::new();
        for step in 0..1500 {
            // A fresh upload each step, into a buffer that a dropped
            // intermediate of an earlier (possibly already handed-over) batch
            // may have just returned to the pool.
            let bias = RawTensor::<D, f32>::from_vec(vec![step as f32 * 1e-3; 256], &[256]);
            x = x.scalar(BinaryOp::Mul, 0.5).binary(BinaryOp::Add, &bias);
            if step % 500 == 499 {
                kept.push(x.clone());
            }
        }
        let kept = kept.iter().flat_map(|t| t.to_vec()).collect();
        (x.to_vec(), kept)
    }
    Gpu::set_fusion(false);
    let batches = Gpu::batches_submitted();
    let gpu = run::<Gpu>();
    let batches = Gpu::batches_submitted() - batches;
    Gpu::set_fusion(true);
    assert!(batches >= 10, "expected many batches, saw {batches}");
    let cpu = run::<Cpu>();
    close("last value", &cpu.0, &gpu.0);
    close("values kept along the way", &cpu.1, &gpu.1);
}

#[test]
fn a_fused_chain_is_one_kernel_that_runs_when_needed() {
    let _g = lock();
    let mut rng = Rng::seed(12);
    let data: Vec<Vec<f32>> = (0..3)
        .map(|_| (0..1000).map(|_| rng.normal() as f32).collect())
        .collect();
    let expect: Vec<f32> = (0..1000)
        .map(|i| (data[0][i] * data[1][i] + data[2][i]).max(0.0))
        .collect();
    for (fusion, kernels) in [(true, 1), (false, 3)] {
        Gpu::set_fusion(fusion);
        let [a, b, c] =
            [0, 1, 2].map(|i| RawTensor::<Gpu, f32>::from_vec(data[i].clone(), &[1000]));
        let before = Gpu::dispatches_recorded();
        let y = a
            .binary(BinaryOp::Mul, &b)
            .binary(BinaryOp::Add, &c)
            .unary(UnaryOp::Relu);
        // Pending until something needs it in memory.
        assert_eq!(y.buffer().is_pending(), fusion);
        y.buffer().realize();
        assert!(!y.buffer().is_pending());
        assert_eq!(
            Gpu::dispatches_recorded() - before,
            kernels,
            "fusion {fusion}"
        );
        close(
            &format!("relu(a*b+c) fusion {fusion}"),
            &expect,
            &y.to_vec(),
        );
    }
    Gpu::set_fusion(true);
}

#[test]
fn reductions_compute_pending_producers_in_their_loads() {
    let _g = lock();
    let mut rng = Rng::seed(21);
    let data: Vec<f32> = (0..5 * 64).map(|_| rng.normal() as f32).collect();
    fn softmax_parts<D: Backend<f32>>(x: &RawTensor<D, f32>) -> [RawTensor<D, f32>; 3] {
        let m = x.reduce(ReduceOp::Max, 1).expand(&[5, 64]);
        let e = x.binary(BinaryOp::Sub, &m).unary(UnaryOp::Exp);
        let s = e.reduce(ReduceOp::Sum, 1);
        [e, s, m]
    }
    let cpu = softmax_parts(&RawTensor::<Cpu, f32>::from_vec(data.clone(), &[5, 64]));
    Gpu::set_fusion(true);
    let x = RawTensor::<Gpu, f32>::from_vec(data, &[5, 64]);
    let before = Gpu::dispatches_recorded();
    let [e, s, _] = softmax_parts(&x);
    s.buffer().realize();
    // Two reductions, no kernel for exp(x − max): it ran inside the sum's loads
    // and is still pending for its next consumer.
    assert_eq!(Gpu::dispatches_recorded() - before, 2);
    assert!(e.buffer().is_pending());
    close("Σ exp(x − max), fused", &cpu[1].to_vec(), &s.to_vec());
    // A reduction through a permuted view materialises the producer instead.
    let t = e.permute(&[1, 0]).reduce(ReduceOp::Sum, 0);
    assert!(!e.buffer().is_pending());
    close(
        "Σ exp(x − max), materialised",
        &cpu[1].to_vec(),
        &t.to_vec(),
    );
    close("exp(x − max)", &cpu[0].to_vec(), &e.to_vec());
}

#[test]
fn softmax_is_one_kernel_over_its_pending_producer() {
    let _g = lock();
    let mut rng = Rng::seed(22);
    let x: Vec<f32> = (0..5 * 64).map(|_| rng.normal() as f32).collect();
    let c: Vec<f32> = (0..5).map(|_| rng.normal() as f32).collect();
    // softmax(2x + c) along rows, c broadcast along the row (a stride-0 input).
    fn run<D: Backend<f32>>(
        x: &RawTensor<D, f32>,
        c: &RawTensor<D, f32>,
        log: bool,
    ) -> RawTensor<D, f32> {
        let y = x
            .scalar(BinaryOp::Mul, 2.0)
            .binary(BinaryOp::Add, &c.expand(&[5, 64]));
        if log { y.log_softmax(1) } else { y.softmax(1) }
    }
    Gpu::set_fusion(true);
    let (xc, cc) = (
        RawTensor::<Cpu, f32>::from_vec(x.clone(), &[5, 64]),
        RawTensor::<Cpu, f32>::from_vec(c.clone(), &[5, 1]),
    );
    let (xg, cg) = (
        RawTensor::<Gpu, f32>::from_vec(x, &[5, 64]),
        RawTensor::<Gpu, f32>::from_vec(c, &[5, 1]),
    );
    for log in [false, true] {
        let before = Gpu::dispatches_recorded();
        let y = run(&xg, &cg, log);
        y.buffer().realize();
        assert_eq!(Gpu::dispatches_recorded() - before, 1, "log {log}");
        let name = format!("softmax of a pending producer, log {log}");
        close(&name, &run(&xc, &cc, log).to_vec(), &y.to_vec());
    }
}

#[test]
fn values_carried_across_steps_are_materialised_with_their_consumer() {
    let _g = lock();
    // Momentum: m ← 0.9·m + g; w ← w − 0.1·m; then a reduction reads w. Without
    // cutting the chain at m, every step would recompute m from all past g.
    fn run<D: Backend<f32>>() -> (Vec<f32>, Vec<RawTensor<D, f32>>) {
        let mut w = RawTensor::<D, f32>::from_vec(vec![1.0; 64], &[8, 8]);
        let mut m = RawTensor::<D, f32>::from_vec(vec![0.0; 64], &[8, 8]);
        let mut sums = Vec::new();
        let mut ms = Vec::new();
        for step in 0..20 {
            let g = RawTensor::<D, f32>::from_vec(
                (0..64)
                    .map(|i| ((i * 7 + step) % 11) as f32 - 5.0)
                    .collect(),
                &[8, 8],
            );
            m = m.scalar(BinaryOp::Mul, 0.9).binary(BinaryOp::Add, &g);
            w = w.binary(BinaryOp::Sub, &m.scalar(BinaryOp::Mul, 0.1));
            sums.push(w.reduce_all(ReduceOp::Sum));
            ms.push(m.clone());
        }
        let v = sums.iter().flat_map(|s| s.to_vec()).collect();
        (v, ms)
    }
    let (cpu, _) = run::<Cpu>();
    let (gpu, ms) = run::<Gpu>();
    close("momentum", &cpu, &gpu);
    for (step, m) in ms.iter().enumerate() {
        assert!(
            !m.buffer().is_pending(),
            "m of step {step} was never written"
        );
    }
}

#[test]
fn a_held_function_of_one_buffer_is_recomputed_not_written() {
    let _g = lock();
    // Dropout's mask, held for the backward: its consumer is recorded, and the
    // mask stays a tree over the uniform numbers (reading them again costs what
    // writing and reading the mask would) until it is read itself.
    fn run<D: Backend<f32>>() -> (Vec<f32>, RawTensor<D, f32>) {
        let x = RawTensor::<D, f32>::from_vec((0..64).map(|i| i as f32 - 20.0).collect(), &[8, 8]);
        let keep = RawTensor::<D, f32>::uniform(&[8, 8], 3)
            .scalar(BinaryOp::Ge, 0.25)
            .scalar(BinaryOp::Mul, 4.0 / 3.0);
        let y = x.binary(BinaryOp::Mul, &keep);
        (y.to_vec(), keep)
    }
    let (cpu, cpu_keep) = run::<Cpu>();
    let (gpu, gpu_keep) = run::<Gpu>();
    close("x · keep", &cpu, &gpu);
    assert!(
        gpu_keep.buffer().is_pending(),
        "the mask was written when its consumer was"
    );
    close("keep", &cpu_keep.to_vec(), &gpu_keep.to_vec());
    // A held value of two buffers is still written with its consumer (the
    // momentum test above).
}

#[test]
fn a_held_product_plus_bias_and_a_scaled_norm_are_recomputed_not_written() {
    let _g = lock();
    // A linear layer's output `x·w + b` held for the backward (GELU's input) and a
    // LayerNorm's `x̂·γ` held by the add of `β`: one full-size buffer each (the
    // product; the norm's rows, once written) and a small broadcast one. Their
    // consumers are recorded, and they stay trees until read themselves.
    fn run<D: Backend<f32>>() -> (Vec<f32>, [RawTensor<D, f32>; 2]) {
        // 64 rows: the broadcast rows are a small part of the values.
        let x = RawTensor::<D, f32>::from_vec(
            (0..768).map(|i| (i % 13) as f32 * 0.25 - 1.0).collect(),
            &[64, 12],
        );
        let w = RawTensor::<D, f32>::from_vec(
            (0..48).map(|i| (i % 7) as f32 * 0.5 - 1.5).collect(),
            &[12, 4],
        );
        let b = RawTensor::<D, f32>::from_vec(vec![0.5, -1.0, 2.0, 0.0], &[1, 4]);
        let h = x.matmul(&w).binary(BinaryOp::Add, &b.expand(&[64, 4]));
        let gamma = RawTensor::<D, f32>::from_vec(vec![1.5, -0.5, 2.0, 1.0], &[1, 4]);
        let scaled = h
            .normalize(1, true, 1e-5)
            .binary(BinaryOp::Mul, &gamma.expand(&[64, 4]));
        let y = h.unary(UnaryOp::Gelu).binary(BinaryOp::Add, &scaled);
        (y.to_vec(), [h, scaled])
    }
    let (cpu, cpu_held) = run::<Cpu>();
    let (gpu, gpu_held) = run::<Gpu>();
    close("gelu(x·w + b) + norm(x·w + b)·γ", &cpu, &gpu);
    for (name, held) in ["x·w + b", "x̂·γ"].iter().zip(&gpu_held) {
        assert!(
            held.buffer().is_pending(),
            "{name} was written when its consumer was"
        );
    }
    for ((name, c), g) in ["x·w + b", "x̂·γ"].iter().zip(&cpu_held).zip(&gpu_held) {
        close(name, &c.to_vec(), &g.to_vec());
    }
}

#[test]
fn a_training_step_records_without_syncing() {
    let _g = lock();
    let mut rng = Rng::seed(11);
    let x = Tensor::<Rank2<16, 8>, Gpu>::randn(&mut rng);
    let mut w = Tensor::<Rank2<8, 4>, Gpu>::randn(&mut rng);
    Gpu::sync().unwrap();
    let before = Gpu::host_waits();
    for _ in 0..3 {
        let wt = w.requires_grad();
        let loss = x.matmul(&wt).relu().log_softmax::<Axis<1>>().mean_all();
        let g = loss.backward().get(&wt).unwrap();
        w = (&w - &g.mul_scalar(0.1)).detach();
    }
    // Forward, backward and update of three steps stayed on the device: the
    // host did not wait for the GPU until the read-back below.
    assert_eq!(Gpu::host_waits(), before, "a training step synchronised");
    let _ = w.to_vec();
    assert_eq!(Gpu::host_waits(), before + 1);
}

#[test]
fn out_of_range_gather_index_is_reported_at_the_read_back() {
    let _g = lock();
    let x = RawTensor::<Gpu, f32>::from_vec(vec![1.0, 2.0, 3.0], &[3]);
    let idx = RawTensor::<Gpu, u32>::from_vec(vec![0, 5], &[2]);
    let y = x.gather(0, &idx);
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| y.to_vec()))
        .expect_err("an out-of-range index must not read back silently");
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("out of range"), "unexpected panic: {msg}");
    // The error was consumed: later work runs normally.
    assert_eq!(x.to_vec(), vec![1.0, 2.0, 3.0]);
    Gpu::sync().unwrap();
}

#[test]
fn matmul_every_tile_candidate() {
    let _g = lock();
    // Forward products only, four per candidate: together they load A and B in
    // each of the four ways (`vec4` along k or along m/n, scalars along either)
    // and store C with and without `vec4`s, over more than one tile in m and n
    // and a partial tile in k. Each product is a kernel compiled per candidate;
    // on a CPU adapter compiling them is most of this test's time, so the
    // gradients (products the other tests cover with the default tiles) are left
    // out.
    fn product<D: Backend<f32>>(
        a: &[f32],
        b: &[f32],
        (m, k, n): (usize, usize, usize),
        ta: bool,
        tb: bool,
    ) -> Vec<f32> {
        let a = if ta {
            RawTensor::<D, f32>::from_vec(a.to_vec(), &[k, m]).transpose_last()
        } else {
            RawTensor::<D, f32>::from_vec(a.to_vec(), &[m, k])
        };
        let b = if tb {
            RawTensor::<D, f32>::from_vec(b.to_vec(), &[n, k]).transpose_last()
        } else {
            RawTensor::<D, f32>::from_vec(b.to_vec(), &[k, n])
        };
        a.matmul(&b).to_vec()
    }
    let info = Gpu::init().unwrap();
    let mut rng = Rng::seed(5);
    // (m, k, n): every dim a multiple of 4 (the vec4 loads and stores), and none
    // (scalars); both span two 128-wide tiles and end inside a k tile.
    let cases = [(132, 20, 136), (133, 7, 130)].map(|(m, k, n)| {
        let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
        ((m, k, n), a, b)
    });
    let layouts = [(false, false), (true, true)];
    let expected: Vec<Vec<f32>> = cases
        .iter()
        .flat_map(|(mkn, a, b)| layouts.map(|(ta, tb)| product::<Cpu>(a, b, *mkn, ta, tb)))
        .collect();
    for tiles in volta::backend::gpu::MatmulTiles::CANDIDATES {
        if tiles
            .check(
                info.max_invocations_per_workgroup,
                info.max_workgroup_storage_size,
            )
            .is_err()
        {
            continue;
        }
        Gpu::set_matmul_tiles(Some(tiles)).unwrap();
        let got = cases
            .iter()
            .flat_map(|(mkn, a, b)| layouts.map(|(ta, tb)| product::<Gpu>(a, b, *mkn, ta, tb)));
        for (i, (want, got)) in expected.iter().zip(got).enumerate() {
            let (mkn, _, _) = &cases[i / 2];
            let (ta, tb) = layouts[i % 2];
            close(
                &format!("matmul {mkn:?} ta {ta} tb {tb} {tiles:?}"),
                want,
                &got,
            );
        }
    }
    Gpu::set_matmul_tiles(None).unwrap();
}

#[test]
fn no_adapter_error_says_how_to_get_one() {
    let msg = volta::backend::gpu::GpuError::NoAdapter.to_string();
    assert!(msg.contains("mesa-vulkan-drivers"), "{msg}");
    assert!(msg.contains("driver"), "{msg}");
}

#[test]
fn freed_buffers_are_reused_in_recording_order() {
    let _g = lock();
    // `x`'s buffer returns to the pool while the batch still has to read it; the
    // next upload of the same size takes it. Its new contents must land only after
    // the recorded kernel has read the old ones.
    let mut pending = Vec::new();
    for i in 0..8 {
        let x = RawTensor::<Gpu, f32>::from_vec(vec![i as f32; 1000], &[1000]);
        let y = x.scalar(BinaryOp::Add, 1.0);
        drop(x);
        let z = RawTensor::<Gpu, f32>::from_vec(vec![-1.0; 1000], &[1000]);
        pending.push((i, y, z));
    }
    for (i, y, z) in pending {
        assert_eq!(y.to_vec(), vec![i as f32 + 1.0; 1000], "iteration {i}");
        assert_eq!(z.to_vec(), vec![-1.0; 1000]);
    }
}

#[test]
fn four_wide_elementwise_paths() {
    let _g = lock();
    // Inner dims that are multiples of 4 take the vec4 kernels: aligned slices,
    // broadcasts along the inner axis (splat) and along outer axes, and unaligned
    // slices that must fall back to one element per thread.
    struct C(usize);
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let a = x[0].narrow(1, self.0, 8);
            let row = x[1].expand(&[3, 8]);
            let col = x[2].expand(&[3, 8]);
            a.binary(BinaryOp::Mul, &row)
                .binary(BinaryOp::Sub, &col)
                .unary(UnaryOp::Gelu)
                .pad(&[(0, 1), (4, 0)], 0.25)
        }
    }
    for (seed, start) in [(1, 0), (2, 4), (3, 1), (4, 8)] {
        check(
            &format!("vec4 start {start}"),
            seed,
            &[
                (vec![3, 16], Dist::Normal),
                (vec![1, 8], Dist::Normal),
                (vec![3, 1], Dist::Normal),
            ],
            C(start),
        );
    }
}

#[test]
fn elementwise_every_launch_candidate() {
    let _g = lock();
    // Contiguous (vec4), broadcast, strided and ragged sizes under every thread
    // layout the benchmark may pick, fused and not.
    struct C;
    impl Case for C {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let b = x[1].expand(x[0].dims());
            x[0].binary(BinaryOp::Mul, &b)
                .binary(BinaryOp::Add, &x[2].transpose_last())
                .unary(UnaryOp::Relu)
        }
    }
    for launch in volta::backend::gpu::Launch::CANDIDATES {
        Gpu::set_elementwise_launch(Some(launch)).unwrap();
        for (i, (m, n)) in [(3, 5), (37, 64), (129, 33)].into_iter().enumerate() {
            check(
                &format!("{launch:?} {m}x{n}"),
                i as u64,
                &[
                    (vec![m, n], Dist::Normal),
                    (vec![1, n], Dist::Normal),
                    (vec![n, m], Dist::Normal),
                ],
                C,
            );
        }
    }
    Gpu::set_elementwise_launch(None).unwrap();
}

#[test]
fn profile_times_every_kernel_by_name() {
    let _g = lock();
    Gpu::set_fusion(true);
    let mut rng = Rng::seed(23);
    let data: Vec<f32> = (0..64 * 64).map(|_| rng.normal() as f32).collect();
    let x = RawTensor::<Gpu, f32>::from_vec(data, &[64, 64]);
    let work = || x.matmul(&x).unary(UnaryOp::Relu).softmax(1).to_vec();
    let expect = work();
    let (got, profile) = match Gpu::profile(work) {
        Ok(r) => r,
        // Adapters without timestamp queries say so; lavapipe has them.
        Err(volta::backend::gpu::GpuError::Unsupported(_)) => return,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(got, expect);
    let names: Vec<&str> = profile.kernels.iter().map(|k| k.name.as_str()).collect();
    // The matmul, then softmax computing the pending relu in its loads.
    assert_eq!(profile.calls(), 2, "{profile}");
    assert!(names.contains(&"matmul"), "{profile}");
    assert!(names.contains(&"softmax rows of relu(x0)"), "{profile}");
    assert!(profile.total() > std::time::Duration::ZERO, "{profile}");
    assert!(profile.to_string().contains("softmax rows"));
    // Profiling stopped: later work is not timed, and a new profile starts empty.
    let (_, again) = Gpu::profile(|| ()).unwrap();
    assert_eq!(again.calls(), 0);
}

#[test]
fn a_sum_reads_its_operand_once_another_consumer_has_written_it() {
    let _g = lock();
    Gpu::set_fusion(true);
    // A bias's gradient: the sum over rows of a pending g = a · b, whose other
    // consumer (the product for the input's gradient) writes it first.
    fn run<D: Backend<f32>>() -> (Vec<f32>, Vec<f32>) {
        let a = RawTensor::<D, f32>::from_vec(
            (0..96).map(|i| i as f32 * 0.1 - 4.0).collect(),
            &[16, 6],
        );
        let b = RawTensor::<D, f32>::from_vec(
            (0..96).map(|i| (i % 7) as f32 - 3.0).collect(),
            &[16, 6],
        );
        let w =
            RawTensor::<D, f32>::from_vec((0..36).map(|i| (i % 5) as f32 * 0.5).collect(), &[6, 6]);
        let g = a.binary(BinaryOp::Mul, &b);
        let bias = g.sum_to(&[1, 6]);
        let dx = g.matmul(&w);
        // As in a backward pass, nothing but the pending sum holds g now.
        drop(g);
        (bias.to_vec(), dx.to_vec())
    }
    let cpu = run::<Cpu>();
    let work = run::<Gpu>;
    let (gpu, profile) = match Gpu::profile(work) {
        Ok(r) => r,
        Err(volta::backend::gpu::GpuError::Unsupported(_)) => return,
        Err(e) => panic!("{e}"),
    };
    close("bias", &cpu.0, &gpu.0);
    close("dx", &cpu.1, &gpu.1);
    let names: Vec<&str> = profile.kernels.iter().map(|k| k.name.as_str()).collect();
    // g is written once (for the product), and the sum reads it: it does not
    // compute a · b again.
    assert!(names.contains(&"elementwise (x0 * x1)"), "{profile}");
    assert!(
        names.iter().all(|n| !n.contains("sum") || !n.contains('*')),
        "{profile}"
    );
}

#[test]
fn a_residual_stream_is_written_once_by_the_norm_that_reads_it() {
    let _g = lock();
    Gpu::set_fusion(true);
    // A transformer's sublayer: a product plus its bias, computed on rows
    // (B·T, C) and read as (B, T, C), added to the residual stream, which the
    // next norm reads and the next add holds. The norm computes the sum in its
    // loads, bias included (the reshaped read keeps the broadcast bias a leaf),
    // and writes it as it loads it: no kernel of its own, no second read.
    fn run<D: Backend<f32>>() -> (Vec<f32>, Vec<f32>) {
        let x = RawTensor::<D, f32>::from_vec(
            (0..2 * 8 * 16)
                .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5)
                .collect(),
            &[2, 8, 16],
        );
        let w = RawTensor::<D, f32>::from_vec(
            (0..256)
                .map(|i| ((i * 5) % 11) as f32 * 0.1 - 0.5)
                .collect(),
            &[16, 16],
        );
        let b = RawTensor::<D, f32>::from_vec((0..16).map(|i| i as f32 * 0.1).collect(), &[1, 16]);
        let h = x
            .reshape(&[16, 16])
            .matmul(&w)
            .binary(BinaryOp::Add, &b.expand(&[16, 16]))
            .reshape(&[2, 8, 16]);
        let stream = x.binary(BinaryOp::Add, &h);
        let normed = stream.normalize(2, true, 1e-5);
        (normed.to_vec(), stream.to_vec())
    }
    let cpu = run::<Cpu>();
    let (gpu, profile) = match Gpu::profile(run::<Gpu>) {
        Ok(r) => r,
        Err(volta::backend::gpu::GpuError::Unsupported(_)) => return,
        Err(e) => panic!("{e}"),
    };
    close("norm of the stream", &cpu.0, &gpu.0);
    close("the stream", &cpu.1, &gpu.1);
    let names: Vec<&str> = profile.kernels.iter().map(|k| k.name.as_str()).collect();
    // The norm's kernel computes and writes x + (x·w + b).
    assert!(
        names.contains(&"normalize rows of (x0 + (x1 + x2))"),
        "{profile}"
    );
    assert_eq!(profile.calls(), 2, "{profile}");
}

#[test]
fn a_residual_adds_dropout_output_is_not_written_for_the_backward() {
    let _g = lock();
    Gpu::set_fusion(true);
    // x + dropout(x·w), then a norm: the addition's backward reads neither
    // input, so its graph node holds them without their data, and the dropout
    // output (a product times a mask) is never written. Only the stream is
    // (by the norm, which computes it in its loads), which the norm saves for
    // its backward. The weight's gradient (the mask recomputed) matches the CPU.
    type W<D> = Tensor<(usize, usize), D>;
    fn forward<D: Backend<f32>>() -> (RawTensor<D, f32>, W<D>) {
        let x = RawTensor::<D, f32>::from_vec(
            (0..256)
                .map(|i| ((i * 7) % 13) as f32 * 0.25 - 1.5)
                .collect(),
            &[16, 16],
        );
        let w = W::<D>::from_vec_shaped(
            (0..256)
                .map(|i| ((i * 5) % 11) as f32 * 0.1 - 0.5)
                .collect(),
            (16, 16),
        )
        .unwrap()
        .requires_grad();
        let stream = x.binary(
            BinaryOp::Add,
            &volta::nn::functional::dropout(&x.matmul(w.raw()), 0.25, 9),
        );
        let normed = stream.normalize(1, true, 1e-5);
        let loss = normed
            .binary(BinaryOp::Mul, &normed)
            .reduce_all(ReduceOp::Sum);
        (loss, w)
    }
    let ((loss, w), profile) = match Gpu::profile(|| {
        let (loss, w) = forward::<Gpu>();
        let _ = loss.to_vec();
        (loss, w)
    }) {
        Ok(r) => r,
        Err(volta::backend::gpu::GpuError::Unsupported(_)) => return,
        Err(e) => panic!("{e}"),
    };
    let names: Vec<&str> = profile.kernels.iter().map(|k| k.name.as_str()).collect();
    assert!(
        names.contains(&"normalize rows of (x0 + (x1 * (ge(u2, s0) * s1)))"),
        "the norm computes the stream: {profile}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("elementwise")),
        "the stream is written by the norm: {profile}"
    );
    assert!(
        !names.contains(&"elementwise (x0 * (ge(u1, s0) * s1))"),
        "the dropout output is written: {profile}"
    );
    fn grad<D: Backend<f32>>(loss: RawTensor<D, f32>, w: &W<D>) -> Vec<f32> {
        let loss = Tensor::<(), D>::try_from_raw(loss).unwrap();
        loss.backward().get(w).unwrap().to_vec()
    }
    let (cpu_loss, cpu_w) = forward::<Cpu>();
    close("the loss", &cpu_loss.to_vec(), &loss.to_vec());
    close(
        "the weight's gradient",
        &grad(cpu_loss, &cpu_w),
        &grad(loss, &w),
    );
}

#[test]
fn the_backward_pass_releases_what_each_op_saved() {
    let _g = lock();
    // Eight layers relu(h·W) over 64×64 activations. The program holds the
    // output through the backward pass, as a training loop holding its logits
    // does; the values the products and ReLUs saved still go as the walk runs
    // each op, so afterwards little more than the held output is in use.
    let n = 64;
    let mut rng = Rng::seed(3);
    let mut randn = |dims: &[usize]| {
        let len = dims.iter().product();
        RawTensor::<Gpu, f32>::from_vec((0..len).map(|_| rng.normal() as f32 * 0.2).collect(), dims)
    };
    let weights: Vec<RawTensor<Gpu, f32>> = (0..8).map(|_| randn(&[n, n]).tracked_leaf()).collect();
    let x = randn(&[n, n]);
    if Gpu::sync().is_err() {
        return;
    }
    let in_use = || {
        let m = Gpu::memory();
        m.reserved_bytes - m.cached_bytes
    };
    let before = in_use();
    let mut h = x;
    for w in &weights {
        h = h.matmul(w).unary(UnaryOp::Relu);
    }
    let out = h.clone();
    let loss = h.reduce_all(ReduceOp::Sum);
    let _ = loss.to_vec();
    let held = in_use() - before;
    let grads = loss.backward();
    assert!(grads.get_raw(weights[0].id()).is_some());
    drop(grads);
    Gpu::sync().unwrap();
    let after = in_use() - before;
    let layer = (n * n * 4) as u64;
    assert!(held >= 8 * layer, "the forward held {held} bytes");
    assert!(
        after <= 2 * layer,
        "{after} bytes still in use after the backward pass (the forward held {held})"
    );
    drop(out);
}

#[test]
fn gradients_of_slices_that_tile_a_weight_are_concatenated() {
    let _g = lock();
    Gpu::set_fusion(true);
    // A fused weight used as three slices of its rows (a projection's queries,
    // keys and values) and once whole; and two slices that overlap.
    fn run<D: Backend<f32>>(ranges: &[(usize, usize)]) -> Vec<f32> {
        let w = Tensor::<Rank2<6, 4>, D>::from_vec((0..24).map(|i| i as f32 * 0.25).collect())
            .expect("24 values")
            .requires_grad();
        let mut loss = w.raw().scalar(BinaryOp::Mul, 0.5).sum_to(&[1, 1]);
        for (k, &(from, n)) in ranges.iter().enumerate() {
            let c = RawTensor::<D, f32>::from_vec(
                (0..n * 4).map(|i| (i + k) as f32).collect(),
                &[n, 4],
            );
            let part = w
                .raw()
                .narrow(0, from, n)
                .binary(BinaryOp::Mul, &c)
                .sum_to(&[1, 1]);
            loss = loss.binary(BinaryOp::Add, &part);
        }
        let grads = loss.backward();
        grads.get(&w).expect("w has a gradient").to_vec()
    }
    for ranges in [&[(0, 2), (2, 3), (5, 1)][..], &[(0, 3), (2, 3)][..]] {
        // d loss / d w: 0.5 everywhere, plus each slice's constants in its rows.
        let mut expect = vec![0.5f32; 24];
        for (k, &(from, n)) in ranges.iter().enumerate() {
            for i in 0..n * 4 {
                expect[from * 4 + i] += (i + k) as f32;
            }
        }
        let cpu = run::<Cpu>(ranges);
        close(&format!("{ranges:?} on the CPU"), &expect, &cpu);
        let (gpu, profile) = match Gpu::profile(|| run::<Gpu>(ranges)) {
            Ok(r) => r,
            Err(volta::backend::gpu::GpuError::Unsupported(_)) => return,
            Err(e) => panic!("{e}"),
        };
        close(&format!("{ranges:?} on the GPU"), &expect, &gpu);
        // Tiling slices are copied into place: the one fill is the loss's own
        // gradient (ones); overlapping slices are each padded with zeros.
        let fills: u64 = profile
            .kernels
            .iter()
            .filter(|k| k.name == "elementwise s0")
            .map(|k| k.calls)
            .sum();
        let padded = if ranges.len() == 2 { 2 } else { 0 };
        assert_eq!(fills, 1 + padded, "{ranges:?}: {profile}");
    }
}

#[test]
fn empty_cache_releases_pooled_buffers() {
    let _g = lock();
    let t = RawTensor::<Gpu, f32>::from_vec(vec![1.0; 1 << 16], &[1 << 16]);
    drop(t);
    Gpu::sync().unwrap();
    assert!(Gpu::empty_cache() >= 4 << 16);
    assert_eq!(Gpu::empty_cache(), 0);
    // The next tensor of that size needs a new buffer.
    let created = Gpu::buffers_created();
    let t = RawTensor::<Gpu, f32>::from_vec(vec![2.0; 1 << 16], &[1 << 16]);
    assert_eq!(Gpu::buffers_created() - created, 1);
    assert_eq!(t.to_vec()[0], 2.0);
}

#[test]
fn unfold2d_and_fold2d_windows_strides_and_views() {
    let _g = lock();
    /// Unfold (backward: fold) of the input, viewed as NCHW through `perm`.
    struct Unfold(Window2d, [usize; 4], f32);
    impl Case for Unfold {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].permute(&self.1).unfold2d(self.0, self.2)
        }
    }
    /// Fold (backward: unfold) of columns, viewed through `perm`.
    struct Fold(Window2d, [usize; 6], [usize; 2]);
    impl Case for Fold {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            x[0].permute(&self.1).fold2d(self.0, self.2)
        }
    }
    let odd = Window2d {
        kernel: [2, 3],
        stride: [2, 1],
        padding: [1, 2],
        dilation: [2, 1],
    };
    let same = Window2d {
        padding: [1, 1],
        ..Window2d::square(3)
    };
    let pool = Window2d {
        stride: [2, 3],
        dilation: [1, 2],
        ..Window2d::square(2)
    };
    let id4 = [0, 1, 2, 3];
    let id6 = [0, 1, 2, 3, 4, 5];
    for seed in SEEDS {
        // Contiguous NCHW, "same" padding; then an NHWC tensor viewed as NCHW with an
        // odd stride/padding/dilation and a pad value of −3; then a sliced input.
        let contiguous = [(vec![2, 3, 5, 4], Dist::Normal)];
        check("unfold same", seed, &contiguous, Unfold(same, id4, 0.0));
        let nhwc = [(vec![2, 5, 4, 3], Dist::Normal)];
        check(
            "unfold odd NHWC",
            seed,
            &nhwc,
            Unfold(odd, [0, 3, 1, 2], -3.0),
        );
        check("unfold pool", seed, &contiguous, Unfold(pool, id4, 0.5));
        // Fold of contiguous columns and of a permuted view of them.
        let [oh, ow] = odd.output([5, 4]).unwrap();
        let cols = [(vec![2, oh, ow, 3, 2, 3], Dist::Normal)];
        check("fold odd", seed, &cols, Fold(odd, id6, [5, 4]));
        let permuted = [(vec![2, 3, oh, 2, ow, 3], Dist::Normal)];
        let perm = [0, 2, 4, 1, 3, 5];
        check(
            "fold odd permuted",
            seed,
            &permuted,
            Fold(odd, perm, [5, 4]),
        );
        let [oh, ow] = same.output([5, 4]).unwrap();
        let cols = [(vec![1, oh, ow, 2, 3, 3], Dist::Normal)];
        check("fold same", seed, &cols, Fold(same, id6, [5, 4]));
    }
}

#[test]
fn convolution_and_max_pooling_through_unfold() {
    let _g = lock();
    /// A 3×3 "same" convolution of (2, 3, 6, 5) images with 4 filters.
    struct Conv;
    impl Case for Conv {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let win = Window2d {
                padding: [1, 1],
                ..Window2d::square(3)
            };
            let cols = x[0].unfold2d(win, 0.0).reshape(&[2 * 6 * 5, 27]);
            let y = cols.matmul(&x[1]).reshape(&[2, 6, 5, 4]);
            y.permute(&[0, 3, 1, 2]).unary(UnaryOp::Relu)
        }
    }
    /// 2×2 max-pooling with stride 2 and padding 1 (−∞ in the padding).
    struct MaxPool;
    impl Case for MaxPool {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let win = Window2d {
                stride: [2, 2],
                padding: [1, 1],
                ..Window2d::square(2)
            };
            let cols = x[0].unfold2d(win, f32::NEG_INFINITY);
            let d = cols.dims().to_vec();
            cols.reshape(&[d[0], d[1], d[2], d[3], 4])
                .reduce(ReduceOp::Max, 4)
        }
    }
    for seed in SEEDS {
        let inputs = [
            (vec![2, 3, 6, 5], Dist::Normal),
            (vec![27, 4], Dist::Normal),
        ];
        check("conv", seed, &inputs, Conv);
        check(
            "max pool",
            seed,
            &[(vec![2, 3, 5, 6], Dist::Normal)],
            MaxPool,
        );
    }
}

#[test]
fn normalize_rows_axes_views_and_pending_producers() {
    let _g = lock();
    /// Normalises `x[0]` (permuted by `perm` when given) along `axis`.
    struct Norm {
        axis: usize,
        center: bool,
        perm: Option<Vec<usize>>,
    }
    impl Case for Norm {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let x = match &self.perm {
                Some(p) => x[0].permute(p),
                None => x[0].clone(),
            };
            x.normalize(self.axis, self.center, 1e-5)
        }
    }
    /// `(a + b)·2` normalised, `b` broadcast along the normalised axis: with fusion
    /// on, the producer is computed in the kernel's loads.
    struct Pending(bool);
    impl Case for Pending {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let y = x[0]
                .binary(BinaryOp::Add, &x[1].expand(x[0].dims()))
                .scalar(BinaryOp::Mul, 2.0);
            y.normalize(1, self.0, 1e-3)
        }
    }
    for seed in SEEDS {
        for center in [true, false] {
            let n = |axis, perm| Norm { axis, center, perm };
            // Short rows (serial), rows of 37 (tree), rows of 64 (vec4), along the
            // last axis and the first.
            for d in [vec![6, 5], vec![6, 37], vec![5, 64]] {
                for axis in 0..2 {
                    let name = format!("normalize {center} {d:?} axis {axis}");
                    check(&name, seed, &[(d.clone(), Dist::Normal)], n(axis, None));
                }
            }
            // A middle axis, and rows of a permuted view.
            let d3 = [(vec![3, 40, 5], Dist::Normal)];
            check("normalize middle axis", seed, &d3, n(1, None));
            let perm = Some(vec![2, 0, 1]);
            check("normalize permuted", seed, &d3, n(2, perm));
            for len in [7, 64] {
                let inputs = [(vec![4, len], Dist::Normal), (vec![4, 1], Dist::Normal)];
                let name = format!("normalize {center} of a pending producer, rows of {len}");
                check(&name, seed, &inputs, Pending(center));
            }
        }
    }
}

#[test]
fn a_norms_gradient_is_one_kernel_with_its_consumer() {
    let _g = lock();
    Gpu::set_fusion(true);
    // ∂/∂a of Σ w · layer_norm(a · 2): the norm's gradient (its input a · 2 and
    // its output's gradient w computed in the loads) with the product's backward,
    // `· 2`, as its epilogue.
    fn run<D: Backend<f32>>() -> Vec<f32> {
        let a = Tensor::<(usize,), D>::from_vec_shaped(
            (0..6 * 48)
                .map(|i| ((i * 11) % 17) as f32 * 0.3 - 2.0)
                .collect(),
            (6 * 48,),
        )
        .unwrap()
        .requires_grad();
        let w = RawTensor::<D, f32>::from_vec(
            (0..6 * 48).map(|i| ((i * 5) % 7) as f32 - 3.0).collect(),
            &[6, 48],
        );
        let y = a
            .raw()
            .reshape(&[6, 48])
            .scalar(BinaryOp::Mul, 2.0)
            .normalize(1, true, 1e-5);
        let loss = y.binary(BinaryOp::Mul, &w).reduce_all(ReduceOp::Sum);
        let grads = Tensor::<(), D>::try_from_raw(loss).unwrap().backward();
        grads.get(&a).unwrap().to_vec()
    }
    let cpu = run::<Cpu>();
    let (gpu, profile) = match Gpu::profile(run::<Gpu>) {
        Ok(r) => r,
        Err(volta::backend::gpu::GpuError::Unsupported(_)) => return,
        Err(e) => panic!("{e}"),
    };
    close("∂a", &cpu, &gpu);
    let grads: Vec<&str> = profile
        .kernels
        .iter()
        .map(|k| k.name.as_str())
        .filter(|n| n.contains("normalize_grad"))
        .collect();
    assert_eq!(grads.len(), 1, "{profile}");
    assert_eq!(
        profile.calls(),
        2 + 1,
        "the forward's norm and sum, the gradient: {profile}"
    );
}

#[test]
fn normalize_is_one_kernel_over_its_pending_producer() {
    let _g = lock();
    let mut rng = Rng::seed(23);
    let x: Vec<f32> = (0..5 * 64).map(|_| rng.normal() as f32).collect();
    let c: Vec<f32> = (0..5).map(|_| rng.normal() as f32).collect();
    fn run<D: Backend<f32>>(
        x: &RawTensor<D, f32>,
        c: &RawTensor<D, f32>,
        center: bool,
        eps: f64,
    ) -> (RawTensor<D, f32>, RawTensor<D, f32>) {
        let y = x
            .scalar(BinaryOp::Mul, 2.0)
            .binary(BinaryOp::Add, &c.expand(&[5, 64]));
        (y.normalize(1, center, eps), y)
    }
    Gpu::set_fusion(true);
    let (xc, cc) = (
        RawTensor::<Cpu, f32>::from_vec(x.clone(), &[5, 64]),
        RawTensor::<Cpu, f32>::from_vec(c.clone(), &[5, 1]),
    );
    let (xg, cg) = (
        RawTensor::<Gpu, f32>::from_vec(x, &[5, 64]),
        RawTensor::<Gpu, f32>::from_vec(c, &[5, 1]),
    );
    for center in [true, false] {
        let before = Gpu::dispatches_recorded();
        let (out, y) = run(&xg, &cg, center, 1e-5);
        out.buffer().realize();
        assert_eq!(Gpu::dispatches_recorded() - before, 1, "center {center}");
        assert!(y.buffer().is_pending(), "the producer stayed pending");
        let name = format!("normalize of a pending producer, center {center}");
        close(
            &name,
            &run(&xc, &cc, center, 1e-5).0.to_vec(),
            &out.to_vec(),
        );
        // Another eps is a parameter: the pipeline is reused.
        let pipelines = Gpu::pipelines_compiled();
        let (out, _) = run(&xg, &cg, center, 0.5);
        close(&name, &run(&xc, &cc, center, 0.5).0.to_vec(), &out.to_vec());
        assert_eq!(Gpu::pipelines_compiled(), pipelines, "a new eps recompiled");
    }
}

/// Fusion across a reduction: RMSNorm and LayerNorm written as primitive ops (as
/// PyTorch users write them) are one kernel each, the reduction's consumer its
/// epilogue; softmax times a mask too. When something else holds the reduction,
/// it runs once on its own and the consumer reads it.
#[test]
fn a_reduction_and_its_elementwise_consumer_are_one_kernel() {
    let _g = lock();
    let mut rng = Rng::seed(24);
    let (r, c) = (6, 96);
    let x: Vec<f32> = (0..r * c).map(|_| rng.normal() as f32).collect();
    let w: Vec<f32> = (0..c).map(|_| rng.normal() as f32).collect();
    let b: Vec<f32> = (0..c).map(|_| rng.normal() as f32).collect();
    fn rms<D: Backend<f32>>(x: &RawTensor<D, f32>, w: &RawTensor<D, f32>) -> RawTensor<D, f32> {
        let dims = x.layout().dims;
        let inv = x
            .binary(BinaryOp::Mul, x)
            .reduce(ReduceOp::Sum, 1)
            .scalar(BinaryOp::Mul, 1.0 / dims[1] as f32)
            .scalar(BinaryOp::Add, 1e-6)
            .unary(UnaryOp::Sqrt)
            .unary(UnaryOp::Recip);
        x.binary(BinaryOp::Mul, &inv.expand(&dims))
            .binary(BinaryOp::Mul, &w.expand(&dims))
    }
    fn layer<D: Backend<f32>>(
        x: &RawTensor<D, f32>,
        w: &RawTensor<D, f32>,
        b: &RawTensor<D, f32>,
    ) -> RawTensor<D, f32> {
        let dims = x.layout().dims;
        x.normalize(1, true, 1e-5)
            .binary(BinaryOp::Mul, &w.expand(&dims))
            .binary(BinaryOp::Add, &b.expand(&dims))
    }
    fn masked<D: Backend<f32>>(x: &RawTensor<D, f32>, w: &RawTensor<D, f32>) -> RawTensor<D, f32> {
        let dims = x.layout().dims;
        x.softmax(1)
            .binary(BinaryOp::Mul, &w.expand(&dims).unary(UnaryOp::Relu))
    }
    let cpu = |v: &[f32], d: &[usize]| RawTensor::<Cpu, f32>::from_vec(v.to_vec(), d);
    let gpu = |v: &[f32], d: &[usize]| RawTensor::<Gpu, f32>::from_vec(v.to_vec(), d);
    let (xc, wc, bc) = (cpu(&x, &[r, c]), cpu(&w, &[1, c]), cpu(&b, &[1, c]));
    let (xg, wg, bg) = (gpu(&x, &[r, c]), gpu(&w, &[1, c]), gpu(&b, &[1, c]));
    Gpu::set_fusion(true);
    type Case<'a> = (&'a str, Vec<f32>, &'a dyn Fn() -> RawTensor<Gpu, f32>);
    let cases: [Case; 3] = [
        ("rms", rms(&xc, &wc).to_vec(), &|| rms(&xg, &wg)),
        ("layer", layer(&xc, &wc, &bc).to_vec(), &|| {
            layer(&xg, &wg, &bg)
        }),
        ("softmax·mask", masked(&xc, &wc).to_vec(), &|| {
            masked(&xg, &wg)
        }),
    ];
    for (name, want, run) in cases {
        let before = Gpu::dispatches_recorded();
        let y = run();
        y.buffer().realize();
        assert_eq!(Gpu::dispatches_recorded() - before, 1, "{name}");
        close(name, &want, &y.to_vec());
    }
    // The sum held elsewhere (as autograd holds values for backward): it runs on
    // its own, once, and the consumer reads it.
    let before = Gpu::dispatches_recorded();
    let sum = xg.binary(BinaryOp::Mul, &xg).reduce(ReduceOp::Sum, 1);
    let y = xg.binary(BinaryOp::Div, &sum.expand(&[r, c]));
    y.buffer().realize();
    assert_eq!(Gpu::dispatches_recorded() - before, 2);
    let want = xc.binary(
        BinaryOp::Div,
        &xc.binary(BinaryOp::Mul, &xc)
            .reduce(ReduceOp::Sum, 1)
            .expand(&[r, c]),
    );
    close("x / Σx², the sum held", &want.to_vec(), &y.to_vec());
    close(
        "Σx², held",
        &xc.binary(BinaryOp::Mul, &xc)
            .reduce(ReduceOp::Sum, 1)
            .to_vec(),
        &sum.to_vec(),
    );
}

/// Split-K's sum of partial products is a pending reduction: a Linear layer's
/// `relu(x·w + b)` after it runs in the sum's kernel (the partial products, then
/// one kernel).
#[test]
fn a_split_k_product_and_its_consumer_share_the_sum_kernel() {
    let _g = lock();
    let mut rng = Rng::seed(25);
    let (m, k, n) = (64, 1024, 48);
    let a: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
    let w: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
    let b: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
    fn linear<D: Backend<f32>>(
        a: &RawTensor<D, f32>,
        w: &RawTensor<D, f32>,
        b: &RawTensor<D, f32>,
    ) -> RawTensor<D, f32> {
        let y = a.matmul(w);
        let dims = y.layout().dims;
        y.binary(BinaryOp::Add, &b.expand(&dims))
            .unary(UnaryOp::Relu)
    }
    let cpu = linear(
        &RawTensor::<Cpu, f32>::from_vec(a.clone(), &[m, k]),
        &RawTensor::<Cpu, f32>::from_vec(w.clone(), &[k, n]),
        &RawTensor::<Cpu, f32>::from_vec(b.clone(), &[1, n]),
    );
    let (ag, wg, bg) = (
        RawTensor::<Gpu, f32>::from_vec(a, &[m, k]),
        RawTensor::<Gpu, f32>::from_vec(w, &[k, n]),
        RawTensor::<Gpu, f32>::from_vec(b, &[1, n]),
    );
    Gpu::set_fusion(true);
    let before = Gpu::dispatches_recorded();
    let y = linear(&ag, &wg, &bg);
    y.buffer().realize();
    assert_eq!(
        Gpu::dispatches_recorded() - before,
        2,
        "partials, then one kernel"
    );
    close("relu(x·w + b), split-K", &cpu.to_vec(), &y.to_vec());
    // Unfused: the partials, their sum, the add, the relu (so the product split).
    Gpu::set_fusion(false);
    let before = Gpu::dispatches_recorded();
    let y = linear(&ag, &wg, &bg);
    assert_eq!(Gpu::dispatches_recorded() - before, 4, "unfused");
    close(
        "relu(x·w + b), split-K, unfused",
        &cpu.to_vec(),
        &y.to_vec(),
    );
    Gpu::set_fusion(true);
    // The product itself, read back, is the sum alone.
    let xw = ag.matmul(&wg);
    let want = RawTensor::<Cpu, f32>::from_vec(ag.to_vec(), &[m, k])
        .matmul(&RawTensor::from_vec(wg.to_vec(), &[k, n]));
    close("x·w, split-K", &want.to_vec(), &xw.to_vec());
}

#[test]
fn uniform_is_bit_identical_across_devices() {
    let _g = lock();
    for seed in [0, 1, 42, 1 << 40, u64::MAX] {
        // 70 000 elements: 274 workgroups.
        for dims in [vec![1], vec![3, 333], vec![70_000]] {
            let c = RawTensor::<Cpu, f32>::uniform(&dims, seed).to_vec();
            let g = RawTensor::<Gpu, f32>::uniform(&dims, seed).to_vec();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&c) == bits(&g),
                "uniform {dims:?} seed {seed}: the devices differ"
            );
            assert!(g.iter().all(|v| (0.0..1.0).contains(v)));
        }
    }
    // Nothing is uploaded, nor written: the kernels that read the numbers draw
    // them where they would load them.
    let x = RawTensor::<Gpu, f32>::from_vec(vec![1.0; 1000], &[1000]);
    let before = Gpu::dispatches_recorded();
    let u = RawTensor::<Gpu, f32>::uniform(&[1000], 7);
    assert_eq!(Gpu::dispatches_recorded() - before, 0);
    // A dropout mask from them: the masked sum takes the kernels it takes over
    // numbers in memory (none draws them first), and agrees with the CPU's bit
    // for bit (the same numbers, summed exactly).
    let kept = x.binary(BinaryOp::Mul, &u.scalar(BinaryOp::Ge, 0.25));
    let share = kept.reduce_all(ReduceOp::Sum).to_vec()[0];
    let drawn = Gpu::dispatches_recorded() - before;
    let before = Gpu::dispatches_recorded();
    let in_memory = x.binary(BinaryOp::Mul, &x.scalar(BinaryOp::Ge, 0.25));
    in_memory.reduce_all(ReduceOp::Sum).to_vec();
    assert_eq!(drawn, Gpu::dispatches_recorded() - before);
    let on_cpu = RawTensor::<Cpu, f32>::uniform(&[1000], 7)
        .scalar(BinaryOp::Ge, 0.25)
        .reduce_all(ReduceOp::Sum)
        .to_vec()[0];
    assert_eq!(share, on_cpu);
    assert!((share / 1000.0 - 0.75).abs() < 0.05, "kept {share}");
    // Read through a view (every other element, reversed rows), the numbers
    // are drawn at the view's addresses, as memory would be read.
    let dims = [6, 8];
    let u = RawTensor::<Gpu, f32>::uniform(&dims, 9);
    let c = RawTensor::<Cpu, f32>::uniform(&dims, 9);
    let gview = u.transpose_last().scalar(BinaryOp::Add, 0.0);
    let cview = c.transpose_last().scalar(BinaryOp::Add, 0.0);
    assert_eq!(gview.to_vec(), cview.to_vec());
}

#[test]
fn a_convolution_norm_dropout_step_records_without_syncing() {
    let _g = lock();
    let mut rng = Rng::seed(12);
    let randn = |rng: &mut Rng, dims: &[usize]| {
        let n = dims.iter().product();
        RawTensor::<Gpu, f32>::from_vec((0..n).map(|_| rng.normal() as f32).collect(), dims)
    };
    let x = randn(&mut rng, &[2, 3, 6, 6]);
    let w = randn(&mut rng, &[27, 4]);
    Gpu::sync().unwrap();
    let before = Gpu::host_waits();
    let w = Tensor::<(usize, usize), Gpu>::try_from_raw(w)
        .unwrap()
        .requires_grad();
    let win = Window2d {
        padding: [1, 1],
        stride: [2, 2],
        ..Window2d::square(3)
    };
    // conv → RMS norm over channels → dropout → unfold → sum: forward and backward.
    let cols = x.unfold2d(win, 0.0).reshape(&[2 * 3 * 3, 27]);
    let y = cols.matmul(w.raw()).normalize(1, false, 1e-5);
    let keep = RawTensor::<Gpu, f32>::uniform(y.dims(), 5).scalar(BinaryOp::Ge, 0.5);
    let y = y.binary(BinaryOp::Mul, &keep).reshape(&[2, 3, 3, 4]);
    let y = y.permute(&[0, 3, 1, 2]).unfold2d(Window2d::square(2), 0.0);
    let loss = Tensor::<(), Gpu>::try_from_raw(y.reduce_all(ReduceOp::Sum)).unwrap();
    let g = loss.backward().get(&w).unwrap();
    assert_eq!(
        Gpu::host_waits(),
        before,
        "a step with the window, norm and uniform kernels synchronised"
    );
    let _ = g.to_vec();
    assert_eq!(Gpu::host_waits(), before + 1);
}

/// The class losses of the typed API on a raw input: `(B, C)` logits (a `(C, B)`
/// input transposed, so the rows are strided) against fixed class targets.
enum Classes {
    Nll,
    Smoothed(f64),
}

impl Case for Classes {
    fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
        use volta::nn::loss::{cross_entropy_smoothed, nll};
        let logits = x[0].permute(&[1, 0]);
        let (b, c) = (logits.dims()[0], logits.dims()[1]);
        // Large logits too: a scale of 30 saturates the softmax rows.
        let logits =
            Tensor::<(usize, usize), D>::try_from_raw(logits.scalar(BinaryOp::Mul, 30.0)).unwrap();
        let t: Vec<u32> = (0..b).map(|i| ((i * 7 + 3) % c) as u32).collect();
        let t = Tensor::<(usize,), D, u32>::try_from_raw(RawTensor::from_vec(t, &[b])).unwrap();
        let loss = match self {
            Classes::Nll => nll(&logits.log_softmax::<Axis<1>>(), &t),
            Classes::Smoothed(eps) => cross_entropy_smoothed(&logits, &t, *eps),
        };
        loss.raw().clone()
    }
}

/// The elementwise losses between two same-shape inputs.
enum Pairwise {
    /// Targets `σ(x[1])`: soft, in (0, 1), differentiable.
    Bce,
    L1,
    Huber(f64),
}

impl Case for Pairwise {
    fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
        use volta::nn::loss::{binary_cross_entropy_with_logits, huber, l1};
        // A permuted view of a rank-3 input against a contiguous one.
        let a = Tensor::<(usize, usize, usize), D>::try_from_raw(
            x[0].permute(&[2, 0, 1]).scalar(BinaryOp::Mul, 3.0),
        )
        .unwrap();
        let b = Tensor::<(usize, usize, usize), D>::try_from_raw(x[1].clone()).unwrap();
        let loss = match self {
            Pairwise::Bce => binary_cross_entropy_with_logits(&a, &b.sigmoid()),
            Pairwise::L1 => l1(&a, &b),
            Pairwise::Huber(delta) => huber(&a, &b, *delta),
        };
        loss.raw().clone()
    }
}

#[test]
fn losses_forward_and_input_gradients() {
    let _g = lock();
    for seed in SEEDS {
        let mut rng = Rng::seed(seed * 1300);
        let d = dims(&mut rng, 2, 9);
        let input = [(d, Dist::Normal)];
        check("nll", seed, &input, Classes::Nll);
        for eps in [0.0, 0.1, 1.0] {
            check(
                &format!("smoothed {eps}"),
                seed,
                &input,
                Classes::Smoothed(eps),
            );
        }
        let d = dims(&mut rng, 3, 5);
        let pair = [
            (d.clone(), Dist::Normal),
            (vec![d[2], d[0], d[1]], Dist::Normal),
        ];
        check("bce with logits", seed, &pair, Pairwise::Bce);
        check("l1", seed, &pair, Pairwise::L1);
        for delta in [0.5, 2.0] {
            check(
                &format!("huber {delta}"),
                seed,
                &pair,
                Pairwise::Huber(delta),
            );
        }
    }
}

#[test]
fn metrics_read_gpu_tensors() {
    use volta::nn::metrics::{ConfusionMatrix, accuracy};
    let _g = lock();
    let mut rng = Rng::seed(14);
    let mut cpu = ConfusionMatrix::new(5);
    let mut gpu = ConfusionMatrix::new(5);
    for b in [7, 3] {
        let logits = Tensor::<(usize, Const<5>)>::randn_shaped((b, Const), &mut rng);
        let t: Vec<u32> = (0..b).map(|_| rng.below(5) as u32).collect();
        let t = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(t, (b,)).unwrap();
        // A pending GPU computation: the read-back runs it.
        let (lg, tg) = (logits.to::<Gpu>().mul_scalar(2.0), t.to::<Gpu>());
        assert_eq!(accuracy(&logits, &t), accuracy(&lg, &tg));
        cpu.update(&logits, &t);
        gpu.update(&lg, &tg);
    }
    assert_eq!(cpu, gpu);
    assert_eq!(gpu.total(), 10);
}

/// Rotary embeddings over `[.., T, d]` at a cache offset.
struct Rope(usize);

impl Case for Rope {
    fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
        x[0].rope(self.0, 10_000.0)
    }
}

#[test]
fn rope_forward_and_gradient() {
    let _g = lock();
    for seed in SEEDS {
        let mut rng = Rng::seed(seed * 1500);
        let mut d = dims(&mut rng, 3, 7);
        d[2] *= 2;
        check("rope", seed, &[(d, Dist::Normal)], Rope(seed as usize * 5));
    }
}

/// Causal grouped-query attention at a cache offset.
struct Attention(usize);

impl Case for Attention {
    fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
        x[0].causal_attention(&x[1], &x[2], self.0)
    }
}

#[test]
fn causal_attention_forward_and_gradients() {
    let _g = lock();
    for seed in SEEDS {
        let mut rng = Rng::seed(seed * 1600);
        let d = dims(&mut rng, 4, 6);
        let (b, hkv, t, hd) = (d[0], d[1], d[2], d[3]);
        let (group, start) = (1 + seed as usize % 3, seed as usize % 4);
        let q = vec![b, hkv * group, t, hd];
        let kv = vec![b, hkv, start + t, hd];
        let inputs = [
            (q, Dist::Normal),
            (kv.clone(), Dist::Normal),
            (kv, Dist::Normal),
        ];
        check("causal attention", seed, &inputs, Attention(start));
    }
}

/// Rows of every shape a row kernel walks differently, `(dims, axis)`: short
/// rows per subgroup, rows in registers, long rows, rows shorter than a tree,
/// rows over an inner axis.
const ROW_WALKS: [(&[usize], usize); 5] = [
    (&[64, 48], 1),
    (&[9, 1000], 1),
    (&[3, 5000], 1),
    (&[40, 7], 1),
    (&[6, 50, 4], 1),
];

/// A GPU tensor of standard normal values drawn from `rng`.
fn normal_gpu(rng: &mut Rng, dims: &[usize]) -> RawTensor<Gpu, f32> {
    let v = (0..dims.iter().product())
        .map(|_| rng.normal() as f32)
        .collect();
    RawTensor::from_vec(v, dims)
}

/// A norm's rows that something else holds (the backward pass, for the scale's
/// gradient) and their affine `n·w + b` come from one kernel that writes both,
/// in every way a row kernel walks its rows (short rows per subgroup, rows in
/// registers, long rows, rows shorter than a tree, rows over an inner axis);
/// values and gradients match the CPU's with fusion on and off.
#[test]
fn held_norm_rows_are_written_with_their_affine() {
    let _g = lock();
    struct Affine(usize);
    impl Case for Affine {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let axis = self.0;
            let dims = x[0].dims().to_vec();
            let mut along = vec![1; dims.len()];
            along[axis] = dims[axis];
            let w = x[1].reshape(&along).expand(&dims);
            let b = x[2].reshape(&along).expand(&dims);
            let n = x[0].normalize(axis, true, 1e-5);
            n.binary(BinaryOp::Mul, &w).binary(BinaryOp::Add, &b)
        }
    }
    let normal = Dist::Normal;
    for (seed, &(dims, axis)) in ROW_WALKS.iter().enumerate() {
        let c = dims[axis];
        let inputs = [
            (dims.to_vec(), normal),
            (vec![c], normal),
            (vec![c], normal),
        ];
        check(
            "held norm rows and their affine",
            40 + seed as u64,
            &inputs,
            Affine(axis),
        );
        // One kernel writes the affine and the rows, which stay readable.
        let mut rng = Rng::seed(seed as u64);
        let x = normal_gpu(&mut rng, dims);
        let (w, b) = (normal_gpu(&mut rng, &[c]), normal_gpu(&mut rng, &[c]));
        let mut along = vec![1; dims.len()];
        along[axis] = c;
        let n = x.normalize(axis, true, 1e-5);
        let y = n
            .binary(BinaryOp::Mul, &w.reshape(&along).expand(dims))
            .binary(BinaryOp::Add, &b.reshape(&along).expand(dims));
        let before = Gpu::dispatches_recorded();
        y.buffer().realize();
        n.buffer().realize();
        assert_eq!(Gpu::dispatches_recorded() - before, 1, "{dims:?}");
        let cpu = |g: &RawTensor<Gpu, f32>| RawTensor::<Cpu, f32>::from_vec(g.to_vec(), g.dims());
        let cn = cpu(&x).normalize(axis, true, 1e-5);
        close("rows", &cn.to_vec(), &n.to_vec());
        let cy = cn
            .binary(BinaryOp::Mul, &cpu(&w).reshape(&along).expand(dims))
            .binary(BinaryOp::Add, &cpu(&b).reshape(&along).expand(dims));
        close("affine", &cy.to_vec(), &y.to_vec());
    }
}

/// A norm of a pending sum that something else holds (the residual stream,
/// which the next residual sum reads again) writes that sum as it loads it: one
/// kernel for both, in every way a row kernel walks its rows; values and
/// gradients match the CPU's with fusion on and off.
#[test]
fn a_norm_writes_the_held_sum_it_reads() {
    let _g = lock();
    struct Residual(usize);
    impl Case for Residual {
        fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
            let stream = x[0].binary(BinaryOp::Add, &x[1].scalar(BinaryOp::Mul, 0.5));
            let n = stream.normalize(self.0, true, 1e-5);
            // The stream is read again after the norm, as the next residual sum does.
            n.binary(BinaryOp::Mul, &x[1])
                .binary(BinaryOp::Add, &stream)
        }
    }
    let normal = Dist::Normal;
    for (seed, &(dims, axis)) in ROW_WALKS.iter().enumerate() {
        let inputs = [(dims.to_vec(), normal), (dims.to_vec(), normal)];
        check(
            "a norm of a held sum",
            50 + seed as u64,
            &inputs,
            Residual(axis),
        );
        let mut rng = Rng::seed(seed as u64);
        let (a, b) = (normal_gpu(&mut rng, dims), normal_gpu(&mut rng, dims));
        let stream = a.binary(BinaryOp::Add, &b);
        let n = stream.normalize(axis, true, 1e-5);
        let before = Gpu::dispatches_recorded();
        n.buffer().realize();
        stream.buffer().realize();
        assert_eq!(Gpu::dispatches_recorded() - before, 1, "{dims:?}");
        let cpu = |g: &RawTensor<Gpu, f32>| RawTensor::<Cpu, f32>::from_vec(g.to_vec(), g.dims());
        let cs = cpu(&a).binary(BinaryOp::Add, &cpu(&b));
        close("stream", &cs.to_vec(), &stream.to_vec());
        close(
            "rows",
            &cs.normalize(axis, true, 1e-5).to_vec(),
            &n.to_vec(),
        );
        // With the rows held and their affine read too (a transformer's norm):
        // still one kernel, writing all three.
        let stream = a.binary(BinaryOp::Add, &b);
        let n = stream.normalize(axis, true, 1e-5);
        let y = n.binary(BinaryOp::Mul, &b).binary(BinaryOp::Add, &a);
        let before = Gpu::dispatches_recorded();
        y.buffer().realize();
        n.buffer().realize();
        stream.buffer().realize();
        let with_affine = Gpu::dispatches_recorded() - before;
        assert_eq!(with_affine, 1, "{dims:?}, with the affine");
        let cn = cs.normalize(axis, true, 1e-5);
        let cy = cn
            .binary(BinaryOp::Mul, &cpu(&b))
            .binary(BinaryOp::Add, &cpu(&a));
        close("stream", &cs.to_vec(), &stream.to_vec());
        close("rows", &cn.to_vec(), &n.to_vec());
        close("affine", &cy.to_vec(), &y.to_vec());
    }
}
