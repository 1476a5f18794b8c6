//! Every layer on `Gpu` against `Cpu`: forward values and the gradients of the
//! input and of every parameter, the GPU layer being the CPU one moved with
//! `to::<Gpu>()`; and `model!` networks training on the GPU. Small shapes: CI runs
//! this on lavapipe.
#![cfg(feature = "gpu")]

use volta::backend::Backend;
use volta::nn::loss::cross_entropy;
use volta::nn::{Entry, Visitor};
use volta::prelude::*;

fn lock() -> std::sync::RwLockWriteGuard<'static, ()> {
    crate::support::gpu_alone()
}

#[track_caller]
fn close(what: &str, cpu: &[f32], gpu: &[f32]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths differ");
    for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        assert!(
            (c - g).abs() <= 1e-4 + 1e-4 * c.abs(),
            "{what}[{i}]: cpu {c} vs gpu {g}"
        );
    }
}

/// The gradient of every parameter of `m`, by name.
fn param_grads<D: Backend<f32>, M: Module<D, f32>>(
    m: &mut M,
    g: &Gradients<D>,
) -> Vec<(String, Vec<f32>)> {
    let mut out = Vec::new();
    m.visit(&mut Visitor::new(&mut |name, e| {
        if let Entry::Param(p) = e {
            let grad = p.grad(g).map(|r| r.to_vec()).unwrap_or_default();
            out.push((name.to_string(), grad));
        }
    }));
    out
}

/// `Σ y·w` with fixed weights `w`, so every output element matters.
fn weighted<S: Shape, D: Backend<f32>>(y: &Tensor<S, D>) -> Tensor<(), D> {
    let w: Vec<f32> = (0..y.numel()).map(|i| (0.37 * i as f32).sin()).collect();
    let w = Tensor::<S, D>::from_vec_shaped(w, y.shape()).unwrap();
    let raw = y.raw().binary(volta_kernels::BinaryOp::Mul, w.raw());
    Tensor::try_from_raw(raw.reduce_all(volta_kernels::ReduceOp::Sum)).unwrap()
}

/// A layer applied the same way on both devices.
trait Apply<L: ToDevice<f32>, S: Shape, O: Shape> {
    fn apply<D: Backend<f32>>(layer: &L::On<D>, x: &Tensor<S, D>) -> Tensor<O, D>;
}

fn parity<L, S, O, A>(what: &str, layer: &L, x: Tensor<S>)
where
    L: ToDevice<f32>,
    L::On<Cpu>: Module<Cpu, f32>,
    L::On<Gpu>: Module<Gpu, f32>,
    S: Shape,
    O: Shape,
    A: Apply<L, S, O>,
{
    let _g = lock();
    let (mut lc, mut lg) = (layer.to::<Cpu>(), layer.to::<Gpu>());
    let xc = x.requires_grad();
    let xg = xc.to::<Gpu>();
    let (yc, yg) = (A::apply::<Cpu>(&lc, &xc), A::apply::<Gpu>(&lg, &xg));
    close(&format!("{what} forward"), &yc.to_vec(), &yg.to_vec());
    let (gc, gg) = (weighted(&yc).backward(), weighted(&yg).backward());
    close(
        &format!("{what} dx"),
        &gc.get(&xc).unwrap().to_vec(),
        &gg.get(&xg).unwrap().to_vec(),
    );
    for ((name, c), (_, g)) in param_grads(&mut lc, &gc)
        .iter()
        .zip(param_grads(&mut lg, &gg))
    {
        assert!(!c.is_empty(), "{what}: {name} got no gradient");
        close(&format!("{what} d{name}"), c, &g);
    }
}

macro_rules! case {
    ($name:ident, $layer:ty, $in:ty => $out:ty, |$l:ident, $x:ident| $body:expr) => {
        struct $name;
        impl Apply<$layer, $in, $out> for $name {
            fn apply<D: Backend<f32>>(
                $l: &<$layer as ToDevice<f32>>::On<D>,
                $x: &Tensor<$in, D>,
            ) -> Tensor<$out, D> {
                $body
            }
        }
    };
}

case!(ConvCase, Conv2d<4, 6, 3, 3>, Rank4<2, 4, 7, 6> => Rank4<2, 6, 3, 2>, |l, x| l.forward(x));
case!(MaxCase, MaxPool2d, Rank4<2, 3, 7, 6> => Rank4<2, 3, 4, 3>, |l, x| l.forward(x));
case!(AvgCase, AvgPool2d, Rank4<2, 3, 6, 5> => Rank4<2, 3, 4, 3>, |l, x| l.forward(x));
case!(GapCase, GlobalAvgPool2d, Rank4<2, 3, 4, 5> => Rank2<2, 3>, |l, x| l.forward(x));
case!(BnCase, BatchNorm2d<3>, Rank4<4, 3, 2, 5> => Rank4<4, 3, 2, 5>, |l, x| l.forward(x));
case!(LnCase, LayerNorm<5>, Rank3<3, 4, 5> => Rank3<3, 4, 5>, |l, x| l.forward(x));
case!(RmsCase, RmsNorm<6>, Rank2<4, 6> => Rank2<4, 6>, |l, x| l.forward(x));
case!(LinCase, Linear<5, 3>, Rank2<4, 5> => Rank2<4, 3>, |l, x| l.forward(x));
case!(DropCase, Dropout, Rank2<16, 16> => Rank2<16, 16>, |l, x| l.forward(x));
case!(FlatCase, Flatten, Rank4<2, 3, 2, 2> => Rank2<2, 12>, |l, x| l.forward(x));
case!(GeluCase, Gelu, Rank2<3, 5> => Rank2<3, 5>, |l, x| l.forward(x));

#[test]
fn every_layer_matches_the_cpu() {
    let mut rng = Rng::seed(0);
    let opts = Conv2dOptions::default()
        .stride(2)
        .padding(1)
        .dilation(2)
        .groups(2);
    let conv = Conv2d::<4, 6, 3, 3>::with_options(opts, &mut rng);
    parity::<_, _, _, ConvCase>("conv", &conv, Tensor::randn(&mut rng));
    let max = MaxPool2d::new(3).stride(2).padding(1);
    parity::<_, _, _, MaxCase>("maxpool", &max, Tensor::randn(&mut rng));
    parity::<_, _, _, AvgCase>(
        "avgpool",
        &AvgPool2d::new(2).padding(1),
        Tensor::randn(&mut rng),
    );
    parity::<_, _, _, GapCase>("gap", &GlobalAvgPool2d, Tensor::randn(&mut rng));
    parity::<_, _, _, BnCase>(
        "batchnorm",
        &BatchNorm2d::<3>::new(),
        Tensor::randn(&mut rng),
    );
    parity::<_, _, _, LnCase>("layernorm", &LayerNorm::<5>::new(), Tensor::randn(&mut rng));
    parity::<_, _, _, RmsCase>("rmsnorm", &RmsNorm::<6>::new(), Tensor::randn(&mut rng));
    parity::<_, _, _, LinCase>(
        "linear",
        &Linear::<5, 3>::new(&mut rng),
        Tensor::randn(&mut rng),
    );
    // Same seed, same mask on both devices.
    parity::<_, _, _, DropCase>(
        "dropout",
        &Dropout::new(0.3, &mut rng),
        Tensor::randn(&mut rng),
    );
    parity::<_, _, _, FlatCase>("flatten", &Flatten, Tensor::randn(&mut rng));
    parity::<_, _, _, GeluCase>("gelu", &Gelu, Tensor::randn(&mut rng));
}

#[test]
fn batch_norm_running_statistics_and_eval_match_the_cpu() {
    let _g = lock();
    let mut rng = Rng::seed(1);
    let x = Tensor::<Rank4<4, 3, 2, 5>>::randn(&mut rng);
    let (mut c, mut g) = (BatchNorm2d::<3>::new(), BatchNorm2d::<3>::new().to::<Gpu>());
    let _ = (c.forward(&x), g.forward(&x.to::<Gpu>()));
    close(
        "running mean",
        &c.running_mean().to_vec(),
        &g.running_mean().to_vec(),
    );
    close(
        "running var",
        &c.running_var().to_vec(),
        &g.running_var().to_vec(),
    );
    c.eval();
    g.eval();
    close(
        "eval",
        &c.forward(&x).to_vec(),
        &g.forward(&x.to::<Gpu>()).to_vec(),
    );
}

model! {
    /// LeNet-style for 1×8×8 images.
    pub struct LeNet for (B, 1, 8, 8) -> (B, 4) {
        conv1: Conv2d<4, kernel = 3, padding = 1>,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<8, kernel = 3, padding = 1>,
        bn: BatchNorm2d,
        relu,
        pool2: AvgPool2d<2>,
        flatten,
        drop: Dropout<0.1>,
        fc: Linear<4>,
    }
}

model! {
    /// Two convolutions keeping 4×4×4.
    pub struct Block for (B, 4, 4, 4) -> (B, 4, 4, 4) {
        conv1: Conv2d<4, kernel = 3, padding = 1>,
        relu,
        conv2: Conv2d<4, kernel = 3, padding = 1>,
    }
}

model! {
    /// A small residual CNN.
    pub struct ResNet for (B, 1, 4, 4) -> (B, 4) {
        stem: Conv2d<4, kernel = 3, padding = 1>,
        relu,
        block: Residual<Block>,
        gap: GlobalAvgPool2d,
        norm: LayerNorm,
        fc: Linear<4>,
    }
}

model! {
    /// An MLP.
    pub struct Mlp for (B, 16) -> (B, 4) {
        fc1: Linear<32>,
        gelu,
        norm: RmsNorm,
        fc2: Linear<4>,
    }
}

/// Trains `model` a few Adam steps on fixed data; returns the first and last loss.
fn train<M, S, D>(mut model: M, x: Tensor<S, D>, steps: usize) -> (f32, f32)
where
    D: Backend<f32>,
    S: volta::shape::BatchFirst<Batch = Const<8>>,
    M: Module<D, f32> + Forward<S, D, f32, Output = Rank2<8, 4>>,
{
    let labels = Tensor::<Rank1<8>, D, u32>::from_array([0, 1, 2, 3, 0, 1, 2, 3]);
    let mut opt = Adam::new(1e-2);
    let mut losses = Vec::new();
    for _ in 0..steps {
        let loss = cross_entropy(&model.forward(&x), &labels);
        losses.push(loss.detach());
        let grads = loss.backward();
        opt.step(&mut model, &grads);
    }
    (losses[0].item(), losses[steps - 1].item())
}

#[test]
fn model_blocks_train_on_cpu_and_gpu() {
    let _g = lock();
    let mut rng = Rng::seed(2);
    let img = Tensor::<Rank4<8, 1, 8, 8>>::randn(&mut rng);
    let small = Tensor::<Rank4<8, 1, 4, 4>>::randn(&mut rng);
    let flat = Tensor::<Rank2<8, 16>>::randn(&mut rng);
    let lenet = LeNet::new(&mut rng);
    let resnet = ResNet::new(&mut rng);
    let mlp = Mlp::new(&mut rng);
    for (name, (first, last)) in [
        ("lenet cpu", train(lenet.clone(), img.clone(), 15)),
        ("lenet gpu", train(lenet.to::<Gpu>(), img.to::<Gpu>(), 15)),
        ("resnet cpu", train(resnet.clone(), small.clone(), 15)),
        (
            "resnet gpu",
            train(resnet.to::<Gpu>(), small.to::<Gpu>(), 15),
        ),
        ("mlp cpu", train(mlp.clone(), flat.clone(), 15)),
        ("mlp gpu", train(mlp.to::<Gpu>(), flat.to::<Gpu>(), 15)),
    ] {
        assert!(last < 0.7 * first, "{name}: loss {first} -> {last}");
    }
}

#[test]
fn embedding_matches_the_cpu() {
    let _g = lock();
    let emb = Embedding::<7, 4>::new(&mut Rng::seed(3));
    let ids = Tensor::<Rank2<2, 5>, Cpu, u32>::from_array([[0, 6, 2, 2, 5], [1, 6, 6, 3, 0]]);
    let gpu = emb.to::<Gpu>();
    let (yc, yg) = (emb.forward(&ids), gpu.forward(&ids.to::<Gpu>()));
    close("embedding forward", &yc.to_vec(), &yg.to_vec());
    let (gc, gg) = (weighted(&yc).backward(), weighted(&yg).backward());
    close(
        "embedding dweight",
        &gc.get(&emb.weight).unwrap().to_vec(),
        &gg.get(&gpu.weight).unwrap().to_vec(),
    );
}

model! {
    /// Patches as tokens, as a vision transformer reads them.
    pub struct PatchNet for (B, 2, 4, 4) -> (B, 3) {
        patches: Conv2d<8, kernel = 2, stride = 2>,
        to_sequence,
        pos: PositionalEmbedding<4>,
        block: TransformerBlock<2, causal = false>,
        mean_pool,
        head: Linear<3>,
    }
}

model! {
    /// A GPT without biases whose head reads the token table.
    pub struct TiedGpt for (B, T) -> (B, T, 11) {
        wte: Embedding<11, 16>,
        h: [TransformerBlock<2, ff = 32, bias = false>; 1],
        ln_f: LayerNorm<bias = false>,
        lm_head: Tied<wte>,
    }
}

model! {
    /// A classifier of token sequences, for padded batches.
    pub struct Classifier for (B, T) -> (B, 3) {
        wte: Embedding<11, 8>,
        block: TransformerBlock<2, causal = false>,
        mean_pool,
        head: Linear<3>,
    }
}

/// Forward values and every parameter's gradient of `cpu` and `gpu` (the same
/// model moved), for outputs `yc` and `yg`.
fn model_parity<S: Shape, M: Module<Cpu, f32>, G: Module<Gpu, f32>>(
    what: &str,
    (cpu, yc): (&mut M, Tensor<S>),
    (gpu, yg): (&mut G, Tensor<S, Gpu>),
) {
    close(&format!("{what} forward"), &yc.to_vec(), &yg.to_vec());
    let (gc, gg) = (weighted(&yc).backward(), weighted(&yg).backward());
    for ((name, c), (_, g)) in param_grads(cpu, &gc).iter().zip(param_grads(gpu, &gg)) {
        assert!(!c.is_empty(), "{what}: {name} got no gradient");
        close(&format!("{what} d{name}"), c, &g);
    }
}

#[test]
fn sequence_models_match_the_cpu() {
    let _g = lock();
    let mut rng = Rng::seed(4);
    let mut vit = PatchNet::<Cpu>::new(&mut rng);
    let mut vit_gpu = vit.to::<Gpu>();
    let x = Tensor::<Rank4<2, 2, 4, 4>>::randn(&mut rng);
    let (yc, yg) = (vit.forward(&x), vit_gpu.forward(&x.to::<Gpu>()));
    model_parity("patches", (&mut vit, yc), (&mut vit_gpu, yg));

    let mut gpt = TiedGpt::<Cpu>::new(&mut rng);
    let mut gpt_gpu = gpt.to::<Gpu>();
    let ids = Tensor::<(usize, usize), Cpu, u32>::from_vec_shaped(
        vec![0, 10, 3, 3, 7, 1, 2, 9, 4, 4],
        (2, 5),
    )
    .unwrap();
    let (yc, yg) = (gpt.forward(&ids), gpt_gpu.forward(&ids.to::<Gpu>()));
    model_parity("tied gpt", (&mut gpt, yc), (&mut gpt_gpu, yg));

    // Padded batches: on the left under a causal mask (the first positions see
    // no key), on the right with the mean over each sequence's tokens.
    let left = [0..5, 2..5];
    let (yc, yg) = (
        gpt.try_forward_padded(&ids, &left).unwrap(),
        gpt_gpu.try_forward_padded(&ids.to::<Gpu>(), &left).unwrap(),
    );
    model_parity("tied gpt, padded", (&mut gpt, yc), (&mut gpt_gpu, yg));
    let mut classifier = Classifier::<Cpu>::new(&mut rng);
    let mut classifier_gpu = classifier.to::<Gpu>();
    let right = [0..5, 0..3];
    let (yc, yg) = (
        classifier.try_forward_padded(&ids, &right).unwrap(),
        classifier_gpu
            .try_forward_padded(&ids.to::<Gpu>(), &right)
            .unwrap(),
    );
    model_parity(
        "classifier, padded",
        (&mut classifier, yc),
        (&mut classifier_gpu, yg),
    );
}
