//! `#[kernel]` on the GPU: values and derived gradients match the CPU (with fusion
//! on and off, on transposed inputs), user kernels fuse with the ops around them,
//! and new scalar values reuse the compiled pipeline.
#![cfg(feature = "gpu")]

use volta::kernel;
use volta::kernel::KernelBackend;
use volta::prelude::*;

/// x·σ(βx): one tensor and a scalar.
#[kernel]
fn swish(x: f32, #[scalar] beta: f32) -> f32 {
    x * sigmoid(beta * x)
}

/// Two tensors, a scalar, a `let` and methods.
#[kernel]
fn blend(a: f32, b: f32, #[scalar] t: f32) -> f32 {
    let mix = a * (1.0 - t) + b * t;
    mix.tanh() * b.exp()
}

/// Piecewise: an `if`/`else` becomes a select, forward and backward.
#[kernel]
fn leaky(x: f32, #[scalar] slope: f32) -> f32 {
    if x > 0.0 { x } else { slope * x }
}

/// Calls another kernel: its WGSL is emitted into the module and its partials
/// chain.
#[kernel]
fn swish_sq(x: f32) -> f32 {
    let s = swish(x, 1.5);
    s * s + std::f32::consts::PI
}

// Tests share the fusion switch (a process-wide setting).

fn lock() -> std::sync::RwLockWriteGuard<'static, ()> {
    let g = crate::support::gpu_alone();
    Gpu::set_fusion(true);
    g
}

type M = Rank2<4, 3>;

/// A computation over two 4×3 tensors, written once for both devices.
type Case<D> = dyn Fn(&Tensor<M, D>, &Tensor<M, D>) -> Tensor<M, D>;

/// Seeded values of `n` elements.
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng::seed(seed);
    (0..n).map(|_| rng.normal() as f32).collect()
}

/// Value of `f(aᵀ, b)` and the gradients of a weighted sum of it with respect to
/// `a` (stored 3×4, so `f` reads a transposed view) and `b`.
fn eval<D: KernelBackend>(f: &Case<D>) -> [Vec<f32>; 3] {
    let a = Tensor::<Rank2<3, 4>, D>::from_vec(values(1, 12))
        .unwrap()
        .requires_grad();
    let b = Tensor::<M, D>::from_vec(values(2, 12))
        .unwrap()
        .requires_grad();
    let w = Tensor::<M, D>::from_vec(values(3, 12)).unwrap();
    let y = f(&a.t(), &b);
    let grads = (&y * &w).sum_all().backward();
    let ga = grads.get(&a).map(|g| g.to_vec()).unwrap_or_default();
    let gb = grads.get(&b).map(|g| g.to_vec()).unwrap_or_default();
    [y.to_vec(), ga, gb]
}

fn close(what: &str, cpu: &[f32], gpu: &[f32]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths differ");
    for (i, (&c, &g)) in cpu.iter().zip(gpu).enumerate() {
        assert!(
            (c - g).abs() <= 1e-5 + 1e-4 * c.abs(),
            "{what}: element {i}: cpu {c} vs gpu {g}"
        );
    }
}

/// `$body` (over `$a`, a transposed view, and `$b`) on the CPU and on the GPU with
/// fusion on and off: values and gradients.
macro_rules! check {
    ($name:expr, |$a:ident, $b:ident| $body:expr) => {{
        let cpu = eval::<Cpu>(&|$a, $b| $body);
        assert!(!cpu[0].is_empty());
        for fusion in [true, false] {
            Gpu::set_fusion(fusion);
            let gpu = eval::<Gpu>(&|$a, $b| $body);
            for (what, (c, g)) in ["value", "grad a", "grad b"]
                .iter()
                .zip(cpu.iter().zip(&gpu))
            {
                close(&format!("{} {what} (fusion {fusion})", $name), c, g);
            }
        }
        Gpu::set_fusion(true);
    }};
}

#[test]
fn one_tensor_and_a_scalar() {
    let _g = lock();
    check!("swish", |a, _b| swish(a, 1.5));
    // Surrounded by built-in ops, which fuse with it.
    check!("swish in a chain", |a, b| swish(&(a * b), 0.7).exp() + b);
}

#[test]
fn two_tensors() {
    let _g = lock();
    check!("blend", |a, b| blend(a, b, 0.25));
    check!("blend of itself", |a, b| blend(&blend(a, b, 0.25), a, 0.6));
}

#[test]
fn if_else() {
    let _g = lock();
    check!("leaky", |a, _b| leaky(a, 0.1));
    check!("leaky of a sum", |a, b| leaky(&(a + b), 0.3));
}

#[test]
fn a_kernel_calling_another() {
    let _g = lock();
    check!("swish_sq", |a, _b| swish_sq(a));
    // Both kernels in one fused module: swish's WGSL must appear once.
    check!("swish_sq of swish", |a, _b| swish_sq(&swish(a, 0.5)));
}

#[test]
fn kernels_fuse_and_scalars_reuse_the_pipeline() {
    let _g = lock();
    let x = Tensor::<Rank1<1024>, Gpu>::from_vec(values(4, 1024)).unwrap();
    let y = Tensor::<Rank1<1024>, Gpu>::from_vec(values(5, 1024)).unwrap();
    let run = |beta: f32| {
        let before = Gpu::dispatches_recorded();
        let out = blend(&swish(&x, beta), &(&y * 2.0), 0.5).relu();
        out.raw().buffer().realize();
        (Gpu::dispatches_recorded() - before, out.to_vec())
    };
    let (dispatches, _) = run(1.0);
    assert_eq!(
        dispatches, 1,
        "swish, a scale, blend and relu fuse into one kernel"
    );
    let compiled = Gpu::pipelines_compiled();
    for beta in [1.5, 2.0, -0.5] {
        let (dispatches, gpu) = run(beta);
        assert_eq!(dispatches, 1);
        let (xc, yc) = (x.to::<Cpu>(), y.to::<Cpu>());
        let cpu = blend(&swish(&xc, beta), &(&yc * 2.0), 0.5).relu().to_vec();
        close(&format!("beta {beta}"), &cpu, &gpu);
    }
    assert_eq!(
        Gpu::pipelines_compiled(),
        compiled,
        "a new scalar value compiled a new pipeline"
    );
}
