// Gathering along axis 1 of [2, 3] with a [4, 1] index (axis-0 dims differ) is a `cargo check` error.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let idx = Tensor::<Rank2<4, 1>, Cpu, u32>::full(0);
    let _y = x.gather::<Axis<1>, _>(&idx);
}
