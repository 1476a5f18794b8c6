// A 2-D matmul whose inner dims differ ([3, 4] × [5, 6]) is a `cargo check` error naming both shapes.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<3, 4>>::zeros();
    let b = Tensor::<Rank2<5, 6>>::zeros();
    let _c = a.matmul(&b);
}
