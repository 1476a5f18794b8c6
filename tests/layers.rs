//! Every layer, in f64 on the CPU: values and gradients against PyTorch (committed
//! numbers from `reference/layers.py`), and gradients against finite differences.
mod common;
#[path = "reference/layers.rs"]
mod reference;

use common::*;
use reference::*;
use volta::nn::Module;
use volta::prelude::*;

/// Element i is sin(0.37·i + seed), as in `reference/layers.py`.
fn input<S: ConstShape>(seed: f64) -> T<S> {
    let v = (0..S::NUMEL)
        .map(|i| (0.37 * i as f64 + seed).sin())
        .collect();
    T::from_vec(v).unwrap()
}

/// The loss the reference differentiates: Σ out·w with w_i = cos(0.23·i).
fn loss<S: ConstShape + SameShape<S>>(out: &T<S>) -> T<()> {
    let w: Vec<f64> = (0..S::NUMEL).map(|i| (0.23 * i as f64).cos()).collect();
    out.mul(&T::<S>::from_vec(w).unwrap()).sum_all()
}

#[track_caller]
fn same(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-9 + 1e-9 * w.abs(),
            "{what}[{i}]: {g} vs PyTorch {w}"
        );
    }
}

fn grad<S: Shape>(grads: &Gradients<Cpu, f64>, t: &T<S>) -> Vec<f64> {
    grads.get(t).expect("tracked and used").to_vec()
}

#[test]
fn conv2d_matches_pytorch() {
    let x = input::<Rank4<2, 4, 7, 6>>(0.1).requires_grad();
    let w: T<Rank4<6, 2, 3, 3>> = input(0.7);
    let w = w
        .reshape_to((Const, 2, Const, Const))
        .unwrap()
        .requires_grad();
    let b = input::<Rank1<6>>(1.3).requires_grad();
    let opts = Conv2dOptions::default()
        .stride(2)
        .padding(1)
        .dilation(2)
        .groups(2);
    let conv = Conv2d::<4, 6, 3, 3, Cpu, f64>::from_tensors(w.clone(), Some(b.clone()), opts);
    let out: T<Rank4<2, 6, 3, 2>> = conv.forward(&x);
    same("conv out", &out.to_vec(), &CONV_OUT);
    let g = loss(&out).backward();
    same("conv dx", &grad(&g, &x), &CONV_GRAD_X);
    same("conv dw", &grad(&g, &w), &CONV_GRAD_W);
    same("conv db", &grad(&g, &b), &CONV_GRAD_B);
}

#[test]
fn pools_match_pytorch() {
    let x = input::<Rank4<2, 3, 7, 6>>(0.2).requires_grad();
    let out: T<Rank4<2, 3, 4, 3>> = MaxPool2d::new(3).stride(2).padding(1).forward(&x);
    same("maxpool out", &out.to_vec(), &MAXPOOL_OUT);
    same(
        "maxpool dx",
        &grad(&loss(&out).backward(), &x),
        &MAXPOOL_GRAD_X,
    );

    let x = input::<Rank4<2, 3, 6, 5>>(0.3).requires_grad();
    let out: T<Rank4<2, 3, 4, 3>> = AvgPool2d::new(2).padding(1).forward(&x);
    same("avgpool out", &out.to_vec(), &AVGPOOL_OUT);
    same(
        "avgpool dx",
        &grad(&loss(&out).backward(), &x),
        &AVGPOOL_GRAD_X,
    );
}

#[test]
fn batch_norm_matches_pytorch_in_both_modes() {
    let x = input::<Rank4<4, 3, 2, 5>>(0.4).requires_grad();
    let mut bn = BatchNorm2d::<3, Cpu, f64>::new();
    bn.weight = input::<Rank1<3>>(0.5).requires_grad();
    bn.bias = input::<Rank1<3>>(0.6).requires_grad();
    let out = bn.forward(&x);
    same("batchnorm out", &out.to_vec(), &BATCHNORM_OUT);
    let g = loss(&out).backward();
    same("batchnorm dx", &grad(&g, &x), &BATCHNORM_GRAD_X);
    same("batchnorm dw", &grad(&g, &bn.weight), &BATCHNORM_GRAD_W);
    same("batchnorm db", &grad(&g, &bn.bias), &BATCHNORM_GRAD_B);
    same(
        "running mean",
        &bn.running_mean().to_vec(),
        &BATCHNORM_RUNNING_MEAN,
    );
    same(
        "running var",
        &bn.running_var().to_vec(),
        &BATCHNORM_RUNNING_VAR,
    );
    bn.eval();
    same(
        "batchnorm eval",
        &bn.forward(&x).to_vec(),
        &BATCHNORM_EVAL_OUT,
    );
    let names: Vec<String> = bn.named_tensors().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "bias", "running_mean", "running_var"]);
}

#[test]
fn layer_and_rms_norm_match_pytorch() {
    let x = input::<Rank3<3, 4, 5>>(0.8).requires_grad();
    let mut ln = LayerNorm::<5, Cpu, f64>::new();
    ln.weight = input::<Rank1<5>>(0.9).requires_grad();
    ln.bias = Some(input::<Rank1<5>>(1.0).requires_grad());
    let out = ln.forward(&x);
    same("layernorm out", &out.to_vec(), &LAYERNORM_OUT);
    let g = loss(&out).backward();
    same("layernorm dx", &grad(&g, &x), &LAYERNORM_GRAD_X);
    same("layernorm dw", &grad(&g, &ln.weight), &LAYERNORM_GRAD_W);
    same(
        "layernorm db",
        &grad(&g, ln.bias.as_ref().unwrap()),
        &LAYERNORM_GRAD_B,
    );

    let x = input::<Rank2<4, 6>>(1.1).requires_grad();
    let mut rms = RmsNorm::<6, Cpu, f64>::new();
    rms.weight = input::<Rank1<6>>(1.2).requires_grad();
    let out = rms.forward(&x);
    same("rmsnorm out", &out.to_vec(), &RMSNORM_OUT);
    let g = loss(&out).backward();
    same("rmsnorm dx", &grad(&g, &x), &RMSNORM_GRAD_X);
    same("rmsnorm dw", &grad(&g, &rms.weight), &RMSNORM_GRAD_W);
}

#[test]
fn linear_matches_pytorch() {
    let x = input::<Rank2<4, 5>>(1.4).requires_grad();
    // Both store the weight as (out, in).
    let w = input::<Rank2<3, 5>>(1.5).requires_grad();
    let b = input::<Rank1<3>>(1.6).requires_grad();
    let lin = Linear::<5, 3, Cpu, f64>::from_tensors(w.clone(), b.clone());
    let out = lin.forward(&x);
    same("linear out", &out.to_vec(), &LINEAR_OUT);
    let g = loss(&out).backward();
    same("linear dx", &grad(&g, &x), &LINEAR_GRAD_X);
    same("linear dw", &grad(&g, &w), &LINEAR_GRAD_W);
    same("linear db", &grad(&g, &b), &LINEAR_GRAD_B);
}

// ------------------------------------------------ finite differences, random values

#[test]
fn conv2d_gradients() {
    let mut rng = Rng::seed(1);
    for (opts, groups) in [
        (Conv2dOptions::default(), 1),
        (Conv2dOptions::default().stride(2).padding(1), 1),
        (Conv2dOptions::default().dilation(2).padding(2).groups(2), 2),
    ] {
        let x = randn(&mut rng, (Const::<2>, Const::<4>, Const::<5>, Const::<5>));
        let w = randn(&mut rng, (Const::<4>, 4 / groups, Const::<3>, Const::<3>));
        let b = randn(&mut rng, (Const::<4>,));
        check_grad(&mut rng, (x, w, b), |(x, w, b)| {
            let conv =
                Conv2d::<4, 4, 3, 3, Cpu, f64>::from_tensors(w.clone(), Some(b.clone()), opts);
            let y: T<(Const<2>, Const<4>, usize, usize)> = conv.forward(x);
            y
        });
    }
}

#[test]
fn pool_gradients() {
    let mut rng = Rng::seed(2);
    let x = randn(&mut rng, (Const::<2>, Const::<3>, Const::<6>, Const::<6>));
    check_grad(&mut rng, x.clone(), |x| {
        let y: T<(Const<2>, Const<3>, usize, usize)> = MaxPool2d::new(2).forward(x);
        y
    });
    check_grad(&mut rng, x.clone(), |x| {
        let y: T<(Const<2>, Const<3>, usize, usize)> =
            AvgPool2d::new(3).stride(2).padding(1).forward(x);
        y
    });
    check_grad(&mut rng, x, |x| GlobalAvgPool2d.forward(x));
}

#[test]
fn norm_gradients() {
    let mut rng = Rng::seed(3);
    let x = randn(&mut rng, (Const::<3>, Const::<4>, Const::<5>));
    let (w, b) = (
        randn(&mut rng, (Const::<5>,)),
        randn(&mut rng, (Const::<5>,)),
    );
    check_grad(&mut rng, (x.clone(), w.clone(), b), |(x, w, b)| {
        let mut ln = LayerNorm::<5, Cpu, f64>::new();
        (ln.weight, ln.bias) = (w.clone(), Some(b.clone()));
        ln.forward(x)
    });
    check_grad(&mut rng, (x.clone(), w.clone()), |(x, w)| {
        let mut ln = LayerNorm::<5, Cpu, f64>::without_bias();
        ln.weight = w.clone();
        ln.forward(x)
    });
    check_grad(&mut rng, (x, w), |(x, w)| {
        let mut rms = RmsNorm::<5, Cpu, f64>::new();
        rms.weight = w.clone();
        rms.forward(x)
    });
    let x = randn(&mut rng, (Const::<3>, Const::<2>, Const::<2>, Const::<3>));
    let (w, b) = (
        randn(&mut rng, (Const::<2>,)),
        randn(&mut rng, (Const::<2>,)),
    );
    check_grad(&mut rng, (x, w, b), |(x, w, b)| {
        let mut bn = BatchNorm2d::<2, Cpu, f64>::new();
        (bn.weight, bn.bias) = (w.clone(), b.clone());
        bn.forward(x)
    });
}

#[test]
fn embedding_gradient_sums_the_rows_read() {
    let mut rng = Rng::seed(4);
    let table = randn(&mut rng, (Const::<5>, Const::<3>));
    let ids = Tensor::<Rank2<2, 3>, Cpu, u32>::from_array([[1, 4, 1], [0, 1, 2]]);
    check_grad(&mut rng, table.clone(), |t| {
        Embedding::<5, 3, Cpu, f64>::from_tensor(t.clone()).forward(&ids)
    });
    let emb = Embedding::<5, 3, Cpu, f64>::from_tensor(table.requires_grad());
    let g = emb.forward(&ids).sum_all().backward();
    let row_counts = [1.0, 3.0, 1.0, 0.0, 1.0];
    let want: Vec<f64> = row_counts.iter().flat_map(|&c| [c; 3]).collect();
    assert_eq!(grad(&g, &emb.weight), want);
}

#[test]
fn dropout_is_seeded_scaled_and_off_in_eval() {
    let x = T::<Rank1<4000>>::ones().requires_grad();
    let mut a = Dropout::new(0.25, &mut Rng::seed(7));
    let b = Dropout::new(0.25, &mut Rng::seed(7));
    let (ya, yb) = (a.forward(&x), b.forward(&x));
    assert_eq!(ya.to_vec(), yb.to_vec(), "same seed, same mask");
    let kept = ya.to_vec().iter().filter(|&&v| v != 0.0).count();
    assert!(
        (2800..3200).contains(&kept),
        "{kept} of 4000 kept at p = 0.25"
    );
    assert!(
        ya.to_vec()
            .iter()
            .all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-12)
    );
    assert_ne!(
        a.forward(&x).to_vec(),
        ya.to_vec(),
        "each call draws a new mask"
    );
    // The gradient is the mask.
    let g = ya.sum_all().backward();
    assert_eq!(grad(&g, &x), ya.to_vec());
    Module::<Cpu, f64>::eval(&mut a);
    assert_eq!(a.forward(&x).to_vec(), x.to_vec());
}

#[test]
fn flatten_and_activations() {
    let x = input::<Rank4<2, 3, 2, 2>>(0.5);
    let y: T<Rank2<2, 12>> = Flatten.forward(&x);
    assert_eq!(y.to_vec(), x.to_vec());
    let mut rng = Rng::seed(5);
    let x = away_from_zero(&mut rng, (3, 4), 0.1);
    check_grad(&mut rng, x.clone(), |x| Relu.forward(x));
    check_grad(&mut rng, x.clone(), |x| Gelu.forward(x));
    check_grad(&mut rng, x.clone(), |x| Silu.forward(x));
    check_grad(&mut rng, x.clone(), |x| Sigmoid.forward(x));
    check_grad(&mut rng, x, |x| Tanh.forward(x));
}
