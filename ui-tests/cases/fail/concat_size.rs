// Concatenating [2, 3] and [4, 3] along axis 0 into a named [5, 3] (2 + 4 is 6) fails `cargo build`.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<4, 3>>::ones();
    let _c: Tensor<Rank2<5, 3>> = a.concat::<Axis<0>, _, _>(&b);
}
