// Calling a kernel with the wrong number or kind of arguments is a type error.
use volta::kernel;
use volta::prelude::*;

#[kernel]
fn swish(x: f32, #[scalar] beta: f32) -> f32 {
    x * sigmoid(beta * x)
}

fn main() {
    let t = Tensor::<Rank1<4>>::ones();
    let _missing = swish(&t);
    let _swapped = swish(1.5, &t);
}
