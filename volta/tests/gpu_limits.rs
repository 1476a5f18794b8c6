//! Tensors larger than one binding, passed as a user would pass them: ops work in
//! slices, each binding a window of every operand, and match the CPU —
//! elementwise chains and copies, drawn uniform numbers, reductions (full ones
//! too), softmax, matmul, gather, scatter-add, convolution windows and the
//! optimiser steps. The binary
//! `gpu_bindings` runs them with the binding size capped (`crate::limit`), so each
//! tensor here is just over that cap, as a tensor just over 128 MiB is on
//! lavapipe and over 2 GiB on NVIDIA.
#![cfg(feature = "gpu")]

use volta::RawTensor;
use volta::prelude::*;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

/// Elements of a 1-D tensor just over one binding of f32: whole rows of 4096 and
/// a row count divisible by 4.
fn n() -> usize {
    (crate::limit() as usize / 4).next_multiple_of(4 * 4096) + 4 * 4096
}

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

#[test]
fn elementwise_and_copies_past_the_binding_limit() {
    let _one = crate::alone();
    let (limit, n) = (crate::limit(), n());
    let (c, g) = both(values(n), &[n]);
    assert!((n * 4) as u64 > limit, "the tensor must pass the limit");
    close(&f(&g).to_vec(), &f(&c).to_vec(), 1e-6, "exp(x)·x");
    let (c2, g2) = (c.binary(BinaryOp::Add, &c), g.binary(BinaryOp::Add, &g));
    close(&g2.to_vec(), &c2.to_vec(), 0.0, "x + x");

    // A transposed copy: no single axis slices it (rows of the result read columns).
    let side = ((limit / 4) as f64).sqrt() as usize + 8;
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
fn drawn_numbers_past_the_binding_limit() {
    // Uniform numbers are drawn where kernels would load them: a dropout mask
    // over a tensor past the limit, in slices (each drawn at its own
    // addresses), and its row sums; the numbers are the CPU's bit for bit.
    let _one = crate::alone();
    let n = n();
    let (c, g) = both(values(n), &[n]);
    let seed = 1 << 33;
    fn masked<D: volta::Backend<f32>>(
        x: &RawTensor<D, f32>,
        u: RawTensor<D, f32>,
    ) -> RawTensor<D, f32> {
        x.binary(BinaryOp::Mul, &u.scalar(BinaryOp::Ge, 0.3))
    }
    let cm = masked(&c, RawTensor::<Cpu, f32>::uniform(&[n], seed));
    let gm = masked(&g, RawTensor::<Gpu, f32>::uniform(&[n], seed));
    close(&gm.to_vec(), &cm.to_vec(), 0.0, "x · (u ≥ 0.3)");
    let rows = [n / 4096, 4096];
    close(
        &gm.reshape(&rows).reduce(ReduceOp::Sum, 1).to_vec(),
        &cm.reshape(&rows).reduce(ReduceOp::Sum, 1).to_vec(),
        1e-4,
        "row sums of the masked rows",
    );
}

#[test]
fn reductions_and_softmax_past_the_binding_limit() {
    let _one = crate::alone();
    let (rows, cols) = (n() / 4096, 4096);
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
    let _one = crate::alone();
    let (rows, cols) = (n() / 4096, 4096);
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
    // A linear layer over the tall operand: its product in slices, then the
    // bias added to it.
    let (cbias, gbias) = both(values(3), &[1, 3]);
    close(
        &g.matmul_add(&gb, &gbias.expand(&[rows, 3])).to_vec(),
        &c.matmul_add(&cb, &cbias.expand(&[rows, 3])).to_vec(),
        1e-4,
        "tall × small + bias",
    );

    // An embedding table larger than one binding: rows gathered by id (fewer
    // than one binding of output holds).
    let n_ids = (crate::limit() as usize / (cols * 4) / 2).min(300);
    let ids: Vec<u32> = (0..n_ids as u32)
        .map(|i| (i * 7919) % rows as u32)
        .collect();
    let (ci, gi) = (
        RawTensor::<Cpu, u32>::from_vec(ids.clone(), &[n_ids]),
        RawTensor::<Gpu, u32>::from_vec(ids, &[n_ids]),
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
    let _one = crate::alone();
    let (rows, cols) = (n() / 4096, 4096);
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
    let _one = crate::alone();
    let limit = crate::limit() as usize;
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
    let (cpu, gpu) = (steps::<Cpu>(n()), steps::<Gpu>(n()));
    for (i, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
        close(g, c, 1e-5, &format!("optimiser output {i}"));
    }
}

#[test]
fn an_op_that_cannot_slice_says_so_when_recorded() {
    let _one = crate::alone();
    let (limit, n) = (crate::limit(), n());
    // Softmax over one row longer than a binding: each output needs the whole
    // row at once, so no slicing helps.
    let (_, g) = both(values(n), &[n]);
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
