//! Data-loader benchmark: batches/s of `volta::data::DataLoader` alone (collating and
//! uploading MNIST-shaped 1×28×28 samples, CPU and GPU, with and without the
//! prefetch thread), and the GPU time of a LeNet Adam step (the `bench_gpu` CNN) on
//! a batch uploaded once beforehand vs fed by the loader, so the cost the loader
//! adds to a step (or hides) reads directly. The loader-alone rows draw whole
//! epochs (at most 1000 batches); the step rows `--steps` batches per run. With
//! nothing to do between batches, the loader-alone rows with prefetch mostly
//! measure the hand-over between threads (a wake-up per batch); the step rows show
//! what prefetching hides when there is a step to overlap with.
//!
//! The dataset is synthetic (uniform pixels, labels `i % 10`): the loader's work
//! depends on sizes, not on values. Every GPU timing syncs before reading the
//! clock; each figure is the median of several runs after a warm-up run.
//!
//! ```text
//! cargo run --release -p volta-examples --example bench_loader \
//!     [-- --quick] [--batch 8|32|64|128|256] [--samples N] [--steps N] [--runs N] [--cpu]
//! ```
//! `--quick` (for CI and software GPUs): 2048 samples, batch 8, 4 steps, 2 runs.
//! `--cpu`: only the CPU loader rows.
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use std::process::ExitCode;
use std::time::Instant;
use volta::data::batching::Exact;
use volta::data::{DataLoader, Labelled};
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::LeNet;
use volta_examples::cli::positive;

/// One MNIST-shaped sample.
type Image = Rank3<1, 28, 28>;
/// Bytes of one sample's features.
const SAMPLE_BYTES: f64 = (28 * 28 * 4) as f64;

/// Data-loader benchmark: batches/s of `volta::data::DataLoader` alone (CPU and GPU,
/// with and without the prefetch thread), and the GPU time of a LeNet Adam step on a
/// pre-uploaded batch vs fed by the loader. The dataset is synthetic MNIST-shaped
/// 1×28×28 samples.
#[derive(Debug, Parser)]
#[command(name = "bench_loader", args_override_self = true)]
struct Args {
    /// For CI and software GPUs: 2048 samples, batch 8, 4 steps, 2 runs (options
    /// given beside it still apply).
    #[arg(long)]
    quick: bool,
    /// Samples per batch [default: 128; 8 with --quick].
    #[arg(long, value_parser = batch_sizes())]
    batch: Option<usize>,
    /// Synthetic samples in the dataset [default: 60000; 2048 with --quick].
    #[arg(long, value_name = "N", value_parser = positive())]
    samples: Option<usize>,
    /// Batches per run of the step rows [default: 200; 4 with --quick].
    #[arg(long, value_name = "N", value_parser = positive())]
    steps: Option<usize>,
    /// Timed runs per row, after a warm-up run [default: 5; 2 with --quick].
    #[arg(long, value_name = "N", value_parser = positive())]
    runs: Option<usize>,
    /// Only the CPU loader rows.
    #[arg(long)]
    cpu: bool,
}

/// The batch sizes `main` instantiates (`--batch`'s choices).
fn batch_sizes() -> impl clap::builder::TypedValueParser<Value = usize> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["8", "32", "64", "128", "256"])
        .map(|b| b.parse::<usize>().expect("each choice is a number"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settings {
    samples: usize,
    batch: usize,
    steps: usize,
    runs: usize,
    cpu_only: bool,
}

impl Args {
    /// The settings: `--quick`'s or the full defaults, then the options given.
    fn settings(&self) -> Result<Settings, clap::Error> {
        let (samples, batch, steps, runs) = if self.quick {
            (2048, 8, 4, 2)
        } else {
            (60_000, 128, 200, 5)
        };
        let s = Settings {
            samples: self.samples.unwrap_or(samples),
            batch: self.batch.unwrap_or(batch),
            steps: self.steps.unwrap_or(steps),
            runs: self.runs.unwrap_or(runs),
            cpu_only: self.cpu,
        };
        if s.samples < s.batch {
            return Err(Args::command().error(
                ErrorKind::ArgumentConflict,
                format!(
                    "--samples {} is fewer than one batch of {}",
                    s.samples, s.batch
                ),
            ));
        }
        Ok(s)
    }
}

fn synthetic(n: usize, rng: &mut Rng) -> Labelled {
    let features = (0..n * 28 * 28).map(|_| rng.uniform() as f32).collect();
    let labels = (0..n as u32).map(|i| i % 10).collect();
    Labelled::new(features, &[1, 28, 28], labels, 10).expect("consistent by construction")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The results table.
struct Table(Vec<String>);

impl Table {
    fn row(&mut self, name: &str, value: f64, unit: &str, note: &str) {
        let line = format!("{name:44} {value:12.3} {unit:10} {note}");
        println!("{line}");
        self.0.push(line);
    }
}

/// Batches per run of the loader-alone rows: whole epochs (so the thread's start
/// per epoch is amortised as in training), at most this many batches.
const LOADER_BATCHES: usize = 1000;

/// Median seconds per batch of drawing the batches of an epoch (at most
/// [`LOADER_BATCHES`]; a fresh epoch per run), `sync` before the clock is read.
fn loader_seconds<const B: usize, D: Backend<f32>>(
    loader: &DataLoader<Image, Exact<B>, D>,
    s: &Settings,
    sync: fn(),
) -> f64 {
    let steps = loader.len().min(LOADER_BATCHES);
    let times = (0..=s.runs)
        .map(|run| {
            let t = Instant::now();
            for batch in loader.epoch(run as u64).take(steps) {
                std::hint::black_box(&batch);
            }
            sync();
            t.elapsed().as_secs_f64() / steps as f64
        })
        .skip(1) // warm-up
        .collect();
    median(times)
}

/// The loader-alone rows for device `D`.
fn loader_rows<const B: usize, D: Backend<f32>>(
    table: &mut Table,
    data: &Labelled,
    s: &Settings,
    device: &str,
    sync: fn(),
) {
    for depth in [0, 2, 4] {
        let loader = DataLoader::new(data.clone())
            .features::<Image>()
            .expect("1×28×28 samples")
            .batch::<B>()
            .drop_last()
            .shuffle(0)
            .prefetch(depth)
            .device::<D>();
        let sec = loader_seconds(&loader, s, sync);
        let mb = B as f64 * SAMPLE_BYTES / sec / 1e6;
        table.row(
            &format!("loader_{device}_b{B}_prefetch{depth}"),
            1.0 / sec,
            "batches/s",
            &format!("{:.1} µs/batch, {mb:.0} MB/s of features", sec * 1e6),
        );
    }
}

fn gpu_sync() {
    Gpu::sync().unwrap_or_else(|e| panic!("{e}"));
}

/// One Adam step of the LeNet on a batch.
fn step<const B: usize>(
    model: &mut LeNet<Gpu>,
    opt: &mut Adam<Gpu>,
    x: &Tensor<Rank4<B, 1, 28, 28>, Gpu>,
    y: &Tensor<Rank1<B>, Gpu, u32>,
) {
    let grads = cross_entropy(&model.forward(x), y).backward();
    opt.step(model, &grads);
}

/// GPU LeNet step time on one pre-uploaded batch vs fed by the loader.
fn train_rows<const B: usize>(table: &mut Table, data: &Labelled, s: &Settings) {
    let mut rng = Rng::seed(1);
    let mut model = LeNet::<Gpu>::new(&mut rng);
    let mut opt = Adam::<Gpu>::new(1e-3);
    let base = DataLoader::new(data.clone())
        .features::<Image>()
        .expect("1×28×28 samples")
        .batch::<B>()
        .drop_last()
        .shuffle(0)
        .device::<Gpu>();
    let steps = s.steps.min(base.len());

    let first = base.epoch(0).next().expect("one batch");
    let (x, y) = (first.inputs, first.targets);
    let times = (0..=s.runs)
        .map(|_| {
            gpu_sync();
            let t = Instant::now();
            for _ in 0..steps {
                step(&mut model, &mut opt, &x, &y);
            }
            gpu_sync();
            t.elapsed().as_secs_f64() / steps as f64
        })
        .skip(1)
        .collect();
    let resident = median(times);
    table.row(
        &format!("step_gpu_b{B}_preuploaded"),
        resident * 1e3,
        "ms/step",
        "LeNet Adam step, the same batch every step",
    );

    for depth in [0, 2] {
        let loader = base.clone().prefetch(depth);
        let times = (0..=s.runs)
            .map(|run| {
                gpu_sync();
                let t = Instant::now();
                for batch in loader.epoch(run as u64).take(steps) {
                    step(&mut model, &mut opt, &batch.inputs, &batch.targets);
                }
                gpu_sync();
                t.elapsed().as_secs_f64() / steps as f64
            })
            .skip(1)
            .collect();
        let fed = median(times);
        table.row(
            &format!("step_gpu_b{B}_loader_prefetch{depth}"),
            fed * 1e3,
            "ms/step",
            &format!(
                "{:+.3} ms vs preuploaded ({:+.1}%)",
                (fed - resident) * 1e3,
                100.0 * (fed - resident) / resident
            ),
        );
    }
}

fn run<const B: usize>(s: &Settings, data: &Labelled) -> Table {
    let mut table = Table(Vec::new());
    loader_rows::<B, Cpu>(&mut table, data, s, "cpu", || {});
    if s.cpu_only {
        return table;
    }
    match Gpu::init() {
        Ok(info) => {
            println!("(GPU: {info})");
            loader_rows::<B, Gpu>(&mut table, data, s, "gpu", gpu_sync);
            train_rows::<B>(&mut table, data, s);
        }
        Err(e) => println!("(no GPU rows: {e})"),
    }
    table
}

fn main() -> ExitCode {
    let s = Args::parse().settings().unwrap_or_else(|e| e.exit());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "bench_loader: {} synthetic 1×28×28 samples, batch {}, {} steps per run, median of {} \
         runs, {cores} CPU cores",
        s.samples, s.batch, s.steps, s.runs
    );
    let data = synthetic(s.samples, &mut Rng::seed(0));
    let table = match s.batch {
        8 => run::<8>(&s, &data),
        32 => run::<32>(&s, &data),
        64 => run::<64>(&s, &data),
        128 => run::<128>(&s, &data),
        256 => run::<256>(&s, &data),
        other => unreachable!("--batch {other} is not one of its choices"),
    };
    println!("\n{:44} {:>12} {:10} note", "row", "value", "unit");
    for line in &table.0 {
        println!("{line}");
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(argv: &str) -> Result<Settings, clap::Error> {
        Args::try_parse_from(argv.split_whitespace())?.settings()
    }

    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let full = Settings {
            samples: 60_000,
            batch: 128,
            steps: 200,
            runs: 5,
            cpu_only: false,
        };
        assert_eq!(settings("bench_loader").unwrap(), full);
        let quick = Settings {
            samples: 2048,
            batch: 8,
            steps: 4,
            runs: 2,
            cpu_only: false,
        };
        assert_eq!(settings("bench_loader --quick").unwrap(), quick);
        // Options override the defaults of `--quick`, before it or after it.
        assert_eq!(
            settings("bench_loader --batch 32 --quick --runs 3 --cpu").unwrap(),
            Settings {
                batch: 32,
                runs: 3,
                cpu_only: true,
                ..quick
            }
        );
        assert_eq!(
            settings("bench_loader --samples 1000 --steps 7").unwrap(),
            Settings {
                samples: 1000,
                steps: 7,
                ..full
            }
        );
        let err = settings("bench_loader --samples 100 --batch 128").unwrap_err();
        assert!(err.to_string().contains("fewer than one batch"), "{err}");
        for bad in ["--batch 100", "--steps 0", "--runs", "--fast"] {
            assert!(settings(&format!("bench_loader {bad}")).is_err(), "{bad}");
        }
    }
}
