//! Work that needs more workgroups than one grid dimension allows (65,535 on
//! every adapter): the launch spreads them over a second dimension. Each case
//! crosses the limit: 70,000 rows of a row kernel, 17M elements of an elementwise
//! kernel (65,536 workgroups of 256), 70,000 gathered rows, a matmul 70,000 rows
//! tall.
#![cfg(feature = "gpu")]

use volta::prelude::*;
use volta::{RawTensor, Rng};
use volta_kernels::{ReduceOp, UnaryOp};

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
