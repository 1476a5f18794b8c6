//! Times nanoGPT's shakespeare-char training step on the CPU: the `model!` GPT of
//! `examples/gpt_model.rs` (6 blocks of width 384, 6 heads, T 256, dropout 0.2)
//! over 256 byte tokens, cross-entropy, backward and an AdamW step; the median of
//! `--runs` steps after one warm-up step. `scripts/bench_cpu_gpt.sh` runs it beside
//! PyTorch's eager step (`scripts/bench_cpu_gpt_peer.py`, same tokens and timing).
//!
//! ```text
//! cargo run --release -p volta-examples --example bench_cpu_gpt [-- --batch 16 --runs 5]
//! ```
use clap::Parser;
use std::time::Instant;
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::cli::positive;
use volta_examples::gpt::{CharGpt, Ids, benchmark_batch};

/// Times nanoGPT's shakespeare-char training step on the CPU.
#[derive(Debug, Parser)]
#[command(name = "bench_cpu_gpt", args_override_self = true)]
struct Args {
    /// Sequences of 256 tokens a step.
    #[arg(long, value_name = "B", default_value_t = 16, value_parser = positive())]
    batch: usize,
    /// Timed steps (after one warm-up step); the median is reported.
    #[arg(long, value_name = "R", default_value_t = 5, value_parser = positive())]
    runs: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Args { batch, runs } = Args::parse();
    let t = 256;
    let mut rng = Rng::seed(0);
    let mut model = CharGpt::<Cpu>::new(&mut rng);
    let mut opt = Adam::<Cpu>::adamw(6e-4, 0.1);
    let (x, y) = benchmark_batch(batch, t);
    let x = Ids::<Cpu>::from_vec_shaped(x, (batch, t))?;
    let y = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(y, (batch * t,))?;
    let mut step = || -> Result<f32, ShapeError> {
        let logits = model.forward(&x);
        let rows = Tensor::<(usize, Const<256>), Cpu>::try_from_raw(
            logits.raw().reshape(&[batch * t, 256]),
        )?;
        let loss = cross_entropy(&rows, &y);
        let value = loss.item();
        let grads = loss.backward();
        opt.step(&mut model, &grads);
        Ok(value)
    };
    let first = step()?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        step()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let s = times[runs / 2];
    println!(
        "volta gpt step B{batch}: {:.0} ms, {:.3} steps/s (first loss {first:.4})",
        s * 1e3,
        1.0 / s
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scripts/bench_cpu_gpt.sh` runs `bench_cpu_gpt --batch B --runs R`.
    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &str| Args::try_parse_from(argv.split_whitespace());
        let a = parse("bench_cpu_gpt").unwrap();
        assert_eq!((a.batch, a.runs), (16, 5));
        let a = parse("bench_cpu_gpt --batch 2 --runs 3").unwrap();
        assert_eq!((a.batch, a.runs), (2, 3));
        for bad in ["--batch 0", "--runs x", "--batch", "7"] {
            assert!(parse(&format!("bench_cpu_gpt {bad}")).is_err(), "{bad}");
        }
    }
}
