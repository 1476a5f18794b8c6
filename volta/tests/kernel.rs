//! `#[kernel]` on the CPU: values match the Rust body, gradients derived by the macro
//! match finite differences, and the generated WGSL is exposed.
use volta::kernel;
use volta::prelude::*;

/// x·σ(βx)
#[kernel]
fn swish(x: f32, #[scalar] beta: f32) -> f32 {
    x * sigmoid(beta * x)
}

/// A smooth two-input kernel with a `let` and methods.
#[kernel]
fn blend(a: f32, b: f32, #[scalar] t: f32) -> f32 {
    let mix = a * (1.0 - t) + b * t;
    mix.tanh() * b.exp()
}

/// Piecewise: leaky ReLU with an `if`.
#[kernel]
fn leaky(x: f32, #[scalar] slope: f32) -> f32 {
    if x > 0.0 { x } else { slope * x }
}

/// Calls another kernel: chain rule through `swish`'s own partials.
#[kernel]
fn swish_sq(x: f32) -> f32 {
    let s = swish(x, 1.5);
    s * s + std::f32::consts::PI
}

/// Hand-written backward for a tensor argument.
#[kernel]
fn cube_dx(x: f32) -> f32 {
    3.0 * x * x
}
#[kernel(backward = [cube_dx])]
fn cube(x: f32) -> f32 {
    x * x * x
}

fn values(t: &Tensor<(usize,)>) -> Vec<f32> {
    t.to_vec()
}

/// Central differences of `f(x).sum()` against the autograd gradient, in f32.
fn check_grad(x: Vec<f32>, f: impl Fn(&Tensor<(usize,)>) -> Tensor<(usize,)>) {
    let n = x.len();
    let t = Tensor::<(usize,)>::from_vec_shaped(x.clone(), (n,))
        .unwrap()
        .requires_grad();
    let g = f(&t).sum_all().backward().get(&t).unwrap().to_vec();
    for i in 0..n {
        let h = 1e-2;
        let at = |d: f32| {
            let mut v = x.clone();
            v[i] += d;
            let t = Tensor::<(usize,)>::from_vec_shaped(v, (n,)).unwrap();
            f(&t).sum_all().item() as f64
        };
        let fd = (at(h) - at(-h)) / (2.0 * h as f64);
        assert!(
            (g[i] as f64 - fd).abs() < 2e-3 * (1.0 + fd.abs()),
            "element {i}: autograd {} vs numeric {fd}",
            g[i]
        );
    }
}

#[test]
fn swish_value_and_gradient() {
    let x = vec![-2.0, -0.5, 0.3, 1.7];
    let t = Tensor::<(usize,)>::from_vec_shaped(x.clone(), (4,)).unwrap();
    let y = values(&swish(&t, 1.5));
    for (xi, yi) in x.iter().zip(&y) {
        let expect = xi / (1.0 + (-1.5 * xi).exp());
        assert!((yi - expect).abs() < 1e-6);
    }
    check_grad(x, |t| swish(t, 1.5));
}

#[test]
fn multi_input_kernel_gradients() {
    let a = Tensor::<Rank2<2, 3>>::from_array([[0.1, -0.4, 0.9], [0.3, 0.2, -0.7]]).requires_grad();
    let b = Tensor::<Rank2<2, 3>>::from_array([[0.5, 0.6, -0.2], [-0.1, 0.4, 0.8]]).requires_grad();
    let y = blend(&a, &b, 0.25);
    let grads = y.sum_all().backward();
    let (ga, gb) = (
        grads.get(&a).unwrap().to_vec(),
        grads.get(&b).unwrap().to_vec(),
    );
    let (av, bv) = (a.to_vec(), b.to_vec());
    for i in 0..6 {
        let mix = av[i] * 0.75 + bv[i] * 0.25;
        let sech2 = 1.0 - mix.tanh().powi(2);
        let expect_a = sech2 * 0.75 * bv[i].exp();
        let expect_b = sech2 * 0.25 * bv[i].exp() + mix.tanh() * bv[i].exp();
        assert!((ga[i] - expect_a).abs() < 1e-5, "∂a at {i}");
        assert!((gb[i] - expect_b).abs() < 1e-5, "∂b at {i}");
    }
}

#[test]
fn if_else_routes_the_gradient() {
    let x = vec![-1.5, -0.2, 0.4, 2.0];
    let t = Tensor::<(usize,)>::from_vec_shaped(x, (4,))
        .unwrap()
        .requires_grad();
    let g = leaky(&t, 0.1)
        .sum_all()
        .backward()
        .get(&t)
        .unwrap()
        .to_vec();
    assert_eq!(g, vec![0.1, 0.1, 1.0, 1.0]);
}

#[test]
fn calling_another_kernel_chains_its_partials() {
    check_grad(vec![-1.2, 0.1, 0.8, 2.2], swish_sq);
    assert!(
        swish_sq::KERNEL.wgsl.contains("volta_k_swish("),
        "calls the callee's WGSL function"
    );
    assert!(
        swish_sq::KERNEL.wgsl_module().contains("fn volta_k_swish("),
        "the module includes the callee"
    );
}

#[test]
fn hand_written_backward_is_used() {
    let t = Tensor::<Rank1<3>>::from_array([1.0, -2.0, 0.5]).requires_grad();
    let g = cube(&t).sum_all().backward().get(&t).unwrap().to_vec();
    assert_eq!(g, vec![3.0, 12.0, 0.75]);
    assert!(cube::KERNEL.wgsl.contains("volta_k_cube_dx("));
}

#[test]
fn generated_wgsl_names_the_value_and_each_partial() {
    let w = swish::KERNEL.wgsl;
    assert!(
        w.contains("fn volta_k_swish(x: f32, beta: f32) -> f32"),
        "{w}"
    );
    assert!(w.contains("fn volta_k_swish_d0("), "{w}");
    assert!(w.contains("fn volta_k_swish_d1("), "{w}");
    // CSE: σ(βx) is computed once in ∂/∂x.
    let d0 = &w[w.find("fn volta_k_swish_d0").unwrap()..w.find("fn volta_k_swish_d1").unwrap()];
    assert_eq!(d0.matches("exp(").count(), 1, "{d0}");
}
