//! The training run: data, model, optimiser and schedule, the epoch loop with its
//! progress bar, evaluation, checkpoints, metrics and the plot.
use crate::args::{Args, DeviceChoice};
use crate::history::{self, EpochRecord};
use crate::model::DigitsCnn;
use crate::plot;
use crate::progress::progress;
use crate::ranks::Ranks;
use std::error::Error;
use std::fmt;
use std::path::PathBuf;
use std::time::Instant;
use volta::data::readers::digits;
use volta::data::{DataLoader, Labelled};
use volta::io::{self, Metadata};
use volta::nn::loss::cross_entropy_smoothed;
use volta::nn::metrics::ConfusionMatrix;
use volta::optim::{CosineWarmup, LrSchedule, clip_grad_norm};
use volta::prelude::*;

/// Images per training step.
const BATCH: usize = 32;
/// Images per evaluation batch.
const EVAL_BATCH: usize = 512;
/// Share of the images held out for testing.
const TEST_FRACTION: f64 = 0.2;
/// AdamW's peak learning rate and decoupled weight decay.
const LR: f64 = 3e-3;
const WEIGHT_DECAY: f64 = 1e-4;
/// Label smoothing of the training loss.
const SMOOTHING: f64 = 0.05;
/// Gradients are scaled down to this global norm when above it.
const MAX_GRAD_NORM: f64 = 5.0;

/// The files a run writes into `--out`.
struct Files {
    checkpoint: PathBuf,
    metrics: PathBuf,
    plot: PathBuf,
}

impl Files {
    fn in_dir(out: &std::path::Path) -> Self {
        Files {
            checkpoint: out.join("checkpoint.safetensors"),
            metrics: out.join("metrics.csv"),
            plot: out.join("curves.png"),
        }
    }
}

/// What a finished run reports.
pub struct Report {
    /// Every epoch's figures, resumed ones included.
    pub records: Vec<EpochRecord>,
    /// The final test-set confusion matrix.
    pub confusion: ConfusionMatrix,
    /// Seconds spent in this process's epochs (training and evaluation).
    pub seconds: f64,
    /// Whether this process is the one that reports (rank 0).
    pub main: bool,
    files: Files,
}

impl Report {
    /// The last epoch's test accuracy.
    pub fn accuracy(&self) -> f64 {
        self.records.last().map_or(0.0, |r| r.test_accuracy)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\ntest-set confusion matrix (rows: true digit, columns: predicted):"
        )?;
        writeln!(f, "{}", self.confusion)?;
        writeln!(
            f,
            "test accuracy {:.2}% after {} epochs; training took {:.1} s",
            100.0 * self.accuracy(),
            self.records.len(),
            self.seconds
        )?;
        writeln!(f, "checkpoint  {}", self.files.checkpoint.display())?;
        writeln!(f, "metrics     {}", self.files.metrics.display())?;
        write!(f, "plot        {}", self.files.plot.display())
    }
}

/// Runs the job `args` describe.
pub fn run(args: &Args) -> Result<Report, Box<dyn Error>> {
    args.check()?;
    let ranks = Ranks::join()?;
    let data_path = args.data_path()?;
    let data = digits::load(&data_path)?;
    let mut rng = Rng::seed(args.seed);
    let (train, test) = data.split(TEST_FRACTION, &mut rng);
    let main = ranks.is_main();
    if main {
        println!(
            "digits: {} training and {} test images of 1×8×8, 10 classes ({})",
            train.len(),
            test.len(),
            data_path.display()
        );
        println!("{}", DigitsCnn::<Cpu>::new(&mut Rng::seed(0)).summary());
    }
    let world = match ranks.world() {
        1 => String::new(),
        n => format!(" × {n} ranks, batch {BATCH} each"),
    };
    match resolve(args.device, &ranks)? {
        Resolved::Cpu => {
            if main {
                println!(
                    "device: CPU ({} threads){world}",
                    rayon::current_num_threads()
                );
            }
            train_on::<Cpu>(args, &ranks, train, test, rng, || None)
        }
        #[cfg(feature = "gpu")]
        Resolved::Gpu(info) => {
            if main {
                println!("device: GPU, {info}{world}");
            }
            // Device memory per epoch: flat after the first once the pool is warm.
            train_on::<Gpu>(args, &ranks, train, test, rng, || {
                Some(Gpu::memory().to_string())
            })
        }
    }
}

/// `--evaluate CHECKPOINT`: the checkpoint's test loss, accuracy and confusion
/// matrix on the `--seed` split, without training.
pub fn evaluate_checkpoint(
    args: &Args,
    checkpoint: &std::path::Path,
) -> Result<(), Box<dyn Error>> {
    let data = digits::load(args.data_path()?)?;
    let (_, test) = data.split(TEST_FRACTION, &mut Rng::seed(args.seed));
    let ranks = Ranks::join()?;
    match resolve(args.device, &ranks)? {
        Resolved::Cpu => evaluate_on::<Cpu>(checkpoint, test, &ranks),
        #[cfg(feature = "gpu")]
        Resolved::Gpu(_) => evaluate_on::<Gpu>(checkpoint, test, &ranks),
    }
}

fn evaluate_on<D: Backend<f32>>(
    checkpoint: &std::path::Path,
    test: Labelled,
    ranks: &Ranks,
) -> Result<(), Box<dyn Error>> {
    let loader = DataLoader::new(test)
        .features::<Rank3<1, 8, 8>>()?
        .batch::<EVAL_BATCH>()
        .shard(ranks.rank(), ranks.world())
        .device::<D>();
    let mut model = DigitsCnn::<D>::new(&mut Rng::seed(0));
    io::load(checkpoint, &mut model)?;
    let (loss, matrix) = evaluate(&mut model, &loader, ranks)?;
    if !ranks.is_main() {
        return Ok(());
    }
    println!("{matrix}");
    println!(
        "test loss {loss:.4}, accuracy {:.4} ({} images) for {}",
        matrix.accuracy(),
        matrix.total(),
        checkpoint.display()
    );
    Ok(())
}

/// Where the run goes.
enum Resolved {
    Cpu,
    #[cfg(feature = "gpu")]
    Gpu(volta::backend::gpu::GpuInfo),
}

/// `auto` takes a hardware GPU (software adapters such as lavapipe are slower than
/// the CPU backend); `gpu` takes any adapter and fails when there is none. Each
/// rank opens its own (the local rank's).
fn resolve(choice: DeviceChoice, ranks: &Ranks) -> Result<Resolved, Box<dyn Error>> {
    #[cfg(feature = "gpu")]
    match choice {
        DeviceChoice::Cpu => Ok(Resolved::Cpu),
        DeviceChoice::Gpu => Ok(Resolved::Gpu(ranks.gpu()?)),
        DeviceChoice::Auto => Ok(match ranks.gpu() {
            Ok(info) if info.device_type != "Cpu" => Resolved::Gpu(info),
            _ => Resolved::Cpu,
        }),
    }
    #[cfg(not(feature = "gpu"))]
    let _ = ranks;
    #[cfg(not(feature = "gpu"))]
    match choice {
        DeviceChoice::Gpu => {
            Err("this build has no GPU backend (build with the `gpu` feature)".into())
        }
        _ => Ok(Resolved::Cpu),
    }
}

fn train_on<D: Backend<f32>>(
    args: &Args,
    ranks: &Ranks,
    train: Labelled,
    test: Labelled,
    mut rng: Rng,
    memory: fn() -> Option<String>,
) -> Result<Report, Box<dyn Error>> {
    std::fs::create_dir_all(&args.out)?;
    let files = Files::in_dir(&args.out);
    let loader = DataLoader::new(train)
        .features::<Rank3<1, 8, 8>>()?
        .batch::<BATCH>()
        .drop_last()
        .shuffle(args.seed)
        .shard(ranks.rank(), ranks.world())
        .device::<D>();
    let test_loader = DataLoader::new(test)
        .features::<Rank3<1, 8, 8>>()?
        .batch::<EVAL_BATCH>()
        .shard(ranks.rank(), ranks.world())
        .device::<D>();
    let main = ranks.is_main();

    let mut model = DigitsCnn::<D>::new(&mut rng);
    let mut opt = Adam::<D>::adamw(LR, WEIGHT_DECAY);
    let steps_per_epoch = loader.len() as u64;
    let epochs = u64::from(args.epochs);
    let schedule = CosineWarmup::new(LR, steps_per_epoch, epochs * steps_per_epoch);

    let mut records = Vec::new();
    let mut first = 1;
    if args.resume {
        let meta = io::load_training(&files.checkpoint, &mut model, &mut opt)?;
        let done: u64 = meta
            .get("epoch")
            .and_then(|e| e.parse().ok())
            .ok_or("the checkpoint has no epoch number")?;
        if meta.get("seed").map(String::as_str) != Some(args.seed.to_string().as_str()) {
            return Err(format!(
                "the checkpoint was trained with seed {}, not {}: pass the same --seed to resume",
                meta.get("seed").map_or("?", String::as_str),
                args.seed
            )
            .into());
        }
        records = history::read(&files.metrics, done as usize)?;
        first = done + 1;
        if main {
            println!(
                "resuming after epoch {done} from {}",
                files.checkpoint.display()
            );
        }
    }
    // Every rank starts from rank 0's model (the same checkpoint when resuming).
    let mut model = ranks.replicate(model)?;

    let start = Instant::now();
    let mut confusion = ConfusionMatrix::new(10);
    // `run` has checked that a stop is not past `--epochs`.
    let last = args.stop_after.map_or(epochs, u64::from);
    for epoch in first..=last {
        model.train();
        let bar = if main {
            progress(epoch, epochs, steps_per_epoch)
        } else {
            indicatif::ProgressBar::hidden()
        };
        let epoch_start = Instant::now();
        let mut loss_sum = Tensor::<(), D>::zeros();
        for (i, batch) in loader.epoch(epoch).enumerate() {
            let step = (epoch - 1) * steps_per_epoch + i as u64;
            opt.set_lr(schedule.lr(step));
            let logits = model.forward(&batch.inputs);
            let loss = cross_entropy_smoothed(&logits, &batch.targets, SMOOTHING);
            let value = loss.detach();
            loss_sum = loss_sum + value.clone();
            let mut grads = model.backward(loss)?;
            clip_grad_norm(&mut grads, MAX_GRAD_NORM);
            opt.step(&mut model, &grads);
            bar.inc(1);
            // Reading the loss waits for the device: once every 10 steps.
            if i % 10 == 9 {
                bar.set_message(format!("loss {:.4}", value.item()));
            }
        }
        bar.finish_and_clear();
        let seconds = epoch_start.elapsed().as_secs_f64();
        let (test_loss, matrix) = evaluate(&mut model, &test_loader, ranks)?;
        confusion = matrix;
        let mut train_loss = [f64::from(loss_sum.item()) / steps_per_epoch as f64];
        ranks.sum(&mut train_loss)?;
        let record = EpochRecord {
            epoch: epoch as usize,
            train_loss: train_loss[0] / ranks.world() as f64,
            test_loss,
            test_accuracy: confusion.accuracy(),
            lr: opt.lr(),
            steps_per_second: steps_per_epoch as f64 / seconds,
        };
        records.push(record.clone());
        if !main {
            continue;
        }
        println!(
            "epoch {:>2}/{epochs}  train loss {:.4}  test loss {:.4}  test accuracy {:.2}%  {:.0} steps/s",
            record.epoch,
            record.train_loss,
            record.test_loss,
            100.0 * record.test_accuracy,
            record.steps_per_second
        );
        if let Some(memory) = memory() {
            println!("          device memory: {memory}");
        }
        let meta = Metadata::from([
            ("epoch".to_string(), epoch.to_string()),
            ("seed".to_string(), args.seed.to_string()),
        ]);
        io::save_training(&files.checkpoint, &mut model, &opt, &meta)?;
        history::write(&files.metrics, &records)?;
    }
    if first > last {
        // Nothing left to train: report the saved model.
        let (_, matrix) = evaluate(&mut model, &test_loader, ranks)?;
        confusion = matrix;
    }
    if main {
        plot::draw(&files.plot, &records)?;
    }
    Ok(Report {
        records,
        confusion,
        seconds: start.elapsed().as_secs_f64(),
        main,
        files,
    })
}

/// Mean test loss (plain cross-entropy) and the confusion matrix, in eval mode,
/// over every rank's share of the test set.
fn evaluate<D: Backend<f32>>(
    model: &mut DigitsCnn<D>,
    loader: &DataLoader<Rank3<1, 8, 8>, volta::data::batching::UpTo<EVAL_BATCH>, D>,
    ranks: &Ranks,
) -> Result<(f64, ConfusionMatrix), Box<dyn Error>> {
    model.eval();
    let _no_grad = no_grad();
    let mut confusion = ConfusionMatrix::new(10);
    let mut total = Tensor::<(), D>::zeros();
    let mut count = 0;
    for batch in loader.epoch(0) {
        let logits = model.forward(&batch.inputs);
        let n = batch.len();
        // Sum, not mean, so that a last partial batch weighs by its size.
        total = total + cross_entropy_smoothed(&logits, &batch.targets, 0.0).mul_scalar(n as f32);
        confusion.update(&logits, &batch.targets);
        count += n;
    }
    model.train();
    // Sums over the ranks: the loss, the count, then the matrix's cells.
    let mut sums = vec![f64::from(total.item()), count as f64];
    sums.extend(confusion.counts().iter().flatten().map(|&c| c as f64));
    ranks.sum(&mut sums)?;
    let cells: Vec<u64> = sums[2..].iter().map(|&c| c as u64).collect();
    let confusion = ConfusionMatrix::from_counts(10, &cells);
    Ok((sums[0] / sums[1], confusion))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(out: &std::path::Path, extra: &[&str]) -> Args {
        let mut argv = vec!["volta-train", "--device", "cpu", "--out"];
        argv.push(out.to_str().expect("a UTF-8 temp path"));
        argv.extend_from_slice(extra);
        Args::try_parse_checked_from(argv).expect("valid arguments")
    }

    /// The main job as the README runs it (on the CPU): it must reach 97%.
    #[test]
    fn the_default_run_reaches_97_percent_and_writes_its_files() {
        let out = std::env::temp_dir().join(format!("volta-train-full-{}", std::process::id()));
        let report = run(&args(&out, &[])).expect("the run succeeds");
        assert!(
            report.accuracy() >= 0.97,
            "test accuracy {}",
            report.accuracy()
        );
        for file in [
            &report.files.checkpoint,
            &report.files.metrics,
            &report.files.plot,
        ] {
            assert!(
                std::fs::metadata(file).is_ok_and(|m| m.len() > 0),
                "{}",
                file.display()
            );
        }
        let png = std::fs::read(&report.files.plot).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::remove_dir_all(&out).unwrap();
    }

    /// A run stopped after two of three epochs and resumed gives the numbers of
    /// three straight epochs.
    #[test]
    fn a_resumed_run_continues_where_it_stopped() {
        let base = std::env::temp_dir().join(format!("volta-train-resume-{}", std::process::id()));
        let straight = run(&args(&base.join("a"), &["--epochs", "3"])).unwrap();
        let stopped = run(&args(
            &base.join("b"),
            &["--epochs", "3", "--stop-after", "2"],
        ))
        .unwrap();
        assert_eq!(stopped.records.len(), 2);
        let resumed = run(&args(&base.join("b"), &["--epochs", "3", "--resume"])).unwrap();
        let figures = |r: &Report| -> Vec<(f64, f64, f64)> {
            r.records
                .iter()
                .map(|e| (e.train_loss, e.test_loss, e.test_accuracy))
                .collect()
        };
        assert_eq!(resumed.records.len(), 3);
        // The first two come back from the metrics file (6 decimals).
        for (a, b) in figures(&resumed)[..2].iter().zip(&figures(&straight)[..2]) {
            assert!(
                (a.0 - b.0).abs() < 1e-5 && (a.1 - b.1).abs() < 1e-5 && (a.2 - b.2).abs() < 1e-6
            );
        }
        // Weights, moments, schedule, batch order and dropout masks all continue:
        // the third epoch is the straight run's, bit for bit.
        assert_eq!(figures(&resumed)[2], figures(&straight)[2]);

        let err = run(&args(&base.join("b"), &["--resume", "--seed", "9"]))
            .err()
            .unwrap();
        assert!(err.to_string().contains("seed"), "{err}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// One rank of the job below (run by `mpirun`, not by the test harness).
    #[cfg(feature = "distributed")]
    #[test]
    #[ignore = "an MPI rank of two_ranks_train_the_main_job_and_one_process_resumes_it"]
    fn rank() {
        let out = std::env::var("VOLTA_TRAIN_OUT").expect("run by its parent test");
        let report = run(&args(
            std::path::Path::new(&out),
            &["--epochs", "2", "--stop-after", "1"],
        ))
        .expect("the rank's run succeeds");
        assert_eq!(
            report.main,
            std::env::var("OMPI_COMM_WORLD_RANK").unwrap() == "0"
        );
    }

    /// `mpirun -np 2` trains the main job's first epoch on two ranks (each
    /// taking half of every batch), and a single process resumes its checkpoint
    /// for the second: a checkpoint does not depend on the number of ranks.
    #[cfg(feature = "distributed")]
    #[test]
    fn two_ranks_train_the_main_job_and_one_process_resumes_it() {
        let out = std::env::temp_dir().join(format!("volta-train-mpi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let stdout = crate::ranks::run_two_ranks("run::tests::rank", &[("VOLTA_TRAIN_OUT", &out)]);
        // Only rank 0 reports.
        assert_eq!(stdout.matches("epoch  1/2").count(), 1, "{stdout}");
        assert!(stdout.contains("× 2 ranks, batch 32 each"), "{stdout}");
        let resumed = run(&args(&out, &["--epochs", "2", "--resume"])).unwrap();
        assert_eq!(resumed.records.len(), 2);
        assert!(resumed.accuracy() > 0.9, "{}", resumed.accuracy());
        std::fs::remove_dir_all(&out).unwrap();
    }
}
