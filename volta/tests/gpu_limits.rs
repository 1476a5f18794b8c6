//! The adapter's limits, passed as a user would pass them, on lavapipe:
//!
//! - Tensors larger than one binding (lavapipe binds at most 128 MiB of a buffer to
//!   a kernel; NVIDIA 2 GiB): ops work in slices, each binding a window of every
//!   operand, and match the CPU — elementwise chains and copies, reductions (full
//!   ones too), softmax, matmul, gather, scatter-add, convolution windows and the
//!   optimiser steps. Each tensor here is just over 128 MiB.
//! - Work that needs more workgroups than one grid dimension allows (65,535 on
//!   every adapter): the launch spreads them over a second dimension. Each case
//!   crosses the limit: 70,000 rows of a row kernel, 17M elements of an elementwise
//!   kernel (65,536 workgroups of 256), 70,000 gathered rows, a matmul 70,000 rows
//!   tall.
#![cfg(feature = "gpu")]

use volta::prelude::*;
use volta::{RawTensor, Rng};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

/// Elements of a 1-D tensor just over 128 MiB of f32.
const N: usize = (128 << 18) + 4096 * 4;

fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919) % 1013) as f32 / 1013.0 - 0.5)
        .collect()
}

/// Checks every `step`-th element and the last one.
fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let step = (got.len() / 100_003).max(1);
    let idx = (0..got.len()).step_by(step).chain([got.len() - 1]);
    for i in idx {
        let (g, w) = (got[i], want[i]);
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

fn both(data: Vec<f32>, dims: &[usize]) -> (RawTensor<Cpu, f32>, RawTensor<Gpu, f32>) {
    (
        RawTensor::from_vec(data.clone(), dims),
        RawTensor::from_vec(data, dims),
    )
}

/// `exp(x)·x`: a fused elementwise chain.
fn f<D: volta::Backend<f32>>(x: &RawTensor<D, f32>) -> RawTensor<D, f32> {
    x.unary(UnaryOp::Exp).binary(BinaryOp::Mul, x)
}

fn limit() -> u64 {
    Gpu::init()
        .expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)")
        .max_storage_buffer_binding_size
}

#[test]
fn elementwise_and_copies_past_the_binding_limit() {
    let _one = crate::support::gpu_alone();
    let limit = limit();
    let (c, g) = both(values(N), &[N]);
    assert!(
        (N * 4) as u64 > limit.min(1 << 27),
        "the tensor must pass lavapipe's limit"
    );
    close(&f(&g).to_vec(), &f(&c).to_vec(), 1e-6, "exp(x)·x");
    let (c2, g2) = (c.binary(BinaryOp::Add, &c), g.binary(BinaryOp::Add, &g));
    close(&g2.to_vec(), &c2.to_vec(), 0.0, "x + x");

    // A transposed copy: no single axis slices it (rows of the result read columns).
    let side = 5_800;
    let (c, g) = both(values(side * side), &[side, side]);
    let (ct, gt) = (
        c.transpose_last().contiguous(),
        g.transpose_last().contiguous(),
    );
    close(&gt.to_vec(), &ct.to_vec(), 0.0, "transposed copy");
    // A slice of the big tensor, read back.
    close(
        &g.narrow(0, side - 3, 3).to_vec(),
        &c.narrow(0, side - 3, 3).to_vec(),
        0.0,
        "narrow",
    );
}

#[test]
fn reductions_and_softmax_past_the_binding_limit() {
    let _one = crate::support::gpu_alone();
    limit();
    let (rows, cols) = (N / 4096, 4096);
    let (c, g) = both(values(rows * cols), &[rows, cols]);
    let (cs, gs) = (c.reduce(ReduceOp::Sum, 1), g.reduce(ReduceOp::Sum, 1));
    close(&gs.to_vec(), &cs.to_vec(), 1e-4, "row sums");
    // Along the long axis each output reads more than one binding holds: the
    // halves are reduced, then combined.
    let (cm, gm) = (c.reduce(ReduceOp::Max, 0), g.reduce(ReduceOp::Max, 0));
    close(&gm.to_vec(), &cm.to_vec(), 0.0, "column max");
    close(
        &g.softmax(1).to_vec(),
        &c.softmax(1).to_vec(),
        1e-5,
        "softmax rows",
    );
    let (c3, g3) = (
        c.reshape(&[4, rows / 4, cols]),
        g.reshape(&[4, rows / 4, cols]),
    );
    close(
        &g3.reduce(ReduceOp::Min, 2).to_vec(),
        &c3.reduce(ReduceOp::Min, 2).to_vec(),
        0.0,
        "row min of a 3-d view",
    );
}

#[test]
fn matmul_and_gather_past_the_binding_limit() {
    let _one = crate::support::gpu_alone();
    limit();
    let (rows, cols) = (N / 4096, 4096);
    let (c, g) = both(values(rows * cols), &[rows, cols]);
    // Rows of a tall operand, a small right-hand side.
    let (cb, gb) = both(values(cols * 3), &[cols, 3]);
    close(
        &g.matmul(&gb).to_vec(),
        &c.matmul(&cb).to_vec(),
        1e-4,
        "tall × small",
    );
    // The large operand on the right, transposed: columns of the result.
    let (ca, ga) = both(values(2 * cols), &[2, cols]);
    let (ct, gt) = (c.transpose_last(), g.transpose_last());
    close(
        &ga.matmul(&gt).to_vec(),
        &ca.matmul(&ct).to_vec(),
        1e-4,
        "small × wide",
    );

    // An embedding table larger than one binding: rows gathered by id.
    let ids: Vec<u32> = (0..300u32).map(|i| (i * 7919) % rows as u32).collect();
    let (ci, gi) = (
        RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[300]),
        RawTensor::<Gpu, u32>::from_vec(ids, &[300]),
    );
    close(
        &g.index_select(&gi).to_vec(),
        &c.index_select(&ci).to_vec(),
        0.0,
        "index_select",
    );
    // An id past the table is still reported.
    let bad = RawTensor::<Gpu, u32>::from_vec(vec![rows as u32], &[1]);
    assert!(matches!(
        g.index_select(&bad).try_to_vec(),
        Err(volta::backend::gpu::GpuError::IndexOutOfRange)
    ));
}

#[test]
fn full_reductions_past_the_binding_limit() {
    let _one = crate::support::gpu_alone();
    limit();
    let (rows, cols) = (N / 4096, 4096);
    let (c, g) = both(values(rows * cols), &[rows, cols]);
    // A fused chain reduced to one value: the single row is longer than a
    // binding, so it is reduced in chunks that fit, then the chunks combined.
    let chain = |x: &RawTensor<Gpu, f32>| {
        x.unary(UnaryOp::Relu)
            .scalar(BinaryOp::Mul, 2.0)
            .reduce_all(ReduceOp::Sum)
    };
    let want: f64 = c
        .to_vec()
        .iter()
        .map(|&v| 2.0 * f64::from(v.max(0.0)))
        .sum();
    let got = chain(&g).to_vec()[0];
    assert!(
        (f64::from(got) - want).abs() <= 1e-4 * want.abs(),
        "sum_all {got} vs {want}"
    );
    let mean = g.reduce_all(ReduceOp::Sum).to_vec()[0] / (rows * cols) as f32;
    let want_mean = c.to_vec().iter().map(|&v| f64::from(v)).sum::<f64>() / (rows * cols) as f64;
    assert!(
        (f64::from(mean) - want_mean).abs() < 1e-5,
        "mean {mean} vs {want_mean}"
    );
    for op in [ReduceOp::Max, ReduceOp::Min] {
        let (gv, cv) = (g.reduce_all(op).to_vec(), c.reduce_all(op).to_vec());
        assert_eq!(gv, cv, "{op:?} of every element");
    }
}

#[test]
fn windows_scatter_and_optimiser_steps_past_the_binding_limit() {
    let _one = crate::support::gpu_alone();
    let limit = limit() as usize;
    // im2col of a batch whose columns pass the limit, and its adjoint reading them.
    let batch = limit / (64 * 64 * 9 * 4) + 1;
    let (c, g) = both(values(batch * 64 * 64), &[batch, 1, 64, 64]);
    let win = volta::Window2d {
        padding: [1, 1],
        ..volta::Window2d::square(3)
    };
    let (cc, gc) = (c.unfold2d(win, 0.0), g.unfold2d(win, 0.0));
    assert!(
        gc.layout().numel() * 4 > limit,
        "the columns must pass the limit"
    );
    close(&gc.to_vec(), &cc.to_vec(), 0.0, "unfold2d");
    close(
        &gc.fold2d(win, [64, 64]).to_vec(),
        &cc.fold2d(win, [64, 64]).to_vec(),
        1e-6,
        "fold2d",
    );

    // Scatter-add into a result larger than one binding.
    let rows = limit / 4 / 64 + 1;
    let ids: Vec<u32> = (0..8 * 64).map(|i| ((i * 7919) % rows) as u32).collect();
    let src = values(8 * 64);
    let cs = RawTensor::<Cpu, f32>::from_vec(src.clone(), &[8, 64]);
    let gs = RawTensor::<Gpu, f32>::from_vec(src, &[8, 64]);
    let ci = RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[8, 64]);
    let gi = RawTensor::<Gpu, u32>::from_vec(ids, &[8, 64]);
    close(
        &gs.scatter_add(&[rows, 64], 0, &gi).to_vec(),
        &cs.scatter_add(&[rows, 64], 0, &ci).to_vec(),
        0.0,
        "scatter_add",
    );

    // Optimiser steps over a parameter larger than one binding, read at an offset.
    use volta::backend::Layout;
    use volta::optim::{AdamStep, SgdStep};
    fn steps<D: volta::Backend<f32>>(n: usize) -> Vec<Vec<f32>> {
        let p = RawTensor::<D, f32>::from_vec(values(n + 3), &[n + 3]).narrow(0, 3, n);
        let g = RawTensor::<D, f32>::from_vec(values(n), &[n]).scalar(BinaryOp::Mul, 0.5);
        let hyper = AdamStep::at_step(0.01, (0.9, 0.999), 1e-8, 0.05, true, 2);
        let v = g.binary(BinaryOp::Mul, &g);
        let (p2, m2, v2) = D::adam_step(p.view(), g.view(), Some((g.view(), v.view())), &hyper);
        let sgd = SgdStep {
            lr: 0.01,
            momentum: 0.9,
            weight_decay: 0.01,
            nesterov: true,
        };
        let (s2, b2) = D::sgd_step(p.view(), g.view(), None, &sgd);
        let flat = Layout::contiguous(&[n]);
        [p2, m2, v2, s2, b2.expect("momentum")]
            .iter()
            .map(|b| D::to_vec(b, &flat))
            .collect()
    }
    let (cpu, gpu) = (steps::<Cpu>(N), steps::<Gpu>(N));
    for (i, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
        close(g, c, 1e-5, &format!("optimiser output {i}"));
    }
}

#[test]
fn an_op_that_cannot_slice_says_so_when_recorded() {
    let _one = crate::support::gpu_alone();
    let limit = limit();
    // Softmax over one row longer than a binding: each output needs the whole
    // row at once, so no slicing helps.
    let (_, g) = both(values(N), &[N]);
    match g.softmax(0).try_to_vec() {
        Err(volta::backend::gpu::GpuError::TooLarge {
            op,
            bytes,
            limit: l,
        }) => {
            assert!(op.contains("row"), "{op}");
            assert!(bytes > l && l == limit, "{bytes} {l}");
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|v| v.len())),
    }
    // The next op runs as usual.
    let src = RawTensor::<Gpu, f32>::from_vec(vec![1.0; 64], &[1, 64]);
    assert_eq!(src.to_vec().len(), 64);
}

// Grid limits.

const ROWS: usize = 70_000;

fn close_all(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

fn random(dims: &[usize], rng: &mut Rng) -> (RawTensor<Cpu, f32>, RawTensor<Gpu, f32>) {
    let n: usize = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.uniform() as f32 - 0.5).collect();
    (
        RawTensor::from_vec(data.clone(), dims),
        RawTensor::from_vec(data, dims),
    )
}

#[test]
fn launches_past_65535_workgroups_match_the_cpu() {
    let _one = crate::support::gpu_alone();
    Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    let mut rng = Rng::seed(3);

    let (c, g) = random(&[ROWS, 4], &mut rng);
    close_all(
        &g.softmax(1).to_vec(),
        &c.softmax(1).to_vec(),
        1e-5,
        "softmax rows",
    );
    let (cs, gs) = (c.reduce(ReduceOp::Sum, 1), g.reduce(ReduceOp::Sum, 1));
    close_all(&gs.to_vec(), &cs.to_vec(), 1e-5, "row sums");
    let (cm, gm) = (c.reduce(ReduceOp::Max, 0), g.reduce(ReduceOp::Max, 0));
    close_all(
        &gm.to_vec(),
        &cm.to_vec(),
        0.0,
        "column max over 70,000 rows",
    );

    let n = 65_536 * 256 + 3;
    let (c, g) = random(&[n], &mut rng);
    let (c2, g2) = (c.unary(UnaryOp::Exp), g.unary(UnaryOp::Exp));
    close_all(&g2.to_vec(), &c2.to_vec(), 1e-6, "exp over 16.8M elements");

    let (table, gtable) = random(&[16, 8], &mut rng);
    let ids: Vec<u32> = (0..ROWS as u32).map(|i| (i * 7) % 16).collect();
    let (ci, gi) = (
        RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[ROWS]),
        RawTensor::<Gpu, u32>::from_vec(ids, &[ROWS]),
    );
    close_all(
        &gtable.index_select(&gi).to_vec(),
        &table.index_select(&ci).to_vec(),
        0.0,
        "index_select of 70,000 rows",
    );

    let (a, ga) = random(&[ROWS, 8], &mut rng);
    let (b, gb) = random(&[8, 3], &mut rng);
    close_all(
        &ga.matmul(&gb).to_vec(),
        &a.matmul(&b).to_vec(),
        1e-5,
        "tall matmul",
    );
}
