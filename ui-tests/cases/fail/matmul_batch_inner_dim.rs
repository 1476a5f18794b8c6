// A batched matmul whose inner dims differ ([2, 3, 4] × [2, 5, 6]) is a `cargo check` error naming both shapes.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank3<2, 3, 4>>::zeros();
    let b = Tensor::<Rank3<2, 5, 6>>::zeros();
    let _c = a.matmul(&b);
}
