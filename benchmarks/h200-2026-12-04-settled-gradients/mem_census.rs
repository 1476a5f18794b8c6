//! The GPT step's memory at three points: after the forward pass, after the
//! backward pass, and at its peak (f32, B from the command line). Built as an
//! example of `volta-examples` for this run (`[[example]] name = "mem_census"`),
//! once per build; not part of the tree.
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::gpt::{CharGpt, Ids};

fn in_use() -> f64 {
    let m = Gpu::memory();
    (m.reserved_bytes - m.cached_bytes) as f64 / (1 << 20) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    Gpu::init()?;
    let batch: usize = std::env::args().nth(1).map_or(4, |s| s.parse().unwrap());
    let t = 256;
    let mut rng = Rng::seed(0);
    let mut model = CharGpt::<Gpu>::new(&mut rng);
    let mut opt = Adam::<Gpu>::adamw(6e-4, 0.1);
    let data: Vec<u32> = (0..batch * (t + 1)).map(|i| (i * 7919 % 256) as u32).collect();
    let x: Vec<u32> = data.chunks(t + 1).flat_map(|c| c[..t].to_vec()).collect();
    let y: Vec<u32> = data.chunks(t + 1).flat_map(|c| c[1..].to_vec()).collect();
    let x = Ids::<Gpu>::from_vec_shaped(x, (batch, t))?;
    let y = Tensor::<(usize,), Gpu, u32>::from_vec_shaped(y, (batch * t,))?;
    let unit = (batch * t * 384 * 4) as f64 / (1 << 20) as f64;
    for round in 0..2 {
        Gpu::sync()?;
        let base = in_use();
        Gpu::reset_peak_memory();
        let logits = model.forward(&x);
        let rows = Tensor::<(usize, Const<256>), Gpu>::try_from_raw(
            logits.raw().reshape(&[batch * t, 256]),
        )
        .expect("rows");
        let loss = cross_entropy(&rows, &y);
        Gpu::sync()?;
        let fwd = in_use();
        let fwd_peak = Gpu::memory().peak_in_use_bytes as f64 / (1 << 20) as f64;
        let grads = loss.backward();
        Gpu::sync()?;
        let bwd = in_use();
        let peak = Gpu::memory().peak_in_use_bytes as f64 / (1 << 20) as f64;
        let n = grads.len();
        if round == 1 {
            drop((rows, logits));
            Gpu::sync()?;
            println!("  {n} gradients; without logits and rows: +{:.1}", in_use() - base);
            let g2 = grads;
            drop(g2);
            Gpu::sync()?;
            println!("  without gradients: +{:.1}", in_use() - base);
            return Ok(());
        }
        opt.step(&mut model, &grads);
        drop((grads, rows, logits));
        Gpu::sync()?;
        println!(
            "round {round}: base {base:.1} MiB; after forward +{:.1} ({:.1} C-units), forward peak +{:.1}; after backward +{:.1}; peak +{:.1} ({:.1} C-units)",
            fwd - base,
            (fwd - base) / unit,
            fwd_peak - base,
            bwd - base,
            peak - base,
            (peak - base) / unit
        );
    }
    Ok(())
}
