use volta::nn::MultiHeadAttention;
use volta::prelude::*;

fn main() {
    // A width of 10 does not split into 3 heads: `new` does not compile.
    let _attn = MultiHeadAttention::<10, 3>::new(&mut Rng::seed(0));
}
