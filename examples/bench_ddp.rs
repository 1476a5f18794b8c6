//! Data-parallel training across GPUs, one rank per GPU: the training step of
//! nanoGPT's shakespeare-char GPT (batch 64 × T 256 per rank, the transformer
//! benchmark's configuration), the benchmark MLP (784-1024-1024-10, batch 512)
//! and the main job's digits CNN (batch 32), with the gradient all-reduce
//! overlapping the backward pass and, as the baseline that measures the
//! overlap, after it. Run it at `-np 1` and `-np 2` on the same machine: the
//! ratio of throughputs is the scaling. Rank 0 prints one row per workload, and
//! where the step's time went (the backward pass's recording, the wait for the
//! buckets after it, each bucket's read-back and all-reduce). The PyTorch DDP
//! peer is `scripts/device/ddp_peers.py`.
//!
//! ```text
//! cargo build --release -p volta-examples --features distributed --example bench_ddp
//! mpirun -np 2 target/release/examples/bench_ddp [--quick]
//! ```
use clap::Parser;
use std::time::Instant;
use volta::RawTensor;
use volta::distributed::{DataParallel, ProcessGroup, StepProfile};
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::gpt::{CharGpt, Ids};

#[path = "../train/model.rs"]
mod digits_model;
use digits_model::DigitsCnn;

/// The data-parallel benchmark (run under `mpirun -np N`).
#[derive(Debug, Parser)]
#[command(name = "bench_ddp")]
struct Args {
    /// Small shapes (software GPUs, CI).
    #[arg(long)]
    quick: bool,
    /// Timed steps per row (after three warm-up steps).
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// Only the parts of a step's communication, for the GPT's 43 MB of
    /// gradients: read-back, upload, and MPI's all-reduce two ways.
    #[arg(long)]
    transfers: bool,
    /// Gradient bucket size in MB (default: `DataParallel`'s, 2 MiB).
    #[arg(long)]
    bucket_mb: Option<f64>,
    /// Only the GPT's rows.
    #[arg(long)]
    gpt_only: bool,
}

/// Times the stages of moving `n` f32 gradients between ranks.
fn transfers(group: &ProcessGroup, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    use volta::distributed::mpi::collective::SystemOperation;
    use volta::distributed::mpi::topology::SimpleCommunicator;
    use volta::distributed::mpi::traits::{Communicator, CommunicatorCollectives};
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] * 1e3
    };
    let g = RawTensor::<Gpu, f32>::uniform(&[n], 1);
    Gpu::sync()?;
    // As DataParallel moves a bucket: through host buffers kept from one step
    // to the next.
    let mut host: Vec<f32> = Vec::new();
    let read = med((0..10)
        .map(|_| {
            let t = Instant::now();
            g.try_read_into(&mut host).unwrap();
            t.elapsed().as_secs_f64()
        })
        .collect());
    let upload = med((0..10)
        .map(|_| {
            let t = Instant::now();
            let up = RawTensor::<Gpu, f32>::from_slice(&host, &[n]);
            Gpu::sync().unwrap();
            drop(up);
            t.elapsed().as_secs_f64()
        })
        .collect());
    // MPI_THREAD_MULTIPLE: this thread may use the world while Volta's MPI
    // thread is idle.
    let world = SimpleCommunicator::world();
    let ranks = world.size() as usize;
    let mut out = vec![0f32; n];
    let allreduce = med((0..10)
        .map(|_| {
            world.barrier();
            let t = Instant::now();
            world.all_reduce_into(&host[..], &mut out[..], SystemOperation::sum());
            t.elapsed().as_secs_f64()
        })
        .collect());
    let block = n / ranks;
    let mut mine = vec![0f32; block];
    let scatter_gather = med((0..10)
        .map(|_| {
            world.barrier();
            let t = Instant::now();
            world.reduce_scatter_block_into(
                &host[..block * ranks],
                &mut mine[..],
                SystemOperation::sum(),
            );
            world.all_gather_into(&mine[..], &mut out[..block * ranks]);
            t.elapsed().as_secs_f64()
        })
        .collect());
    if group.is_main() {
        let mb = (n * 4) as f64 / 1e6;
        println!(
            "transfers of {mb:.1} MB: read-back {read:.2} ms, upload {upload:.2} ms, MPI_Allreduce {allreduce:.2} ms, reduce-scatter + all-gather {scatter_gather:.2} ms ({} ranks)",
            ranks
        );
    }
    Ok(())
}

#[derive(Module)]
struct Mlp {
    l1: Linear<784, 1024, Gpu>,
    l2: Linear<1024, 1024, Gpu>,
    l3: Linear<1024, 10, Gpu>,
}

/// Median step seconds and the mean profile of `steps` synced steps of `step`.
fn time(
    steps: usize,
    mut step: impl FnMut() -> StepProfile,
) -> Result<(f64, [f64; 4], usize), Box<dyn std::error::Error>> {
    for _ in 0..3 {
        step();
    }
    Gpu::sync()?;
    let mut times = Vec::new();
    let mut sums = [0.0; 4];
    let mut buckets = 0;
    let mut last = StepProfile::default();
    for _ in 0..steps {
        let t = Instant::now();
        let p = step();
        Gpu::sync()?;
        times.push(t.elapsed().as_secs_f64());
        sums[0] += p.backward.as_secs_f64();
        sums[1] += p.wait.as_secs_f64();
        sums[2] += p.buckets.iter().map(|b| b.read.as_secs_f64()).sum::<f64>();
        sums[3] += p
            .buckets
            .iter()
            .map(|b| b.reduce.as_secs_f64())
            .sum::<f64>();
        buckets = p.buckets.len();
        last = p;
    }
    times.sort_by(f64::total_cmp);
    // `VOLTA_BENCH_BUCKETS=1`: when each bucket of the last step started.
    if std::env::var_os("VOLTA_BENCH_BUCKETS").is_some() {
        for (i, b) in last.buckets.iter().enumerate() {
            eprintln!(
                "    bucket {i}: {} elements, started {:.2} ms into the backward pass, read-back {:.2} ms, all-reduce {:.2} ms",
                b.elements,
                b.started.as_secs_f64() * 1e3,
                b.read.as_secs_f64() * 1e3,
                b.reduce.as_secs_f64() * 1e3
            );
        }
    }
    Ok((
        times[times.len() / 2],
        sums.map(|s| s / steps as f64),
        buckets,
    ))
}

fn report(group: &ProcessGroup, name: &str, samples: usize, r: (f64, [f64; 4], usize)) {
    if !group.is_main() {
        return;
    }
    let (s, [backward, wait, read, reduce], buckets) = r;
    let world = group.world_size();
    println!(
        "{:44} {:9.2} ms {:10.0} samples/s",
        format!("ddp_{name}_np{world}"),
        s * 1e3,
        (samples * world) as f64 / s
    );
    if world > 1 {
        println!(
            "    backward recording {:.2} ms, wait after it {:.2} ms; {buckets} buckets: read-back {:.2} ms, all-reduce {:.2} ms",
            backward * 1e3,
            wait * 1e3,
            read * 1e3,
            reduce * 1e3
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let group = volta::distributed::init()?;
    let info = group.init_gpu()?;
    if group.is_main() {
        println!(
            "{} ranks; rank 0 on {} ({})",
            group.world_size(),
            info.name,
            info.backend
        );
    }
    if args.transfers {
        return transfers(&group, 10_765_056);
    }
    let rank = group.rank() as u64;
    let overlaps: &[bool] = if group.world_size() > 1 {
        &[true, false]
    } else {
        &[true]
    };

    // nanoGPT's shakespeare-char step.
    let (batch, t) = if args.quick { (4, 64) } else { (64, 256) };
    for &overlap in overlaps {
        let mut model =
            DataParallel::new(&group, CharGpt::<Gpu>::new(&mut Rng::seed(0)))?.overlap(overlap);
        if let Some(mb) = args.bucket_mb {
            model = model.bucket_bytes((mb * 1e6) as usize);
        }
        let mut opt = Adam::<Gpu>::adamw(6e-4, 0.1);
        let data: Vec<u32> = (0..batch * (t + 1))
            .map(|i| ((i as u64 * 7919 + rank * 13) % 256) as u32)
            .collect();
        let x: Vec<u32> = data.chunks(t + 1).flat_map(|c| c[..t].to_vec()).collect();
        let y: Vec<u32> = data.chunks(t + 1).flat_map(|c| c[1..].to_vec()).collect();
        let x = Ids::<Gpu>::from_vec_shaped(x, (batch, t))?;
        let y = Tensor::<(usize,), Gpu, u32>::from_vec_shaped(y, (batch * t,))?;
        let r = time(args.steps, || {
            let logits = model.forward(&x);
            let rows = Tensor::<(usize, Const<256>), Gpu>::try_from_raw(
                logits.raw().reshape(&[batch * t, 256]),
            )
            .expect("rows of 256 logits");
            let grads = model
                .backward(cross_entropy(&rows, &y))
                .expect("the collectives work");
            opt.step(&mut model, &grads);
            model.profile().clone()
        })?;
        let name = format!(
            "gpt_step_B{batch}_T{t}{}",
            if overlap { "" } else { "_no_overlap" }
        );
        report(&group, &name, batch, r);
    }

    if args.gpt_only {
        return Ok(());
    }

    // The benchmark MLP.
    let batch = if args.quick { 64 } else { 512 };
    for &overlap in overlaps {
        let mut rng = Rng::seed(0);
        let mlp = Mlp {
            l1: Linear::new(&mut rng),
            l2: Linear::new(&mut rng),
            l3: Linear::new(&mut rng),
        };
        let mut model = DataParallel::new(&group, mlp)?.overlap(overlap);
        let mut opt = Adam::<Gpu>::new(1e-3);
        let mut data = Rng::seed(rank + 1);
        let x = Tensor::<(usize, Const<784>), Gpu>::from_vec_shaped(
            (0..batch * 784).map(|_| data.normal() as f32).collect(),
            (batch, Const),
        )?;
        let y = Tensor::<(usize,), Gpu, u32>::from_vec_shaped(
            (0..batch).map(|i| (i * 7 % 10) as u32).collect(),
            (batch,),
        )?;
        let r = time(args.steps, || {
            let h = model.l2.forward(&model.l1.forward(&x).relu()).relu();
            let loss = cross_entropy(&model.l3.forward(&h), &y);
            let grads = model.backward(loss).expect("the collectives work");
            opt.step(&mut model, &grads);
            model.profile().clone()
        })?;
        let name = format!(
            "mlp_step_B{batch}{}",
            if overlap { "" } else { "_no_overlap" }
        );
        report(&group, &name, batch, r);
    }

    // The main job's digits CNN.
    let batch = 32;
    for &overlap in overlaps {
        let mut model =
            DataParallel::new(&group, DigitsCnn::<Gpu>::new(&mut Rng::seed(0)))?.overlap(overlap);
        let mut opt = Adam::<Gpu>::adamw(3e-3, 1e-4);
        let mut data = Rng::seed(rank + 1);
        let x = Tensor::<(usize, Const<1>, Const<8>, Const<8>), Gpu>::from_vec_shaped(
            (0..batch * 64).map(|_| data.uniform() as f32).collect(),
            (batch, Const, Const, Const),
        )?;
        let y = Tensor::<(usize,), Gpu, u32>::from_vec_shaped(
            (0..batch).map(|i| (i % 10) as u32).collect(),
            (batch,),
        )?;
        let r = time(args.steps, || {
            let loss = cross_entropy(&model.forward(&x), &y);
            let grads = model.backward(loss).expect("the collectives work");
            opt.step(&mut model, &grads);
            model.profile().clone()
        })?;
        let name = format!(
            "digits_cnn_step_B{batch}{}",
            if overlap { "" } else { "_no_overlap" }
        );
        report(&group, &name, batch, r);
    }
    Ok(())
}
