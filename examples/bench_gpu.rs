//! GPU benchmark table: GEMM f32 (1024/2048/4096, with a sweep of matmul tile
//! configurations), the elementwise chain relu(a*b+c) on 64M elements fused and
//! eager (with a sweep of elementwise thread layouts), softmax and an RMSNorm-style
//! row reduction on 4096², dispatch overhead over 1000 small ops, an MLP
//! training step (784-1024-1024-10, batch 512, Adam) and a LeNet training step
//! (the `model!` below, batch 128, Adam); fused rows also unfused; tensor-core f16
//! GEMM and f32 GEMM in half precision where the adapter has cooperative matrices.
//! `--cnn` runs the LeNet rows alone, `--train` the MLP and LeNet rows, `--rows`
//! softmax and RMSNorm, `--gemm` the GEMM rows and sweeps (`--gemm-f32` without
//! the tensor-core ones), `--tensor-cores` the
//! tensor-core rows alone; `--defaults` skips the tuning sweeps; `--pool-probe`
//! looks for pooled buffers that slow kernels down, `--first-use-probe` for
//! products that run slowly right after their pipeline is created, `--probe` times
//! tiles given in the environment (see [`probe`]).
//!
//! Byte and FLOP conventions follow `torch_peers.py`, so the figures compare
//! directly. Every timing syncs before reading the clock, warms up first, and takes
//! the median of several runs. Run in release mode:
//!
//! ```text
//! cargo run --release -p volta-examples --features gpu --example bench_gpu [-- --quick]
//! ```
use clap::Parser;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use volta::backend::Replay;
use volta::backend::gpu::{CoopTiles, Launch, MatmulPrecision, MatmulTiles};
use volta::dtype::f16;
use volta::kernel::{BinaryOp, UnaryOp};
use volta::nn::loss::cross_entropy;

use volta::prelude::*;
use volta::{RawTensor, Tensor};
use volta_examples::LeNet;

/// The GPU benchmark table (all rows by default; at most one of the section flags
/// picks a section). Every timing syncs before reading the clock, warms up first,
/// and takes the median of several runs.
#[derive(Debug, Parser)]
#[command(name = "bench_gpu", args_override_self = true)]
#[command(group = clap::ArgGroup::new("section").multiple(false))]
struct Args {
    /// Smaller problems (software GPUs, CI): 1M-element chains, 512² rows, 256 and
    /// 512 GEMMs.
    #[arg(long)]
    quick: bool,
    /// Skip the tuning sweeps: the figures of the default choices only.
    #[arg(long)]
    defaults: bool,
    /// Section: the MLP step with fusion and split-K each on and off (wall, host
    /// recording and GPU time, buffers created).
    #[arg(long, group = "section")]
    mlp: bool,
    /// Section: softmax and RMSNorm over rows of 4096², fused and unfused.
    #[arg(long, group = "section")]
    rows: bool,
    /// Section: dispatch overhead, recording and replay of 1000 small ops.
    #[arg(long, group = "section")]
    record: bool,
    /// Section: products timed every 0.25 s for 12 s right after their pipeline
    /// is created.
    #[arg(long, group = "section")]
    first_use_probe: bool,
    /// Section: looks for pooled buffers that slow kernels down.
    #[arg(long, group = "section")]
    pool_probe: bool,
    /// Section: times the tiles listed in VOLTA_PROBE_F32 / VOLTA_PROBE_COOP at the
    /// sizes in VOLTA_PROBE_SIZES (`n` or `MxKxN`, comma-separated; default
    /// 2048,4096); VOLTA_PROBE_SPLIT=0 keeps products from splitting K.
    #[arg(long, group = "section")]
    probe: bool,
    /// Section: the tensor-core rows alone (f16 GEMM and f32 GEMM in half
    /// precision, with the tile sweep).
    #[arg(long, group = "section")]
    tensor_cores: bool,
    /// Section: the f32 GEMM rows and tile sweeps alone.
    #[arg(long, group = "section")]
    gemm_f32: bool,
    /// Section: the GEMM rows and sweeps, f32 and tensor-core.
    #[arg(long, group = "section")]
    gemm: bool,
    /// Section: the LeNet training step alone.
    #[arg(long, group = "section")]
    cnn: bool,
    /// Section: the MLP and LeNet training steps.
    #[arg(long, group = "section")]
    train: bool,
}

/// `--defaults`: the tuning sweeps are skipped.
static SKIP_SWEEPS: AtomicBool = AtomicBool::new(false);

/// The candidates of a tuning sweep, or none under `--defaults` (the figures of
/// the default choices only).
fn sweep<T>(candidates: &[T]) -> &[T] {
    if SKIP_SWEEPS.load(Ordering::Relaxed) {
        &[]
    } else {
        candidates
    }
}

fn sync() {
    Gpu::sync().unwrap_or_else(|e| panic!("{e}"));
}

/// Median seconds per call of `f` (called `per_run` times per timed run, `runs`
/// runs), after [`heat`] and warming up on `f` itself for at least [`WARM_UP`]
/// seconds.
///
/// The warm-up is by duration because an idle GPU lowers its clocks within a
/// second and raises them only under sustained load: an H200 was seen at a
/// 345 MHz SM clock (1980 MHz boost) during short bursts after host-side data
/// preparation, which cut memory-bound kernels to ~40% of their bandwidth.
fn time(runs: usize, per_run: usize, f: impl FnMut()) -> f64 {
    let ts = time_runs(runs, per_run, f);
    ts[ts.len() / 2]
}

/// The seconds per call of every timed run of [`time`], fastest first. The spread
/// and the buffers created while timing (after the warm-up: a row that allocates
/// then measures the allocator too) are noted for the next [`row`].
fn time_runs(runs: usize, per_run: usize, mut f: impl FnMut()) -> Vec<f64> {
    // First use compiles pipelines and tunes products, seconds in which the GPU
    // idles and clocks down: done before the heat.
    f();
    sync();
    heat();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < WARM_UP {
        for _ in 0..per_run {
            f();
        }
        sync();
    }
    let created = Gpu::buffers_created();
    let compiled = Gpu::pipelines_compiled();
    // Each run's time, and the part of it spent recording (before the sync).
    let mut runs_: Vec<(f64, f64)> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_run {
                f();
            }
            let recorded = t.elapsed().as_secs_f64();
            sync();
            let total = t.elapsed().as_secs_f64();
            (total / per_run as f64, recorded / total)
        })
        .collect();
    runs_.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ts: Vec<f64> = runs_.iter().map(|r| r.0).collect();
    let median = ts[ts.len() / 2];
    *LAST_TIMING.lock().unwrap() = Some(Spread {
        runs,
        low: ts[0] / median - 1.0,
        high: ts[ts.len() - 1] / median - 1.0,
        recording: [runs_[0].1, runs_[ts.len() / 2].1, runs_[ts.len() - 1].1],
        created: Gpu::buffers_created() - created,
        compiled: Gpu::pipelines_compiled() - compiled,
    });
    ts
}

/// Seconds of full load before each measurement's warm-up (see [`heat`]).
const HEAT: f64 = 1.0;

/// Keeps the GPU fully busy for [`HEAT`] seconds with 2048² products: an H100 left
/// nearly idle for a few seconds (pipeline compilation, tuning, host-side data
/// preparation, error checks) drops its SM clock from 1980 to 345 MHz, and a
/// measurement's own light or bursty work does not always bring it back
/// (BENCHMARKS-GPU.md, session 9).
fn heat() {
    thread_local! {
        static LOAD: RawTensor<Gpu, f32> = RawTensor::from_vec(vec![0.5; 2048 * 2048], &[2048, 2048]);
    }
    LOAD.with(|x| {
        // Compiled (and tuned) before the clock starts.
        drop(x.matmul(x));
        sync();
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < HEAT {
            for _ in 0..8 {
                drop(x.matmul(x));
            }
            sync();
        }
    });
}

/// How the timed runs of the last measurement spread around their median.
struct Spread {
    runs: usize,
    /// Fastest and slowest run relative to the median (−0.02 = 2% faster).
    low: f64,
    high: f64,
    /// The share of the fastest, the median and the slowest run spent recording
    /// (the host's part, before the sync): where a slow run's time went.
    recording: [f64; 3],
    /// Buffers the pool created during the timed runs.
    created: u64,
    /// Pipelines compiled during the timed runs.
    compiled: usize,
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "time {:+.1}%/{:+.1}% over {} runs",
            self.low * 100.0,
            self.high * 100.0,
            self.runs
        )?;
        let [fast, median, slow] = self.recording.map(|r| r * 100.0);
        write!(
            f,
            "; recording {fast:.0}/{median:.0}/{slow:.0}% of fastest/median/slowest"
        )?;
        if self.created > 0 {
            write!(f, "; ALLOCATED {} buffers while timing", self.created)?;
        }
        if self.compiled > 0 {
            write!(f, "; COMPILED {} pipelines while timing", self.compiled)?;
        }
        Ok(())
    }
}

static LAST_TIMING: std::sync::Mutex<Option<Spread>> = std::sync::Mutex::new(None);

/// Seconds of warm-up before each measurement (see [`time`]).
const WARM_UP: f64 = 1.0;

/// Calls per timed run of the workload rows. PyTorch's figures come from CUDA
/// events, which exclude the host's wait, so a sync (about 20 µs on an H200) is
/// amortised here (the diagnostics section prints the figures at 1, 5 and 20 calls
/// per sync).
const PER_SYNC: usize = 20;

fn randn(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.normal() as f32).collect()
}

fn raw(data: Vec<f32>, dims: &[usize]) -> RawTensor<Gpu, f32> {
    RawTensor::from_vec(data, dims)
}

/// Largest |gpu − cpu| relative to the largest |cpu| of an n×n product.
fn gemm_error(
    n: usize,
    a: &[f32],
    b: &[f32],
    ga: &RawTensor<Gpu, f32>,
    gb: &RawTensor<Gpu, f32>,
) -> f64 {
    let c = RawTensor::<Cpu, f32>::from_vec(a.to_vec(), &[n, n])
        .matmul(&RawTensor::from_vec(b.to_vec(), &[n, n]))
        .to_vec();
    let g = ga.matmul(gb).to_vec();
    let scale = c.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
    let err = c
        .iter()
        .zip(&g)
        .fold(0f64, |m, (x, y)| m.max((x - y).abs() as f64));
    err / scale
}

#[derive(Module)]
struct Mlp {
    l1: Linear<784, 1024, Gpu>,
    l2: Linear<1024, 1024, Gpu>,
    l3: Linear<1024, 10, Gpu>,
}

/// The benchmark's training problem: the MLP, Adam, one batch of 512.
struct MlpStep {
    mlp: Mlp,
    opt: Adam<Gpu>,
    xb: Tensor<Rank2<512, 784>, Gpu>,
    yb: Tensor<Rank1<512>, Gpu, u32>,
}

impl MlpStep {
    fn new(rng: &mut Rng) -> Self {
        let mlp = Mlp {
            l1: Linear::new(rng),
            l2: Linear::new(rng),
            l3: Linear::new(rng),
        };
        let targets = (0..512).map(|i| (i * 7 % 10) as u32).collect();
        MlpStep {
            mlp,
            opt: Adam::new(1e-3),
            xb: Tensor::randn(rng),
            yb: Tensor::from_vec(targets).expect("512 targets"),
        }
    }

    /// Forward, cross-entropy, backward, Adam update.
    fn step(&mut self) {
        let m = &mut self.mlp;
        let h = m.l1.forward(&self.xb).relu();
        let h = m.l2.forward(&h).relu();
        let loss = cross_entropy(&m.l3.forward(&h), &self.yb);
        let grads = loss.backward();
        self.opt.step(&mut self.mlp, &grads);
    }
}

/// Times the MLP Adam step on a batch of 512 (PyTorch's `mlp_train_step_b512`),
/// fused and unfused, with its dispatch count and a profile.
fn mlp_rows(table: &mut Vec<String>, rng: &mut Rng) {
    let mut mlp = MlpStep::new(rng);
    for fusion in [true, false] {
        Gpu::set_fusion(fusion);
        let suffix = if fusion { "" } else { "_unfused" };
        let mut step = || mlp.step();
        let t = time(11, PER_SYNC, &mut step);
        row(
            table,
            &format!("mlp_train_step_b512{suffix}"),
            t * 1e3,
            "ms",
        );
        let before = Gpu::dispatches_recorded();
        step();
        let per_step = Gpu::dispatches_recorded() - before;
        sync();
        if fusion {
            // Where a step's GPU time goes (4 steps; an update left pending by one
            // step runs in the next).
            match Gpu::profile(|| (0..4).for_each(|_| step())) {
                Ok(((), profile)) => println!("\nMLP step profile, 4 steps:\n{profile}\n"),
                Err(e) => println!("no profile: {e}"),
            }
        }
        row(
            table,
            &format!("mlp_train_step_dispatches{suffix}"),
            per_step as f64,
            "dispatches",
        );
    }
    Gpu::set_fusion(true);
}

/// Times a LeNet Adam step on a batch of 128 (PyTorch's `cnn_train_step_b128`).
fn cnn_rows(table: &mut Vec<String>, rng: &mut Rng) {
    let mut model = LeNet::<Gpu>::new(rng);
    let mut opt = Adam::<Gpu>::new(1e-3);
    let x = Tensor::<Rank4<128, 1, 28, 28>, Gpu>::randn(rng);
    let targets = (0..128).map(|i| (i * 7 % 10) as u32).collect();
    let y = Tensor::<Rank1<128>, Gpu, u32>::from_vec(targets).expect("128 targets");
    let mut step = || {
        let grads = cross_entropy(&model.forward(&x), &y).backward();
        opt.step(&mut model, &grads);
    };
    let t = time(11, PER_SYNC, &mut step);
    row(table, "cnn_train_step_b128", t * 1e3, "ms");
    let before = Gpu::dispatches_recorded();
    step();
    let per_step = Gpu::dispatches_recorded() - before;
    sync();
    match Gpu::profile(|| (0..4).for_each(|_| step())) {
        Ok(((), profile)) => println!("\nLeNet step profile, 4 steps:\n{profile}\n"),
        Err(e) => println!("no profile: {e}"),
    }
    row(
        table,
        "cnn_train_step_dispatches",
        per_step as f64,
        "dispatches",
    );
}

/// Dispatch overhead: 1000 dependent small ops recorded, then one sync, unfused
/// (each op a dispatch), then fused; and the host's share, recording alone
/// (median of 21 runs after a warm-up, with the pool and pipelines warm).
fn record_rows(table: &mut Vec<String>, rng: &mut Rng) {
    let small = raw(randn(64, rng), &[8, 8]);
    let thousand = || record_thousand(&small);
    Gpu::set_fusion(false);
    let t = time(7, 1, || drop(thousand()));
    row(
        table,
        "dispatch_overhead_1000_small_ops",
        t / 1000.0 * 1e6,
        "us/op",
    );
    // The host's share: recording alone, without waiting for the GPU.
    let mut records: Vec<f64> = (0..24)
        .map(|_| {
            sync();
            let start = Instant::now();
            let y = thousand();
            let record = start.elapsed().as_secs_f64();
            drop(y);
            record
        })
        .skip(3)
        .collect();
    sync();
    records.sort_by(f64::total_cmp);
    println!(
        "  (record runs {:.2}..{:.2} us/op)",
        records[0] / 1000.0 * 1e6,
        records[records.len() - 1] / 1000.0 * 1e6
    );
    row(
        table,
        "record_only_1000_small_ops",
        records[records.len() / 2] / 1000.0 * 1e6,
        "us/op",
    );
    // The GPU's own cost per dispatch: the same ops captured once and replayed
    // (the host re-issues recorded launches), chained through one tensor, then
    // independent (each reads `small`), where no barrier separates dispatches.
    let (chained, graph) = Gpu::capture(thousand);
    let graph = graph.expect("a capture on the GPU");
    let t = time(7, 1, || {
        Gpu::replay(&graph);
        sync();
    });
    row(table, "replay_1000_chained_ops", t / 1000.0 * 1e6, "us/op");
    drop((chained, graph));
    let (independent, graph) = Gpu::capture(|| {
        (0..1000)
            .map(|_| small.scalar(BinaryOp::Mul, 0.999))
            .collect::<Vec<_>>()
    });
    let graph = graph.expect("a capture on the GPU");
    let t = time(7, 1, || {
        Gpu::replay(&graph);
        sync();
    });
    row(
        table,
        "replay_1000_independent_ops",
        t / 1000.0 * 1e6,
        "us/op",
    );
    drop((independent, graph));
    Gpu::set_fusion(true);
    let t = time(7, 1, || thousand().buffer().realize());
    row(table, "1000_small_ops_fused", t / 1000.0 * 1e6, "us/op");
}

/// 1000 dependent small ops. A function of its own so that a profiler can
/// count the host's recording cost alone, e.g.
/// `valgrind --tool=callgrind --toggle-collect='*record_thousand*' bench_gpu --record`.
#[inline(never)]
fn record_thousand(small: &RawTensor<Gpu, f32>) -> RawTensor<Gpu, f32> {
    let mut y = small.clone();
    for i in 0..1000 {
        let op = if i % 2 == 0 {
            BinaryOp::Mul
        } else {
            BinaryOp::Add
        };
        y = y.scalar(op, 0.999);
    }
    y
}

/// Prints and keeps a result line, with the spread of the measurement behind it.
fn row(table: &mut Vec<String>, name: &str, value: f64, unit: &str) {
    let mut line = format!("{name:40} {value:12.3} {unit}");
    if let Some(spread) = LAST_TIMING.lock().unwrap().take() {
        line = format!("{line:62} ({spread})");
    }
    println!("{line}");
    table.push(line);
}

/// Softmax and RMSNorm (as primitive ops) over rows of 4096², with fusion and
/// without (`--rows` runs these alone).
fn row_op_rows(table: &mut Vec<String>, rng: &mut Rng, quick: bool) {
    let r = if quick { 512 } else { 4096 };
    let x = raw(randn(r * r, rng), &[r, r]);
    let w = raw(randn(r, rng), &[1, r]);
    let rms = || {
        let ms = x.binary(BinaryOp::Mul, &x).mean_axis(1);
        let inv = ms
            .scalar(BinaryOp::Add, 1e-6)
            .unary(UnaryOp::Sqrt)
            .unary(UnaryOp::Recip);
        x.binary(BinaryOp::Mul, &inv.expand(&[r, r]))
            .binary(BinaryOp::Mul, &w.expand(&[r, r]))
    };
    let rms_unweighted = || {
        let ms = x.binary(BinaryOp::Mul, &x).mean_axis(1);
        let inv = ms
            .scalar(BinaryOp::Add, 1e-6)
            .unary(UnaryOp::Sqrt)
            .unary(UnaryOp::Recip);
        x.binary(BinaryOp::Mul, &inv.expand(&[r, r]))
    };
    let row_bytes = 2.0 * (r * r) as f64 * 4.0;
    for fusion in [true, false] {
        Gpu::set_fusion(fusion);
        let suffix = if fusion { "" } else { "_unfused" };
        let t = time(7, PER_SYNC, || x.softmax(1).buffer().realize());
        row(
            table,
            &format!("softmax_4096x4096{suffix}"),
            row_bytes / t / 1e9,
            "GB/s",
        );
        let t = time(7, PER_SYNC, || rms().buffer().realize());
        row(
            table,
            &format!("rmsnorm_4096x4096_eager{suffix}"),
            row_bytes / t / 1e9,
            "GB/s",
        );
        if fusion {
            // Diagnostics: the same kernel without the weight, which every row
            // reads again (where the two differ, the weight's loads cost), and
            // the GPU time of each kernel.
            let t = time(7, PER_SYNC, || rms_unweighted().buffer().realize());
            println!("  rmsnorm without weight: {:.1} GB/s", row_bytes / t / 1e9);
            profile_product(|| rms().buffer().realize());
            profile_product(|| x.softmax(1).buffer().realize());
        }
    }
    Gpu::set_fusion(true);
    drop((x, w));
}

fn main() {
    let args = Args::parse();
    SKIP_SWEEPS.store(args.defaults, Ordering::Relaxed);
    let quick = args.quick;
    let info = Gpu::init().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    println!("adapter: {info}");
    let mut rng = Rng::seed(0);
    if args.mlp {
        mlp_diagnostics(&mut rng);
        return;
    }
    if args.rows {
        row_op_rows(&mut Vec::new(), &mut rng, quick);
        return;
    }
    if args.record {
        record_rows(&mut Vec::new(), &mut rng);
        return;
    }
    if args.first_use_probe {
        first_use_probe(&mut rng);
        return;
    }
    if args.pool_probe {
        pool_probe(&mut rng);
        return;
    }
    if args.probe {
        probe(&mut rng);
        return;
    }
    if args.tensor_cores {
        let mut table = Vec::new();
        tensor_core_rows(&mut table, &mut rng, &[1024, 2048, 4096]);
        return;
    }
    if args.gemm_f32 {
        gemm_rows(&mut Vec::new(), &mut rng, &[1024, 2048, 4096]);
        return;
    }
    if args.gemm {
        let mut table = Vec::new();
        let sizes: &[usize] = if quick {
            &[256, 512]
        } else {
            &[1024, 2048, 4096]
        };
        gemm_rows(&mut table, &mut rng, sizes);
        tensor_core_rows(&mut table, &mut rng, sizes);
        println!(
            "\nmatmul tuning {}: {} product classes timed (Gpu::set_autotune)",
            if Gpu::autotune().unwrap_or(false) {
                "on"
            } else {
                "off"
            },
            Gpu::matmul_classes_tuned()
        );
        println!("\n== volta on {} ({}) ==", info.name, info.backend);
        for line in &table {
            println!("{line}");
        }
        return;
    }
    if args.cnn {
        let mut table = Vec::new();
        cnn_rows(&mut table, &mut rng);
        return;
    }
    if args.train {
        let mut table = Vec::new();
        mlp_rows(&mut table, &mut rng);
        cnn_rows(&mut table, &mut rng);
        println!("\n== volta on {} ({}) ==", info.name, info.backend);
        for line in &table {
            println!("{line}");
        }
        return;
    }
    let mut table = Vec::new();
    // relu(a*b+c) on 64M elements: fused (one kernel: reads each input once, writes
    // once), then unfused (three kernels, as PyTorch eager runs it). Fused results
    // are pending until realized: `realize` records the kernel without waiting.
    let n = if quick { 1 << 20 } else { 1 << 26 };
    let (a, b, c) = (
        raw(randn(n, &mut rng), &[n]),
        raw(randn(n, &mut rng), &[n]),
        raw(randn(n, &mut rng), &[n]),
    );
    let chain = || {
        let y = a
            .binary(BinaryOp::Mul, &b)
            .binary(BinaryOp::Add, &c)
            .unary(UnaryOp::Relu);
        y.buffer().realize();
    };
    let min_bytes = 4.0 * n as f64 * 4.0;
    println!("\nelementwise launch sweep (relu(a*b+c) fused, GB/s of min bytes):");
    for &launch in sweep(&Launch::CANDIDATES) {
        if Gpu::set_elementwise_launch(Some(launch)).is_err() {
            continue;
        }
        let t = time(7, PER_SYNC, chain);
        println!("  {launch:?}: {:8.1}", min_bytes / t / 1e9);
    }
    Gpu::set_elementwise_launch(None).unwrap();
    println!("\ndiagnostics (relu(a*b+c) fused): per-run batching, pool misses, host time");
    for per_run in [1, 5, 20] {
        let created = Gpu::buffers_created();
        let t = time(7, per_run, chain);
        println!(
            "  {per_run:2} per sync: {:8.1} GB/s(min bytes), {} new buffers",
            min_bytes / t / 1e9,
            Gpu::buffers_created() - created
        );
    }
    // Round trips: a sync with nothing recorded, and a tiny op read back.
    let tiny = raw(vec![1.0; 4], &[4]);
    let t = time(7, 100, sync);
    println!("  empty sync: {:.1} us", t * 1e6);
    let t = time(7, 100, || drop(tiny.scalar(BinaryOp::Mul, 2.0).to_vec()));
    println!("  tiny op + read back: {:.1} us", t * 1e6);
    sync();
    let start = Instant::now();
    for _ in 0..20 {
        chain();
    }
    let host = start.elapsed().as_secs_f64() / 20.0;
    sync();
    println!("  host recording: {:.1} us/iteration", host * 1e6);
    for fusion in [true, false] {
        Gpu::set_fusion(fusion);
        let t = time(7, PER_SYNC, chain);
        let name = if fusion { "fused" } else { "eager" };
        row(
            &mut table,
            &format!("eltwise_relu(a*b+c)_64M_{name}"),
            min_bytes / t / 1e9,
            "GB/s(min bytes)",
        );
    }
    Gpu::set_fusion(true);
    // One read and one write per element: the kernel against the copy ceiling.
    let t = time(7, PER_SYNC, || {
        a.scalar(BinaryOp::Mul, 1.5).buffer().realize()
    });
    row(
        &mut table,
        "eltwise_scale_64M(copy-like)",
        2.0 * n as f64 * 4.0 / t / 1e9,
        "GB/s",
    );
    drop((a, b, c));

    row_op_rows(&mut table, &mut rng, quick);

    record_rows(&mut table, &mut rng);

    // MLP training step, Adam, batch 512, with fusion and without. The pool still
    // holds the large buffers of the sections above; releasing them here keeps
    // their release out of the timed steps.
    let released = Gpu::empty_cache();
    println!("\nreleased {} MiB of cached buffers", released >> 20);
    mlp_rows(&mut table, &mut rng);
    Gpu::set_fusion(true);
    cnn_rows(&mut table, &mut rng);

    let sizes: &[usize] = if quick {
        &[256, 512]
    } else {
        &[1024, 2048, 4096]
    };
    gemm_rows(&mut table, &mut rng, sizes);
    tensor_core_rows(&mut table, &mut rng, sizes);

    println!("\nMLP step by configuration, after the other sections:");
    mlp_diagnostics(&mut rng);
    println!("\n== volta on {} ({}) ==", info.name, info.backend);
    for line in &table {
        println!("{line}");
    }
}

/// f32 GEMM: sweeps the tile candidates at every size, checks each against the
/// CPU at the first size, then reports the default choice.
fn gemm_rows(table: &mut Vec<String>, rng: &mut Rng, sizes: &[usize]) {
    println!("\nmatmul tile sweep (TFLOP/s; error vs CPU at the first size):");
    for &n in sizes {
        let (a, b) = (randn(n * n, rng), randn(n * n, rng));
        let (ga, gb) = (raw(a.clone(), &[n, n]), raw(b.clone(), &[n, n]));
        let flops = 2.0 * (n as f64).powi(3);
        // At least 8 products per sync: a sync (20–50 µs) is 4–10% of one f16 4096³.
        let per_run = (4096 / n).pow(2).clamp(8, 64);
        for &tiles in sweep(&MatmulTiles::CANDIDATES) {
            if Gpu::set_matmul_tiles(Some(tiles)).is_err() {
                continue;
            }
            let err = if n == sizes[0] {
                format!("  max rel err {:.1e}", gemm_error(n, &a, &b, &ga, &gb))
            } else {
                String::new()
            };
            let t = time(5, per_run, || drop(ga.matmul(&gb)));
            println!(
                "  n={n:5} bm{:3} bn{:3} bk{:2} tm{:2} tn{:2} warp{} {:8?}: {:7.2}{err}",
                tiles.bm,
                tiles.bn,
                tiles.bk,
                tiles.tm,
                tiles.tn,
                tiles.warp_cols,
                tiles.staging,
                flops / t / 1e12
            );
        }
        Gpu::set_matmul_tiles(None).unwrap();
        let t = time(7, per_run, || drop(ga.matmul(&gb)));
        row(
            table,
            &format!("matmul_f32_{n}"),
            flops / t / 1e12,
            "TFLOP/s",
        );
    }
    // The training steps' products: the MLP's (batch 512) forward and both
    // backward products (a transposed operand each), and a batched product.
    let shapes: [(&str, [usize; 4], bool, bool); 7] = [
        ("mlp_fwd_512x784x1024", [1, 512, 784, 1024], false, false),
        ("mlp_fwd_512x1024x1024", [1, 512, 1024, 1024], false, false),
        ("mlp_fwd_512x1024x10", [1, 512, 1024, 10], false, false),
        ("mlp_dw_784x512x1024_at", [1, 784, 512, 1024], true, false),
        ("mlp_dw_1024x512x1024_at", [1, 1024, 512, 1024], true, false),
        ("mlp_dx_512x1024x784_bt", [1, 512, 1024, 784], false, true),
        ("batched_64x256x64x256", [64, 256, 64, 256], false, false),
    ];
    for (name, [batch, m, k, n], at, bt) in shapes {
        // Stored as the product's operands are in training: Xᵀ and Wᵀ are views.
        let a = if at {
            raw(randn(batch * m * k, rng), &[batch, k, m]).transpose_last()
        } else {
            raw(randn(batch * m * k, rng), &[batch, m, k])
        };
        let b = if bt {
            raw(randn(batch * k * n, rng), &[batch, n, k]).transpose_last()
        } else {
            raw(randn(batch * k * n, rng), &[batch, k, n])
        };
        let flops = 2.0 * (batch * m * k * n) as f64;
        let t = time(7, 16, || drop(a.matmul(&b)));
        row(
            table,
            &format!("matmul_{name}"),
            flops / t / 1e12,
            "TFLOP/s",
        );
    }
}

/// `--pool-probe`: which buffers make a product slow after other work has filled
/// the pool (H100, 2026-11-23: 3–4× slower kernels until `Gpu::empty_cache`). The
/// same f16 product is timed fresh; after f32 GEMMs (new output buffers from the
/// pool, same operands); on operands uploaded again (into pooled buffers); and
/// after releasing the pool.
fn pool_probe(rng: &mut Rng) {
    let n = 2048;
    let half = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    let upload = |rng: &mut Rng| {
        (
            RawTensor::<Gpu, f16>::from_vec(half(randn(n * n, rng)), &[n, n]),
            RawTensor::<Gpu, f16>::from_vec(half(randn(n * n, rng)), &[n, n]),
        )
    };
    let flops = 2.0 * (n as f64).powi(3);
    let probe = |what: &str, a: &RawTensor<Gpu, f16>, b: &RawTensor<Gpu, f16>| {
        let t = time(7, 4, || drop(a.matmul(b)));
        println!(
            "{what:50} {:8.1} TFLOP/s  {}",
            flops / t / 1e12,
            Gpu::memory()
        );
    };
    let (a, b) = upload(rng);
    probe("fresh", &a, &b);
    for m in [1024, 2048, 4096, 2048, 1024] {
        let x = raw(randn(m * m, rng), &[m, m]);
        for _ in 0..3 {
            drop(x.matmul(&x));
        }
        sync();
    }
    probe("after f32 GEMMs, same operands", &a, &b);
    let (a2, b2) = upload(rng);
    probe("after f32 GEMMs, operands uploaded again", &a2, &b2);
    drop((a2, b2));
    println!("released {} MiB", Gpu::empty_cache() >> 20);
    probe("after empty_cache, same operands", &a, &b);
    let (a3, b3) = upload(rng);
    probe("after empty_cache, operands uploaded again", &a3, &b3);
}

/// `--first-use-probe`: products right after their pipeline is created, timed
/// every 0.25 s for 12 s (first processes on a fresh H100 ran some tensor-core
/// rows 4× slower than later processes did).
fn first_use_probe(rng: &mut Rng) {
    let start = Instant::now();
    let half = |v: Vec<f32>| v.into_iter().map(f16::from_f32).collect::<Vec<_>>();
    let n = 2048;
    let (a, b) = (
        RawTensor::<Gpu, f16>::from_vec(half(randn(n * n, rng)), &[n, n]),
        RawTensor::<Gpu, f16>::from_vec(half(randn(n * n, rng)), &[n, n]),
    );
    let (fa, fb) = (
        raw(randn(n * n, rng), &[n, n]),
        raw(randn(n * n, rng), &[n, n]),
    );
    let flops = 2.0 * (n as f64).powi(3);
    for (what, precision) in [
        ("f16", MatmulPrecision::Full),
        ("f32 half", MatmulPrecision::Half),
    ] {
        Gpu::set_matmul_precision(precision);
        let product = || match precision {
            MatmulPrecision::Full => drop(a.matmul(&b)),
            _ => drop(fa.matmul(&fb)),
        };
        let created = Instant::now();
        product();
        sync();
        println!(
            "{what}: first product (with pipeline creation) {:.1} ms",
            created.elapsed().as_secs_f64() * 1e3
        );
        while created.elapsed().as_secs_f64() < 12.0 {
            let t = Instant::now();
            for _ in 0..8 {
                product();
            }
            sync();
            let per = t.elapsed().as_secs_f64() / 8.0;
            println!(
                "  {what} {n}² at {:6.2} s since creation ({:6.2} s since start): {:7.1} TFLOP/s",
                created.elapsed().as_secs_f64(),
                start.elapsed().as_secs_f64(),
                flops / per / 1e12
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }
    Gpu::set_matmul_precision(MatmulPrecision::Full);
}

/// The kernels of one product and their GPU time, where timestamps are available.
fn profile_product(product: impl FnOnce()) {
    if let Ok(((), profile)) = Gpu::profile(product) {
        for line in profile.to_string().lines() {
            println!("    {line}");
        }
    }
}

/// Largest |x − reference| relative to the largest |reference|.
fn rel_error(x: &[f32], reference: &[f32]) -> f64 {
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
    let err = x
        .iter()
        .zip(reference)
        .fold(0f64, |m, (x, y)| m.max((x - y).abs() as f64));
    err / scale
}

/// Tensor cores (adapters with cooperative matrices): the f16 GEMM with a sweep of
/// the tile candidates, each checked against the f32 product of the same
/// f16-rounded operands; then f32 products in half precision
/// (`MatmulPrecision::Half`) and their error against full precision.
fn tensor_core_rows(table: &mut Vec<String>, rng: &mut Rng, sizes: &[usize]) {
    if !Gpu::init().is_ok_and(|i| i.tensor_cores) {
        println!("\nno tensor cores on this adapter: f16 products run on the f32 kernel");
        return;
    }
    // Diagnostic: reused pooled buffers were seen to slow these kernels 3–4×
    // (H100, 2026-11-23); `VOLTA_BENCH_EMPTY_POOL=1` starts the rows on fresh ones.
    if std::env::var_os("VOLTA_BENCH_EMPTY_POOL").is_some() {
        println!("memory before: {}", Gpu::memory());
        println!("released {} MiB", Gpu::empty_cache() >> 20);
    }
    println!("\ntensor-core f16 matmul sweep (TFLOP/s, max rel err vs f32 product):");
    for &n in sizes {
        let (a, b) = (randn(n * n, rng), randn(n * n, rng));
        let half = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let (ah, bh) = (half(&a), half(&b));
        let rounded = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
        // The reference: the f32 kernel on the rounded operands.
        let reference = raw(rounded(&ah), &[n, n])
            .matmul(&raw(rounded(&bh), &[n, n]))
            .to_vec();
        let (ga, gb) = (
            RawTensor::<Gpu, f16>::from_vec(ah, &[n, n]),
            RawTensor::<Gpu, f16>::from_vec(bh, &[n, n]),
        );
        let flops = 2.0 * (n as f64).powi(3);
        // At least 8 products per sync: a sync (20–50 µs) is 4–10% of one f16 4096³.
        let per_run = (4096 / n).pow(2).clamp(8, 64);
        let err = || rel_error(&rounded(&ga.matmul(&gb).to_vec()), &reference);
        for &tiles in sweep(&CoopTiles::CANDIDATES) {
            if Gpu::set_tensor_core_tiles(Some(tiles)).is_err() {
                continue;
            }
            let e = err();
            let t = time(5, per_run, || drop(ga.matmul(&gb)));
            println!(
                "  n={n:5} {}x{} subgroups of {}x{} fragments, bk{:2} pad{:2} {:8?}: {:7.2}  err {e:.1e}",
                tiles.wm,
                tiles.wn,
                tiles.fm,
                tiles.fn_,
                tiles.bk,
                tiles.pad,
                tiles.staging,
                flops / t / 1e12
            );
        }
        Gpu::set_tensor_core_tiles(None).unwrap();
        let t = time(7, per_run, || drop(ga.matmul(&gb)));
        row(
            table,
            &format!("matmul_f16_{n}"),
            flops / t / 1e12,
            "TFLOP/s",
        );
        println!("  default tiles: max rel err {:.1e}", err());
        profile_product(|| ga.matmul(&gb).buffer().realize());
        // f32 operands on tensor cores.
        let (fa, fb) = (raw(a, &[n, n]), raw(b, &[n, n]));
        let full = fa.matmul(&fb).to_vec();
        Gpu::set_matmul_precision(MatmulPrecision::Half);
        let t = time(7, per_run, || drop(fa.matmul(&fb)));
        profile_product(|| fa.matmul(&fb).buffer().realize());
        row(
            table,
            &format!("matmul_f32_half_precision_{n}"),
            flops / t / 1e12,
            "TFLOP/s",
        );
        println!(
            "  half precision: max rel err {:.1e} vs full",
            rel_error(&fa.matmul(&fb).to_vec(), &full)
        );
        Gpu::set_matmul_precision(MatmulPrecision::Full);
    }
}

/// `--mlp`: the MLP step with fusion and split-K each on and off: wall time, host
/// recording time, buffers created and GPU time per step.
fn mlp_diagnostics(rng: &mut Rng) {
    let mut mlp = MlpStep::new(rng);
    println!("fusion split  wall ms  record ms  new buffers  GPU ms");
    for (fusion, split) in [(true, true), (false, true), (true, false), (false, false)] {
        Gpu::set_fusion(fusion);
        Gpu::set_matmul_split_k(split);
        let mut step = || mlp.step();
        let created = Gpu::buffers_created();
        let wall = time(7, PER_SYNC, &mut step);
        let created = Gpu::buffers_created() - created;
        sync();
        let start = Instant::now();
        for _ in 0..PER_SYNC {
            step();
        }
        let record = start.elapsed().as_secs_f64() / PER_SYNC as f64;
        sync();
        let gpu = Gpu::profile(|| (0..4).for_each(|_| step()))
            .map(|((), p)| p.total().as_secs_f64() / 4.0)
            .unwrap_or(f64::NAN);
        println!(
            "{fusion:6} {split:5} {:8.3} {:10.3} {created:12} {:7.3}",
            wall * 1e3,
            record * 1e3,
            gpu * 1e3
        );
    }
    Gpu::set_fusion(true);
    Gpu::set_matmul_split_k(true);
}

/// `--probe`: square products with tiles that need not be candidates, to try new
/// ones without rebuilding: `VOLTA_PROBE_F32` lists f32 tiles as
/// `bm,bn,bk,tm,tn,S,warp_cols;…` (S: P prefetch, D direct, W double),
/// `VOLTA_PROBE_COOP` tensor-core tiles as `wm,wn,fm,fn,bk,pad,S;…`, at the sizes in
/// `VOLTA_PROBE_SIZES` (`n` for n×n×n, `MxKxN` for others; default 2048,4096). Each
/// is checked against the default tiles' result; `default` in a list times the
/// tiles Volta picks itself, and `VOLTA_PROBE_SPLIT=0` keeps products from
/// splitting K.
fn probe(rng: &mut Rng) {
    use volta::backend::gpu::Staging;
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // `n` for an n×n×n product, `MxKxN` for any other.
    let sizes: Vec<[usize; 3]> = var("VOLTA_PROBE_SIZES")
        .split(',')
        .filter_map(|s| {
            let d: Vec<usize> = s.split('x').filter_map(|d| d.trim().parse().ok()).collect();
            match d[..] {
                [n] => Some([n, n, n]),
                [m, k, n] => Some([m, k, n]),
                _ => None,
            }
        })
        .collect();
    let sizes = if sizes.is_empty() {
        vec![[2048; 3], [4096; 3]]
    } else {
        sizes
    };
    let staging = |s: &str| match s {
        "P" => Staging::Prefetch,
        "D" => Staging::Direct,
        _ => Staging::Double,
    };
    // Numbers, one letter for the staging, then numbers again; `default` for the
    // tiles Volta chooses itself (None).
    let specs = |k: &str| -> Vec<Option<(Vec<u32>, Staging)>> {
        var(k)
            .split(';')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                if s.trim() == "default" {
                    return None;
                }
                let f: Vec<&str> = s.split(',').map(str::trim).collect();
                let at = f
                    .iter()
                    .position(|x| x.parse::<u32>().is_err())
                    .unwrap_or_else(|| panic!("{k}: no staging letter in `{s}`"));
                let nums = f[..at].iter().chain(&f[at + 1..]);
                let nums = nums.map(|x| x.parse().unwrap_or_else(|_| panic!("{k}: `{s}`")));
                Some((nums.collect(), staging(f[at])))
            })
            .collect()
    };
    // `VOLTA_PROBE_SPLIT=0`: products never split K (`Gpu::set_matmul_split_k`).
    let split = var("VOLTA_PROBE_SPLIT") != "0";
    Gpu::set_matmul_split_k(split);
    println!("split-K {}", if split { "on" } else { "off" });
    let f32_specs = specs("VOLTA_PROBE_F32");
    let coop_specs = specs("VOLTA_PROBE_COOP");
    for &[m, k, n] in &sizes {
        let (a, b) = (randn(m * k, rng), randn(k * n, rng));
        let flops = 2.0 * (m * k * n) as f64;
        let per_run = ((4096f64.powi(3) / (m * k * n) as f64) as usize).clamp(8, 64);
        let (ga, gb) = (raw(a.clone(), &[m, k]), raw(b.clone(), &[k, n]));
        let shape = format!("{m}x{k}x{n}");
        let reference = ga.matmul(&gb).to_vec();
        for spec in &f32_specs {
            let tiles = spec.as_ref().map(|(v, st)| MatmulTiles {
                bm: v[0],
                bn: v[1],
                bk: v[2],
                tm: v[3],
                tn: v[4],
                staging: *st,
                warp_cols: v.get(5).copied().unwrap_or(0),
            });
            if let Err(e) = Gpu::set_matmul_tiles(tiles) {
                println!("  skip {tiles:?}: {e}");
                continue;
            }
            let e = rel_error(&ga.matmul(&gb).to_vec(), &reference);
            let t = time(5, per_run, || drop(ga.matmul(&gb)));
            println!(
                "f32 {shape} {}: {:7.2}  err {e:.1e}",
                label(spec),
                flops / t / 1e12
            );
        }
        Gpu::set_matmul_tiles(None).unwrap();
        if coop_specs.is_empty() {
            continue;
        }
        let half = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let (ha, hb) = (
            RawTensor::<Gpu, f16>::from_vec(half(&a), &[m, k]),
            RawTensor::<Gpu, f16>::from_vec(half(&b), &[k, n]),
        );
        let hreference: Vec<f32> = ha.matmul(&hb).to_vec().iter().map(|x| x.to_f32()).collect();
        for spec in &coop_specs {
            let tiles = spec.as_ref().map(|(v, st)| CoopTiles {
                wm: v[0],
                wn: v[1],
                fm: v[2],
                fn_: v[3],
                bk: v[4],
                pad: v[5],
                staging: *st,
            });
            if let Err(e) = Gpu::set_tensor_core_tiles(tiles) {
                println!("  skip {tiles:?}: {e}");
                continue;
            }
            let got: Vec<f32> = ha.matmul(&hb).to_vec().iter().map(|x| x.to_f32()).collect();
            let e = rel_error(&got, &hreference);
            let t = time(5, per_run, || drop(ha.matmul(&hb)));
            println!(
                "f16 {shape} {}: {:7.2}  err {e:.1e}",
                label(spec),
                flops / t / 1e12
            );
        }
        Gpu::set_tensor_core_tiles(None).unwrap();
    }
}

/// A probe row's name: its numbers and staging, or `default`.
fn label(spec: &Option<(Vec<u32>, volta::backend::gpu::Staging)>) -> String {
    match spec {
        Some((v, st)) => format!("{v:?} {st:?}"),
        None => "default".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &str) -> Result<Args, clap::Error> {
        Args::try_parse_from(argv.split_whitespace())
    }

    /// Every way `scripts/` and the docs run it parses to the flags it names.
    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let a = parse("bench_gpu").unwrap();
        assert!(!(a.quick || a.defaults || a.gemm || a.probe));
        let a = parse("bench_gpu --gemm --defaults").unwrap();
        assert!(a.gemm && a.defaults && !a.gemm_f32);
        let a = parse("bench_gpu --quick --rows").unwrap();
        assert!(a.quick && a.rows);
        for (argv, flag) in [
            ("--defaults", (|a: &Args| a.defaults) as fn(&Args) -> bool),
            ("--mlp", |a| a.mlp),
            ("--rows", |a| a.rows),
            ("--record", |a| a.record),
            ("--first-use-probe", |a| a.first_use_probe),
            ("--pool-probe", |a| a.pool_probe),
            ("--probe", |a| a.probe),
            ("--tensor-cores", |a| a.tensor_cores),
            ("--gemm-f32", |a| a.gemm_f32),
            ("--gemm", |a| a.gemm),
            ("--cnn", |a| a.cnn),
            ("--train", |a| a.train),
            ("--quick", |a| a.quick),
        ] {
            let a = parse(&format!("bench_gpu {argv}")).unwrap_or_else(|e| panic!("{argv}: {e}"));
            assert!(flag(&a), "{argv}");
        }
        // Two sections, or anything else, is clap's error.
        assert!(parse("bench_gpu --gemm --train").is_err());
        assert!(parse("bench_gpu --probe 2048").is_err());
        assert!(parse("bench_gpu --tensor-core").is_err());
    }
}
