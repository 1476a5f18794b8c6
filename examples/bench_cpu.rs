//! Times an f32 GEMM through `Tensor::matmul` on the CPU: the median of `--runs`
//! timed products after warm-up, in GFLOP/s. Run in release mode:
//!
//! ```text
//! cargo run --release --example bench_cpu [-- --size 1024 --runs 15]
//! ```
use clap::Parser;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;
use volta::prelude::*;
use volta_examples::cli::positive;

const WARMUP: usize = 3;

/// Times an f32 GEMM through `Tensor::matmul` on the CPU: the median of `--runs`
/// timed products after warm-up, in GFLOP/s.
#[derive(Debug, Parser)]
#[command(name = "bench_cpu", args_override_self = true)]
struct Args {
    /// The product's side: N×N times N×N.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = positive())]
    size: usize,
    /// Timed products (after warm-up); the median is reported.
    #[arg(long, value_name = "R", default_value_t = 15, value_parser = positive())]
    runs: usize,
}

fn main() -> ExitCode {
    let Args { size: n, runs } = Args::parse();
    let mut rng = Rng::seed(1);
    let shape = (n, n);
    let a = Tensor::<(usize, usize)>::randn_shaped(shape, &mut rng);
    let b = Tensor::<(usize, usize)>::randn_shaped(shape, &mut rng);

    // Spot-check one element against an f64 dot product, so a fast wrong kernel fails.
    let c = a.matmul(&b).to_vec();
    let (av, bv) = (a.to_vec(), b.to_vec());
    let (i, j) = (n / 3, n / 2);
    let want: f64 = (0..n)
        .map(|k| av[i * n + k] as f64 * bv[k * n + j] as f64)
        .sum();
    if (c[i * n + j] as f64 - want).abs() > 1e-3 * (n as f64).sqrt() {
        eprintln!(
            "bench_cpu: wrong product: c[{i},{j}] = {} vs {want}",
            c[i * n + j]
        );
        return ExitCode::FAILURE;
    }

    for _ in 0..WARMUP {
        black_box(a.matmul(&b));
    }
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(a.matmul(&b));
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let median = times[runs / 2];
    let gflops = 2.0 * (n as f64).powi(3) / median / 1e9;
    println!(
        "volta f32 GEMM {n}^3: median {:.3} ms (best {:.3} ms) over {runs} runs, {gflops:.1} GFLOP/s",
        median * 1e3,
        times[0] * 1e3
    );
    println!("volta_gflops={gflops:.2}");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scripts/bench_cpu_gemm.sh` runs `bench_cpu --size N --runs R`.
    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &str| Args::try_parse_from(argv.split_whitespace());
        let a = parse("bench_cpu").unwrap();
        assert_eq!((a.size, a.runs), (1024, 15));
        let a = parse("bench_cpu --size 256 --runs 3").unwrap();
        assert_eq!((a.size, a.runs), (256, 3));
        for bad in ["--size 0", "--runs x", "--size", "--sizes 3", "7"] {
            assert!(parse(&format!("bench_cpu {bad}")).is_err(), "{bad}");
        }
    }
}
