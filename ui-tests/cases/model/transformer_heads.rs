use volta::prelude::*;

model! {
    /// 5 heads cannot split a width of 24.
    pub struct A for (B, T, 24) -> (B, T, 24) {
        attn: MultiHeadAttention<5>,
    }
}

model! {
    /// 6 query heads cannot share 4 key/value heads.
    pub struct C for (B, T, 24) -> (B, T, 24) {
        block: TransformerBlock<6, kv_heads = 4>,
    }
}

model! {
    /// RoPE rotates pairs: a head width of 3 is odd.
    pub struct E2 for (B, T, 24) -> (B, T, 24) {
        attn: MultiHeadAttention<8, rope = true>,
    }
}

fn main() {}
