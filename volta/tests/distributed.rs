//! Data-parallel training over MPI. Each test starts `mpirun -np 2` on this very
//! test binary, whose ignored `rank` test is then each rank's program (the case
//! in `VOLTA_DIST_CASE`); the ranks leave their results in files the parent test
//! reads. Needs Open MPI's `mpirun` (scripts/test.sh installs it).
#![cfg(feature = "distributed")]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use volta::data::{DataLoader, Labelled};
use volta::distributed::{DataParallel, DistributedError, ProcessGroup};
use volta::nn::loss::cross_entropy;
use volta::prelude::*;

const CASE: &str = "VOLTA_DIST_CASE";
const DEVICE: &str = "VOLTA_DIST_DEVICE";
const OUT: &str = "VOLTA_DIST_OUT";

/// Samples per rank per step; one process takes twice as many.
const BATCH: usize = 4;
/// Optimiser steps compared.
const STEPS: usize = 12;
/// The timeout of the killed-rank case, in seconds.
const TIMEOUT: u64 = 4;

#[derive(Module)]
struct Mlp<D: Backend<f32>> {
    hidden: Linear<6, 16, D>,
    out: Linear<16, 3, D>,
}

impl<D: Backend<f32>> Mlp<D> {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::seed(seed);
        Mlp {
            hidden: Linear::new(&mut rng),
            out: Linear::new(&mut rng),
        }
    }

    fn forward<B: Dim>(&self, x: &Tensor<(B, Const<6>), D>) -> Tensor<(B, Const<3>), D> {
        self.out.forward(&self.hidden.forward(x).relu())
    }
}

/// A model of another width: what a rank built by mistake.
#[derive(Module)]
struct Wider<D: Backend<f32>> {
    hidden: Linear<6, 17, D>,
    out: Linear<17, 3, D>,
}

/// 61 samples of 6 features in 3 classes (61: the last global batch is partial).
fn data() -> Labelled {
    let mut rng = Rng::seed(11);
    let n = 61;
    let features: Vec<f32> = (0..n * 6).map(|_| rng.normal() as f32).collect();
    let labels = (0..n as u32).map(|i| (i * 7 + 1) % 3).collect();
    Labelled::new(features, &[6], labels, 3).unwrap()
}

fn loader<D: Backend<f32>>(
    batch: usize,
) -> DataLoader<Rank1<6>, volta::data::batching::Dynamic, D> {
    DataLoader::new(data())
        .features::<Rank1<6>>()
        .unwrap()
        .batch_size(batch)
        .drop_last()
        .shuffle(5)
        .device::<D>()
}

fn params<D: Backend<f32>, M: Module<D, f32>>(model: &mut M) -> Vec<f32> {
    model
        .named_params()
        .into_iter()
        .flat_map(|(_, t)| t.to_vec())
        .collect()
}

/// `STEPS` steps of SGD with momentum over epochs of `loader`: with `group`, as
/// one of its ranks (each starts from its own seed: rank 0's values must win).
fn train<D: Backend<f32>>(
    group: Option<&ProcessGroup>,
    batch: usize,
) -> Result<Vec<f32>, DistributedError> {
    let mut opt = Sgd::<D>::new(0.2).with_momentum(0.9);
    let rank = group.map_or(0, ProcessGroup::rank);
    let mut loader = loader::<D>(batch);
    let model = Mlp::<D>::new(100 + rank as u64);
    let mut ddp = match group {
        Some(g) => {
            loader = loader.shard(g.rank(), g.world_size());
            // Small buckets: several all-reduces per step, started mid-backward.
            Some(DataParallel::new(g, model).unwrap().bucket_bytes(256))
        }
        None => None,
    };
    let mut single = if ddp.is_none() {
        Some(Mlp::<D>::new(100))
    } else {
        None
    };
    let mut step = 0;
    for epoch in 0.. {
        for b in loader.epoch(epoch) {
            if step == STEPS {
                return Ok(match (&mut ddp, &mut single) {
                    (Some(m), _) => params(m),
                    (_, Some(m)) => params(m),
                    _ => unreachable!(),
                });
            }
            if let (Some(g), Ok("die")) = (group, std::env::var(CASE).as_deref())
                && g.rank() == 1
                && step == 3
            {
                // Killed mid-step, between its forward and backward passes: by
                // SIGKILL, or SIGABRT where there is no `kill` command.
                let pid = std::process::id().to_string();
                let _ = Command::new("kill").args(["-9", &pid]).status();
                std::process::abort();
            }
            match (&mut ddp, &mut single) {
                (Some(m), _) => {
                    let loss = cross_entropy(&m.forward(&b.inputs), &b.targets);
                    let grads = m.backward(loss)?;
                    opt.step(m, &grads);
                }
                (_, Some(m)) => {
                    let loss = cross_entropy(&m.forward(&b.inputs), &b.targets);
                    let grads = loss.backward();
                    opt.step(m, &grads);
                }
                _ => unreachable!(),
            }
            step += 1;
        }
    }
    unreachable!()
}

/// Writes this rank's result where the parent reads it.
fn report(text: &str) {
    let rank = std::env::var("OMPI_COMM_WORLD_RANK").unwrap_or_default();
    let out = std::env::var(OUT).expect("run by a parent test");
    std::fs::write(format!("{out}.{rank}"), text).unwrap();
}

#[test]
#[ignore = "one MPI rank, started by the tests below through mpirun"]
fn rank() {
    let case = std::env::var(CASE).expect("run by a parent test");
    let group = volta::distributed::init().unwrap();
    assert_eq!(group.world_size(), 2);
    let gpu = std::env::var(DEVICE).as_deref() == Ok("gpu");
    if gpu {
        group.init_gpu().unwrap();
    }
    match case.as_str() {
        "equal" | "die" => {
            let p = if gpu {
                train::<Gpu>(Some(&group), BATCH)
            } else {
                train::<Cpu>(Some(&group), BATCH)
            };
            // A failed collective: reported, then the panic drops the group,
            // which aborts the job (MPI cannot cancel the collective).
            let p = p.unwrap_or_else(|e| {
                report(&format!("error {e:?}"));
                panic!("rank {}: {e}", group.rank())
            });
            let bytes: Vec<String> = p.iter().map(|x| x.to_bits().to_string()).collect();
            report(&bytes.join(" "));
        }
        "mismatch" => {
            let result = if group.rank() == 1 {
                let mut rng = Rng::seed(0);
                let wider = Wider::<Cpu> {
                    hidden: Linear::new(&mut rng),
                    out: Linear::new(&mut rng),
                };
                DataParallel::new(&group, wider).map(|_| ())
            } else {
                DataParallel::new(&group, Mlp::<Cpu>::new(1)).map(|_| ())
            };
            let err = result.unwrap_err();
            assert!(
                matches!(err, DistributedError::ModelMismatch { .. }),
                "{err:?}"
            );
            report(&err.to_string());
        }
        other => panic!("unknown case {other}"),
    }
}

/// Runs `mpirun -np 2` on the `rank` test with `case`, `device` and extra
/// `mpirun` arguments; returns the output and the ranks' result files.
fn mpirun(
    case: &str,
    device: &str,
    extra: &[&str],
    env: &[(&str, String)],
) -> (Output, Vec<String>, Duration) {
    let exe = std::env::current_exe().unwrap();
    let out =
        std::env::temp_dir().join(format!("volta-dist-{case}-{device}-{}", std::process::id()));
    let result = |r: usize| PathBuf::from(format!("{}.{r}", out.display()));
    for r in 0..2 {
        let _ = std::fs::remove_file(result(r));
    }
    let start = Instant::now();
    let mut cmd = Command::new("mpirun");
    cmd.args(["-np", "2", "--oversubscribe"])
        .args(extra)
        .arg(&exe)
        .args([
            "--ignored",
            "--exact",
            "rank",
            "--nocapture",
            "--test-threads=1",
        ])
        // As root (containers, CI), Open MPI wants to be told that is fine.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env(CASE, case)
        .env(DEVICE, device)
        .env(OUT, &out);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = cmd.output().unwrap_or_else(|e| {
        panic!("could not run mpirun ({e}): install Open MPI (Debian: openmpi-bin libopenmpi-dev)")
    });
    let elapsed = start.elapsed();
    let files = (0..2)
        .map(|r| std::fs::read_to_string(result(r)).unwrap_or_default())
        .collect();
    for r in 0..2 {
        let _ = std::fs::remove_file(result(r));
    }
    (output, files, elapsed)
}

fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn floats(bits: &str) -> Vec<f32> {
    bits.split_whitespace()
        .map(|b| f32::from_bits(b.parse().unwrap()))
        .collect()
}

/// Two ranks at batch `b` end with the parameters of one process at batch `2b`.
/// The two ranks agree to the bit (both receive the same all-reduced sums: see
/// `sum_into` in `volta/src/distributed/group.rs`). Against one process they agree to 1e-6: one process sums the
/// `2b` per-sample gradient terms in one order, two ranks sum `b` each and then
/// the two halves, so the sums round differently (measured: 9e-8 after 12 steps).
fn check_equivalence(device: &str, extra: &[&str], single: Vec<f32>) {
    let (output, files, _) = mpirun("equal", device, extra, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let (a, b) = (floats(&files[0]), floats(&files[1]));
    assert_eq!(a.len(), single.len(), "{}", text(&output));
    assert_eq!(
        files[0], files[1],
        "the ranks' parameters differ: they must get the same bits"
    );
    assert_eq!(a, b);
    let worst = a
        .iter()
        .zip(&single)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0f32, f32::max);
    assert!(worst < 1e-6, "two ranks differ from one process by {worst}");
    // And training moved them: the comparison is not of two initial states.
    let start = params(&mut Mlp::<Cpu>::new(100));
    assert!(single.iter().zip(&start).any(|(x, y)| (x - y).abs() > 1e-3));
}

#[test]
fn two_cpu_ranks_train_as_one_process_at_twice_the_batch() {
    check_equivalence("cpu", &[], train::<Cpu>(None, 2 * BATCH).unwrap());
}

#[test]
fn two_gpu_ranks_train_as_one_process_at_twice_the_batch() {
    check_equivalence("gpu", &[], train::<Gpu>(None, 2 * BATCH).unwrap());
}

/// The network path a multi-host job takes: Open MPI's TCP transport only (over
/// loopback here), no shared memory.
#[test]
fn two_ranks_over_tcp_train_as_one_process() {
    check_equivalence(
        "cpu",
        &[
            "--mca",
            "pml",
            "ob1",
            "--mca",
            "btl",
            "tcp,self",
            "--mca",
            "btl_tcp_if_include",
            "lo",
        ],
        train::<Cpu>(None, 2 * BATCH).unwrap(),
    );
}

#[test]
fn ranks_with_different_models_name_the_parameter() {
    let (output, files, _) = mpirun("mismatch", "cpu", &[], &[]);
    let want = "the ranks hold different models at `hidden.weight`: rank 0 has parameter \
                `hidden.weight` [16, 6], rank 1 has parameter `hidden.weight` [17, 6]";
    assert_eq!(files[0], want, "{}", text(&output));
    assert_eq!(files[1], want, "{}", text(&output));
}

/// Rank 1 is killed (SIGKILL) between its forward and backward passes; rank 0,
/// waiting in the first gradient all-reduce, fails with the typed timeout error
/// and the job ends. `orte_abort_on_non_zero_status 0` keeps mpirun from killing
/// rank 0 itself as soon as rank 1 dies (its default, also no hang).
#[test]
fn a_killed_rank_gives_the_other_a_timeout_error() {
    let (output, files, elapsed) = mpirun(
        "die",
        "cpu",
        &["--mca", "orte_abort_on_non_zero_status", "0"],
        &[("VOLTA_DISTRIBUTED_TIMEOUT", TIMEOUT.to_string())],
    );
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        files[0].starts_with(
            "error Timeout { op: \"all-reduce of gradient bucket 0\", rank: 0, world: 2"
        ),
        "{}\n{}",
        files[0],
        text(&output)
    );
    assert!(
        files[1].is_empty(),
        "rank 1 was killed before it could report"
    );
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("did not complete within"),
        "{}",
        text(&output)
    );
    // The timeout, plus the start of two processes and three steps.
    assert!(
        elapsed < Duration::from_secs(TIMEOUT + 20),
        "took {elapsed:?}"
    );
}
