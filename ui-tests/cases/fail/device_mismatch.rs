// Tensors on different devices cannot be combined: a compile error naming both
// devices, not a run-time crash.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<2, 3>, Cpu>::ones();
    let b = Tensor::<Rank2<2, 3>, Gpu>::ones();
    let _ = a.add(&b);
    let _ = &a * &b;
    let w = Tensor::<Rank2<3, 4>, Gpu>::ones();
    let _ = a.matmul(&w);
}
