// A kernel's tensor arguments must live on one device.
use volta::kernel;
use volta::prelude::*;

#[kernel]
fn mix(a: f32, b: f32) -> f32 {
    a * 0.5 + b * 0.5
}

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<2, 3>, Gpu>::ones();
    let _ = mix(&a, &b);
}
