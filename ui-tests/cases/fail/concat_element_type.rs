// Concatenating an f32 tensor with an f64 tensor is a `cargo check` error (the element types differ).
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<4, 3>, Cpu, f64>::ones();
    let _c: Tensor<Rank2<6, 3>> = a.concat::<Axis<0>, _, _>(&b);
}
