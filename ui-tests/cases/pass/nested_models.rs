// `model!` layers after nested models (dims only rustc knows, checked by it): every
// kind of layer builds there, and the forward passes run with the declared shapes.
use volta::prelude::*;

model! {
    /// 1×8×8 images to 8 maps of 8×8.
    pub struct Stem for (B, 1, 8, 8) -> (B, 8, 8, 8) {
        conv: Conv2d<8, kernel = 3, padding = 1>,
        relu,
    }
}

model! {
    /// Keeps 8×8×8.
    pub struct Block for (B, 8, 8, 8) -> (B, 8, 8, 8) {
        conv: Conv2d<8, kernel = 3, padding = 1>,
    }
}

model! {
    /// 16 maps of 4×4 to 32 features.
    pub struct Head for (B, 16, 4, 4) -> (B, 32) {
        flatten,
        fc: Linear<32>,
    }
}

model! {
    /// A layer of each kind after a nested model, and nested models after layers.
    pub struct Net for (B, 1, 8, 8) -> (B, 10) {
        stem: Stem,
        block: Residual<Block>,
        bn: BatchNorm2d,
        conv: Conv2d<16, kernel = 3, padding = 1, groups = 2>,
        pool: MaxPool2d<2>,
        norm: LayerNorm,
        head: Head,
        fc1: Linear<32, 16>,
        relu,
        fc2: Linear<10>,
    }
}

model! {
    /// Ends at dims only rustc knows: the declared output is checked by it.
    pub struct Pooled for (B, 1, 8, 8) -> (B, 8, 4, 4) {
        stem: Stem,
        norm: LayerNorm,
        pool: AvgPool2d<2>,
    }
}

model! {
    /// Flattens a nested model's output.
    pub struct Flat for (B, 1, 8, 8) -> (B, 512) {
        stem: Stem,
        flatten,
    }
}

fn main() {
    let mut rng = Rng::seed(0);
    let x = Tensor::<Rank4<2, 1, 8, 8>>::randn(&mut rng);
    let net: Net = Net::new(&mut rng);
    assert_eq!(net.forward(&x).dims(), &[2, 10]);
    let dynamic = Tensor::<(usize, Const<1>, Const<8>, Const<8>)>::randn_shaped(
        (3, Const, Const, Const),
        &mut rng,
    );
    assert_eq!(net.forward(&dynamic).dims(), &[3, 10]);
    assert!(net.summary().to_string().contains("[B, 16, 4, 4]"));
    let pooled: Pooled = Pooled::new(&mut rng);
    assert_eq!(pooled.forward(&x).dims(), &[2, 8, 4, 4]);
    let flat: Flat = Flat::new(&mut rng);
    assert_eq!(flat.forward(&x).dims(), &[2, 512]);
}
