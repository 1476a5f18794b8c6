// The tensor arguments of a kernel must share a shape, like built-in binary ops.
use volta::kernel;
use volta::prelude::*;

#[kernel]
fn mix(a: f32, b: f32) -> f32 {
    a * 0.5 + b * 0.5
}

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<3, 2>>::ones();
    let _ = mix(&a, &b);
}
