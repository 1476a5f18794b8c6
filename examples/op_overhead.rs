//! Times cheap tensor ops called from Rust: the `RawTensor` calls the Python binding
//! (`volta-py`) makes for `a + b`, `a * 2.0`, `a.relu()` and `a @ b` on 1×1 CPU
//! float32 tensors, so `benchmarks/python/overhead.py` can subtract them from the
//! same ops timed from Python and report the binding's overhead per op.
//!
//! Each op runs `--iters` times per repeat, after one untimed repeat; the median and
//! the fastest of `--repeats` repeats are printed in nanoseconds per op, one
//! `op=NAME ns_median=X ns_min=Y` line each. Build it with the profile of the Python
//! module it is compared with:
//!
//! ```text
//! cargo run --release --example op_overhead [-- --iters 200000 --repeats 7]
//! ```
use clap::Parser;
use std::hint::black_box;
use std::time::Instant;
use volta::kernel::{BinaryOp, UnaryOp};
use volta::{Cpu, RawTensor};

/// Times the `RawTensor` ops behind `a + b`, `a * 2.0`, `a.relu()` and `a @ b` on
/// 1×1 CPU float32 tensors: the median and fastest of `--repeats` repeats of
/// `--iters` calls each, printed as `op=NAME ns_median=X ns_min=Y` lines.
#[derive(Debug, Parser)]
#[command(name = "op_overhead", args_override_self = true)]
struct Args {
    /// Calls of each op per repeat.
    #[arg(long, value_name = "N", default_value_t = 200_000, value_parser = volta_examples::cli::positive())]
    iters: usize,
    /// Timed repeats of each op; the median and the fastest are reported.
    #[arg(long, value_name = "R", default_value_t = 7, value_parser = volta_examples::cli::positive())]
    repeats: usize,
}

type T = RawTensor<Cpu, f32>;

/// The median and the fastest time per call of `op` over `repeats` repeats of
/// `iters` calls, in nanoseconds, after one untimed repeat.
fn time(iters: usize, repeats: usize, op: impl Fn() -> T) -> (f64, f64) {
    let run = || {
        let start = Instant::now();
        for _ in 0..iters {
            // The result is dropped at once, as Python drops an unused result.
            black_box(op());
        }
        start.elapsed().as_secs_f64() * 1e9 / iters as f64
    };
    run();
    let mut times: Vec<f64> = (0..repeats).map(|_| run()).collect();
    times.sort_by(f64::total_cmp);
    (times[repeats / 2], times[0])
}

fn main() {
    let Args { iters, repeats } = Args::parse();
    // Leaves that do not require grad, as `volta.tensor([[1.0]])` makes: no graph.
    let a = T::from_vec(vec![1.5], &[1, 1]);
    let b = T::from_vec(vec![-0.5], &[1, 1]);
    let (a, b) = (black_box(&a), black_box(&b));
    // The same calls as the binding's (volta-py/src/tensor): `binary_data`
    // broadcasts equal dims as clones, then `binary`; a number goes to `scalar`.
    let ops: [(&str, &dyn Fn() -> T); 4] = [
        ("add", &|| a.binary(BinaryOp::Add, b)),
        ("mul_scalar", &|| a.scalar(BinaryOp::Mul, black_box(2.0))),
        ("relu", &|| a.unary(UnaryOp::Relu)),
        ("matmul", &|| a.matmul(b)),
    ];
    println!("RawTensor<Cpu, f32> ops on 1x1 tensors: {repeats} repeats of {iters} calls");
    for (name, op) in ops {
        let (median, min) = time(iters, repeats, op);
        println!("op={name} ns_median={median:.1} ns_min={min:.1}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `benchmarks/python/overhead.py` runs `op_overhead --iters N --repeats R`.
    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &str| Args::try_parse_from(argv.split_whitespace());
        let a = parse("op_overhead").unwrap();
        assert_eq!((a.iters, a.repeats), (200_000, 7));
        let a = parse("op_overhead --iters 10 --repeats 3").unwrap();
        assert_eq!((a.iters, a.repeats), (10, 3));
        for bad in ["--iters 0", "--repeats x", "--iters", "7"] {
            assert!(parse(&format!("op_overhead {bad}")).is_err(), "{bad}");
        }
    }

    /// The timed ops compute what the Python ones do.
    #[test]
    fn the_ops_compute_the_expected_values() {
        let a = T::from_vec(vec![1.5], &[1, 1]);
        let b = T::from_vec(vec![-0.5], &[1, 1]);
        assert_eq!(a.binary(BinaryOp::Add, &b).to_vec(), [1.0]);
        assert_eq!(a.scalar(BinaryOp::Mul, 2.0).to_vec(), [3.0]);
        assert_eq!(b.unary(UnaryOp::Relu).to_vec(), [0.0]);
        assert_eq!(a.matmul(&b).to_vec(), [-0.75]);
        let (median, min) = time(10, 3, || a.binary(BinaryOp::Add, &b));
        assert!(min > 0.0 && median >= min);
    }
}
