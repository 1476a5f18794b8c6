// Concatenating [2, 3] and [4, 5] along axis 0 (their axis-1 dims differ) is a `cargo check` error.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<4, 5>>::ones();
    let _c: Tensor<Rank2<6, 3>> = a.concat::<Axis<0>, _, _>(&b);
}
