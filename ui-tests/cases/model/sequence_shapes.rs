use volta::prelude::*;

model! {
    /// Token ids come in through the first layer only.
    pub struct A for (B, T, 16) -> (B, T, 16) {
        norm: LayerNorm,
        wte: Embedding<10, 16>,
    }
}

model! {
    /// A transformer block takes sequences, not flat features.
    pub struct C for (B, 64) -> (B, 64) {
        block: TransformerBlock<4>,
    }
}

model! {
    /// Convolutions take images whose sizes are known at compile time.
    pub struct E2 for (B, T, 16) -> (B, T, 16) {
        conv: Conv2d<4, kernel = 3>,
    }
}

model! {
    /// Only attention layers repeat.
    pub struct F for (B, T, 16) -> (B, T, 16) {
        fc: [Linear<16>; 2],
    }
}

model! {
    /// The output's run-time dims come from the input.
    pub struct G for (B, T, 16) -> (B, S, 16) {
        norm: LayerNorm,
    }
}

model! {
    /// A built-in layer spelled another way reads as a nested model: the error
    /// names the layer it resembles.
    pub struct H for (B, T, 16) -> (B, T, 16) {
        norm: RMSNorm,
    }
}

model! {
    /// A tied head names an Embedding of the block.
    pub struct I for (B, T) -> (B, T, 10) {
        wte: Embedding<10, 16>,
        norm: LayerNorm,
        head: Tied<norm>,
    }
}

model! {
    /// A tied head takes the table's width.
    pub struct J for (B, T) -> (B, T, 10) {
        wte: Embedding<10, 16>,
        up: Linear<32>,
        head: Tied<wte>,
    }
}

model! {
    /// `to_sequence` reads feature maps; `mean_pool` pools sequences.
    pub struct K for (B, 16) -> (B, 16) {
        to_sequence,
    }
}

model! {
    pub struct L for (B, 4, 4, 4) -> (B, 4) {
        conv: Conv2d<4, kernel = 1>,
        mean_pool,
    }
}

model! {
    /// A length known at compile time is checked against the positions at once.
    pub struct M for (B, 1, 8, 8) -> (B, 16, 4) {
        patches: Conv2d<4, kernel = 2, stride = 2>,
        to_sequence,
        pos: PositionalEmbedding<8>,
    }
}

fn main() {}
