// `backward()` on a [2, 3] loss (not reduced to a scalar) is a `cargo check` error.
use volta::prelude::*;

fn main() {
    let w = Tensor::<Rank2<2, 3>>::ones().requires_grad();
    let loss = w.square();
    let _grads = loss.backward();
}
