//! `model!` blocks: shapes, names, summaries, modes, device moves, training.
use volta::nn::loss::cross_entropy;
use volta::prelude::*;

model! {
    /// A two-layer perceptron.
    pub struct Mlp for (B, 4) -> (B, 3) {
        fc1: Linear<16>,
        relu,
        drop: Dropout<0.1>,
        fc2: Linear<16, 3>,
    }
}

model! {
    /// LeNet-style, for 1×12×12 images.
    pub struct LeNet for (B, 1, 12, 12) -> (B, 10) {
        conv1: Conv2d<4, kernel = 3, padding = 1>,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<8, kernel = 3, padding = 1>,
        bn: BatchNorm2d,
        relu,
        pool2: AvgPool2d<2>,
        flatten,
        fc: Linear<10>,
    }
}

model! {
    /// Two 3×3 convolutions that keep 4×6×6.
    pub struct Block for (B, 4, 6, 6) -> (B, 4, 6, 6) {
        conv1: Conv2d<4, kernel = 3, padding = 1>,
        relu,
        conv2: Conv2d<4, kernel = 3, padding = 1>,
    }
}

model! {
    /// A small residual CNN.
    pub struct ResNet for (B, 1, 6, 6) -> (B, 3) {
        stem: Conv2d<4, kernel = 3, padding = 1>,
        relu,
        block1: Residual<Block>,
        block2: Residual<Block>,
        conv: Conv2d<8, kernel = 3, stride = 2, padding = 1>,
        gap: GlobalAvgPool2d,
        norm: LayerNorm,
        fc: Linear<3>,
    }
}

#[test]
fn mlp_names_summary_and_dynamic_batch() {
    let mut rng = Rng::seed(0);
    let mut mlp: Mlp = Mlp::new(&mut rng);
    let names: Vec<String> = mlp.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
    assert_eq!(mlp.param_count(), 4 * 16 + 16 + 16 * 3 + 3);
    let s = mlp.summary().to_string();
    assert!(
        s.lines()
            .any(|l| l.starts_with("fc1 ") && l.contains("Linear<16>") && l.contains("80")),
        "{s}"
    );
    assert!(s.contains("[B, 16]"), "{s}");
    assert!(s.ends_with("Total params: 131"), "{s}");
    let x = Tensor::<(usize, Const<4>)>::randn_shaped((5, Const), &mut rng);
    mlp.eval();
    let y = mlp.forward(&x);
    assert_eq!(y.dims(), &[5, 3]);
}

#[test]
fn mlp_trains() {
    let mut rng = Rng::seed(1);
    let mut mlp: Mlp = Mlp::new(&mut rng);
    let mut opt = Adam::new(1e-2);
    let x = Tensor::<Rank2<8, 4>>::randn(&mut rng);
    let labels = Tensor::<Rank1<8>, Cpu, u32>::from_array([0, 1, 2, 0, 1, 2, 0, 1]);
    let first = cross_entropy(&mlp.forward(&x), &labels).item();
    for _ in 0..30 {
        let grads = cross_entropy(&mlp.forward(&x), &labels).backward();
        opt.step(&mut mlp, &grads);
    }
    let last = cross_entropy(&mlp.forward(&x), &labels).item();
    assert!(last < first * 0.5, "{first} -> {last}");
}

#[test]
fn nested_names() {
    let mut net: ResNet = ResNet::new(&mut Rng::seed(0));
    let names: Vec<String> = net.named_params().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"block1.0.conv2.weight".to_string()),
        "{names:?}"
    );
    let s = net.summary().to_string();
    assert!(s.contains("block1  Residual<Block>"), "{s}");
    let mut lenet: LeNet = LeNet::new(&mut Rng::seed(0));
    let tensors: Vec<String> = lenet.named_tensors().into_iter().map(|(n, _)| n).collect();
    assert!(
        tensors.contains(&"bn.running_var".to_string()),
        "{tensors:?}"
    );
    println!("{}", lenet.summary());
}
