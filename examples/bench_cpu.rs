//! Times an f32 GEMM through `Tensor::matmul` on the CPU: the median of `--runs`
//! timed products after warm-up, in GFLOP/s. Run in release mode:
//!
//! ```text
//! cargo run --release --example bench_cpu [-- --size 1024 --runs 15]
//! ```
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;
use volta::prelude::*;

const WARMUP: usize = 3;

fn parse_args() -> Result<(usize, usize), String> {
    let (mut size, mut runs) = (1024, 15);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let target = match arg.as_str() {
            "--size" => &mut size,
            "--runs" => &mut runs,
            _ => {
                return Err(format!(
                    "unexpected argument `{arg}` (usage: [--size N] [--runs R])"
                ));
            }
        };
        let value = args.next().ok_or(format!("`{arg}` needs a value"))?;
        *target = value
            .parse()
            .ok()
            .filter(|&v| v > 0)
            .ok_or(format!("`{arg}` needs a positive integer, got `{value}`"))?;
    }
    Ok((size, runs))
}

fn main() -> ExitCode {
    let (n, runs) = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_cpu: {e}");
            return ExitCode::from(2);
        }
    };
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
