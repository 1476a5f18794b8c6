//! Memory held after the forward pass of a block's parts and of a whole block
//! of nanoGPT's shakespeare-char model (f32, B from the command line, T 256), in
//! activations of B × T × C. Built as an example of `volta-examples` for this run
//! (`[[example]] name = "part_census"`); not part of the tree.
use volta::nn::{BlockOptions, MultiHeadAttention, TransformerBlock};
use volta::prelude::*;

fn in_use() -> f64 {
    Gpu::sync().unwrap();
    let m = Gpu::memory();
    (m.reserved_bytes - m.cached_bytes) as f64
}

fn main() {
    Gpu::init().unwrap();
    let b: usize = std::env::args().nth(1).map_or(2, |s| s.parse().unwrap()); let t = 256usize;
    let unit = (b * t * 384 * 4) as f64;
    let mut rng = Rng::seed(0);
    let x = Tensor::<(usize, usize, Const<384>), Gpu>::randn_shaped((b, t, Const), &mut rng)
        .requires_grad();
    let xr = Tensor::<(usize, Const<384>), Gpu>::randn_shaped((b * t, Const), &mut rng)
        .requires_grad();
    let report = |name: &str, before: f64| {
        println!("{name:30} {:6.2} units held (output included)", (in_use() - before) / unit)
    };
    {
        let ln = LayerNorm::<384, Gpu>::new();
        let base = in_use();
        let y = ln.forward(&x);
        report("layernorm", base);
        drop(y);
    }
    {
        let l = Linear::<384, 1152, Gpu>::new(&mut rng);
        let base = in_use();
        let y = l.forward(&xr);
        report("linear 384->1152", base);
        drop(y);
    }
    {
        let l = Linear::<384, 1536, Gpu>::new(&mut rng);
        let base = in_use();
        let y = l.forward(&xr).gelu();
        report("linear 384->1536 + gelu", base);
        drop(y);
    }
    {
        let l = Linear::<384, 1536, Gpu>::new(&mut rng);
        let l2 = Linear::<1536, 384, Gpu>::new(&mut rng);
        let base = in_use();
        let y = l2.forward(&l.forward(&xr).gelu());
        report("fc + gelu + proj", base);
        drop(y);
    }
    {
        let a = MultiHeadAttention::<384, 6, 6, Gpu>::new(&mut rng);
        let base = in_use();
        let y = a.forward(&x);
        report("attention (qkv, sdpa, proj)", base);
        drop(y);
    }
    {
        let mut a = MultiHeadAttention::<384, 6, 6, Gpu>::new(&mut rng);
        a.attn_dropout = Dropout::new(0.2, &mut rng);
        let base = in_use();
        let y = a.forward(&x);
        report("attention with dropout", base);
        drop(y);
    }
    {
        let opts = BlockOptions { dropout: 0.2, ..BlockOptions::default() };
        let blk = TransformerBlock::<384, 6, 1536, 6, Gpu>::with_options(opts, &mut rng);
        let base = in_use();
        let normed = blk.ln_1.forward(&x);
        report("ln_1", base);
        let attended = blk.attn.forward(&normed);
        report("+ attn", base);
        let x1 = x.add(&blk.dropout.forward(&attended));
        report("+ residual 1", base);
        drop(attended);
        report("- attended handle", base);
        let rows = blk.ln_2.forward(&x1).reshape_to((b * t, Const::<384>)).unwrap();
        report("+ ln_2", base);
        let fed = blk.mlp.forward(&rows);
        report("+ mlp", base);
        drop(rows);
        report("- rows handle", base);
        let fed = fed.reshape_to((b, t, Const::<384>)).unwrap();
        let x2 = x1.add(&blk.dropout.forward(&fed));
        drop(fed);
        report("+ residual 2", base);
        x2.raw().buffer().realize();
        report("x2 realized", base);
        drop(x1);
        report("- x1 handle", base);
        drop(normed);
        report("- normed handle", base);
        drop(x2);
    }
    for p in [0.2] {
        let opts = BlockOptions { dropout: p, ..BlockOptions::default() };
        let blk = TransformerBlock::<384, 6, 1536, 6, Gpu>::with_options(opts, &mut rng);
        let base = in_use();
        let y = blk.forward(&x);
        report(&format!("block, dropout {p}"), base);
        y.raw().buffer().realize();
        report(&format!("block, output realized, dropout {p}"), base);
        let y2 = blk.forward(&y);
        y2.raw().buffer().realize();
        report(&format!("two blocks, realized, dropout {p}"), base);
        drop((y, y2));
    }
}
