// The GPU holds f32, f16 (and u32 indices); f64 tensors are CPU-only.
use volta::prelude::*;

fn main() {
    let _ = Tensor::<Rank1<3>, Gpu, f64>::ones();
}
