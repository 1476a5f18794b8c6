//! The adapter's limits, passed as a user would pass them, on lavapipe:
//!
//! - Tensors larger than one binding (lavapipe binds at most 128 MiB of a buffer to
//!   a kernel; NVIDIA 2 GiB): ops work in slices, each binding a window of every
//!   operand, and match the CPU. Each tensor here is just over 128 MiB.
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

/// One test at a time: each holds ~1 GB of host memory (lavapipe), and the out-of-
/// range check must not meet another test's read-back.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn limit() -> u64 {
    Gpu::init()
        .expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)")
        .max_storage_buffer_binding_size
}

#[test]
fn elementwise_and_copies_past_the_binding_limit() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
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
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
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
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
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
fn an_op_that_cannot_slice_says_so_when_recorded() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let limit = limit();
    // Scatter-add into a result larger than one binding: its kernel cannot slice.
    let rows = (limit as usize / 4 / 64) + 1;
    let src = RawTensor::<Gpu, f32>::from_vec(vec![1.0; 64], &[1, 64]);
    let idx = RawTensor::<Gpu, u32>::from_vec(vec![3; 64], &[1, 64]);
    match src.scatter_add(&[rows, 64], 0, &idx).try_to_vec() {
        Err(volta::backend::gpu::GpuError::TooLarge {
            op,
            bytes,
            limit: l,
        }) => {
            assert!(op.contains("scatter"), "{op}");
            assert!(bytes > l && l == limit, "{bytes} {l}");
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|v| v.len())),
    }
    // The next op runs as usual.
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
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
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
