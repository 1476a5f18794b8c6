// `sum_keepdim::<Axis<5>>()` on a rank-2 tensor is a `cargo check` error naming the axis and the shape.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _s = x.sum_keepdim::<Axis<5>>();
}
