//! Times attention on the CPU at nanoGPT's shakespeare-char shape per batch row
//! (6 heads of 64, T 256): the fused op (`RawTensor::attention`, flash attention)
//! against the same attention composed of products and a softmax, forward and
//! forward + backward, causal and not; the median of `--runs` after warm-up.
//! `scripts/bench_cpu_attention.sh` adds numpy's composed forward in the same run.
//!
//! ```text
//! cargo run --release -p volta-examples --example bench_cpu_attention [-- --batch 8 --len 256]
//! ```
use clap::Parser;
use std::process::ExitCode;
use std::time::Instant;
use volta::RawTensor;
use volta::kernel::{BinaryOp, ReduceOp};
use volta::prelude::*;
use volta_examples::cli::positive;

/// Times fused and composed attention on the CPU (median of `--runs` after warm-up).
#[derive(Debug, Parser)]
#[command(name = "bench_cpu_attention", args_override_self = true)]
struct Args {
    /// Batch rows.
    #[arg(long, value_name = "B", default_value_t = 8, value_parser = positive())]
    batch: usize,
    /// Heads.
    #[arg(long, value_name = "H", default_value_t = 6, value_parser = positive())]
    heads: usize,
    /// Sequence length (queries and keys).
    #[arg(long, value_name = "T", default_value_t = 256, value_parser = positive())]
    len: usize,
    /// Features per head.
    #[arg(long, value_name = "D", default_value_t = 64, value_parser = positive())]
    head_dim: usize,
    /// Timed runs of each (after 2 of warm-up); the median is reported.
    #[arg(long, value_name = "R", default_value_t = 7, value_parser = positive())]
    runs: usize,
}

type Raw = RawTensor<Cpu, f32>;

/// Attention by products and a softmax (the `T×T` weights stored).
fn composed(q: &Raw, k: &Raw, v: &Raw, causal: bool) -> Raw {
    let (t, d) = (q.dims()[2], q.dims()[3]);
    let scores = q
        .matmul(&k.transpose_last())
        .scalar(BinaryOp::Mul, 1.0 / (d as f32).sqrt());
    let scores = if causal {
        let mask: Vec<f32> = (0..t * t)
            .map(|i| {
                if i % t <= i / t {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
            .collect();
        scores.binary(
            BinaryOp::Add,
            &Raw::from_vec(mask, &[1, 1, t, t]).expand(scores.dims()),
        )
    } else {
        scores
    };
    scores.softmax(3).matmul(v)
}

/// The median seconds of `runs` calls of `f` after two of warm-up.
fn median(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[runs / 2]
}

fn main() -> ExitCode {
    let Args {
        batch: b,
        heads: h,
        len: t,
        head_dim: d,
        runs,
    } = Args::parse();
    let mut rng = Rng::seed(1);
    let mut leaf = || {
        let values = Tensor::<(usize,)>::randn_shaped((b * h * t * d,), &mut rng).to_vec();
        Raw::from_vec(values, &[b, h, t, d]).tracked_leaf()
    };
    let (q, k, v) = (leaf(), leaf(), leaf());
    let backward = |out: Raw| {
        let grads = out.reduce_all(ReduceOp::Sum).backward();
        grads.get_raw(q.id()).expect("q's gradient").to_vec()
    };
    println!("volta CPU attention, B {b} H {h} T {t} d {d}, median of {runs} runs (ms):");
    for causal in [false, true] {
        let start = causal.then_some(0);
        // A fast wrong kernel fails here.
        let (fused, reference) = (
            q.attention(&k, &v, start).to_vec(),
            composed(&q, &k, &v, causal).to_vec(),
        );
        let err = fused
            .iter()
            .zip(&reference)
            .map(|(a, r)| (a - r).abs())
            .fold(0.0, f32::max);
        if err > 1e-4 {
            eprintln!("bench_cpu_attention: the fused output is {err} from the composed one");
            return ExitCode::FAILURE;
        }
        let fused_fwd = median(runs, || drop(q.attention(&k, &v, start).to_vec()));
        let fused_both = median(runs, || drop(backward(q.attention(&k, &v, start))));
        let composed_fwd = median(runs, || drop(composed(&q, &k, &v, causal).to_vec()));
        let composed_both = median(runs, || drop(backward(composed(&q, &k, &v, causal))));
        println!(
            "  causal {causal}: fused forward {:.2}, forward+backward {:.2}; composed forward {:.2}, \
             forward+backward {:.2}",
            fused_fwd * 1e3,
            fused_both * 1e3,
            composed_fwd * 1e3,
            composed_both * 1e3
        );
        println!(
            "volta_fused_forward_ms_causal_{causal}={:.3}",
            fused_fwd * 1e3
        );
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scripts/bench_cpu_attention.sh` runs it with `--batch`, `--len` and `--runs`.
    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &str| Args::try_parse_from(argv.split_whitespace());
        let a = parse("bench_cpu_attention").unwrap();
        assert_eq!(
            (a.batch, a.heads, a.len, a.head_dim, a.runs),
            (8, 6, 256, 64, 7)
        );
        let a = parse("bench_cpu_attention --batch 2 --len 512 --runs 3").unwrap();
        assert_eq!((a.batch, a.len, a.runs), (2, 512, 3));
        for bad in ["--len 0", "--runs x", "--heads", "7"] {
            assert!(
                parse(&format!("bench_cpu_attention {bad}")).is_err(),
                "{bad}"
            );
        }
    }
}
