//! The process group: MPI's world, driven by one thread that owns it.
//!
//! Every MPI call runs on that thread, in the order the program asks for them, so
//! the collectives of all ranks line up even while the training thread goes on
//! (the data-parallel wrapper starts each bucket's all-reduce in the middle of the
//! backward pass). The caller waits for a collective with a timeout, which MPI's
//! blocking calls lack: a dead or stalled rank becomes a typed error instead of a
//! hang.
use super::DistributedError;
use crate::dtype::Float;
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a rank waits for a collective before it gives up with
/// [`DistributedError::Timeout`], unless `VOLTA_DISTRIBUTED_TIMEOUT` (seconds)
/// says otherwise: ten minutes, PyTorch's default for its process groups. It has
/// to cover the slowest rank's work between two collectives (an evaluation, the
/// first step's pipeline compilation on a cold GPU).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The environment variable that sets the timeout, in seconds.
pub const TIMEOUT_ENV: &str = "VOLTA_DISTRIBUTED_TIMEOUT";

type Job = Box<dyn FnOnce(&SimpleCommunicator) + Send>;

/// MPI starts once per process.
static STARTED: AtomicBool = AtomicBool::new(false);

/// The ranks of a data-parallel job (MPI's world): who this process is, and the
/// collectives between them. Cheap to clone; MPI finalises when the last clone
/// is dropped.
#[derive(Clone)]
pub struct ProcessGroup {
    inner: Arc<Inner>,
}

struct Inner {
    rank: usize,
    world: usize,
    local_rank: usize,
    local_world: usize,
    timeout: Duration,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<(mpsc::Receiver<()>, JoinHandle<()>)>>,
    poisoned: AtomicBool,
}

impl std::fmt::Debug for ProcessGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessGroup")
            .field("rank", &self.rank())
            .field("world_size", &self.world_size())
            .field("local_rank", &self.local_rank())
            .field("local_size", &self.local_size())
            .finish()
    }
}

/// Joins the job `mpirun` (or `srun`, or any MPI launcher) started this process
/// in: rank, world size, and the ranks on this host. Run without a launcher, the
/// process is a world of one, and every collective returns at once.
///
/// It also shares the CPU among the ranks on this host: when `RAYON_NUM_THREADS`
/// is unset, each rank's CPU kernels use its share of the cores.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let group = volta::distributed::init()?;
/// println!("rank {} of {}", group.rank(), group.world_size());
/// # Ok(()) }
/// ```
pub fn init() -> Result<ProcessGroup, DistributedError> {
    if STARTED.swap(true, Ordering::SeqCst) {
        return Err(DistributedError::AlreadyInitialized);
    }
    let timeout = match std::env::var(TIMEOUT_ENV) {
        Ok(s) => match s.trim().parse::<f64>() {
            Ok(secs) if secs > 0.0 && secs.is_finite() => Duration::from_secs_f64(secs),
            _ => {
                return Err(DistributedError::Init(format!(
                    "{TIMEOUT_ENV}={s:?} is not a positive number of seconds"
                )));
            }
        },
        Err(_) => DEFAULT_TIMEOUT,
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done_rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("volta-mpi".into())
        .spawn(move || {
            // MPI_THREAD_MULTIPLE only so that another thread may call MPI_Abort
            // when a collective hangs; everything else runs here.
            let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Multiple)
            else {
                let _ = ready_tx.send(Err(DistributedError::AlreadyInitialized));
                return;
            };
            let world = universe.world();
            let local = world.split_shared(world.rank());
            let _ = ready_tx.send(Ok((
                world.rank() as usize,
                world.size() as usize,
                local.rank() as usize,
                local.size() as usize,
            )));
            drop(local);
            while let Ok(job) = job_rx.recv() {
                job(&world);
            }
            drop(world);
            drop(universe); // MPI_Finalize
            let _ = done_tx.send(());
        })
        .map_err(|e| DistributedError::Init(format!("could not start the MPI thread: {e}")))?;
    let (rank, world, local_rank, local_world) = ready_rx
        .recv()
        .map_err(|_| DistributedError::Init("the MPI thread ended during MPI_Init".into()))??;
    share_cores(local_world);
    Ok(ProcessGroup {
        inner: Arc::new(Inner {
            rank,
            world,
            local_rank,
            local_world,
            timeout,
            jobs: Mutex::new(Some(job_tx)),
            thread: Mutex::new(Some((done_rx, thread))),
            poisoned: AtomicBool::new(false),
        }),
    })
}

/// Whether an MPI launcher (`mpirun`, `mpiexec`, `srun` with PMI) started this
/// process: a program can then call [`init`], and run on its own otherwise
/// without starting MPI at all.
pub fn launched() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE", // Open MPI
        "PMI_SIZE",             // MPICH, Intel MPI, Slurm's PMI-1/2
        "PMIX_RANK",            // PMIx launchers (Slurm, PRRTE)
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// Gives each of the `ranks` on this host its share of the cores for CPU kernels,
/// unless the user chose (`RAYON_NUM_THREADS`) or the pool already started.
fn share_cores(ranks: usize) {
    if ranks <= 1 || std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads((cores / ranks).max(1))
        .build_global();
}

impl ProcessGroup {
    /// This process's rank, `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.inner.world
    }

    /// This process's rank among those on its host: which local GPU it takes.
    pub fn local_rank(&self) -> usize {
        self.inner.local_rank
    }

    /// The number of ranks on this host.
    pub fn local_size(&self) -> usize {
        self.inner.local_world
    }

    /// Whether this is rank 0, the one that prints, plots and saves checkpoints.
    pub fn is_main(&self) -> bool {
        self.inner.rank == 0
    }

    /// How long a collective may take before it fails with
    /// [`DistributedError::Timeout`] (see [`DEFAULT_TIMEOUT`]).
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Queues `f` on the MPI thread; every rank must queue the same collectives in
    /// the same order. [`Pending::wait`] waits for the result.
    pub(crate) fn start<R: Send + 'static>(
        &self,
        op: impl Into<String>,
        f: impl FnOnce(&SimpleCommunicator) -> R + Send + 'static,
    ) -> Result<Pending<R>, DistributedError> {
        if self.inner.poisoned.load(Ordering::SeqCst) {
            return Err(DistributedError::Poisoned);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |comm| {
            let _ = tx.send(f(comm));
        });
        let sent = match self
            .inner
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            Some(jobs) => jobs.send(job).is_ok(),
            None => false,
        };
        if !sent {
            return Err(DistributedError::Init("the MPI thread has ended".into()));
        }
        Ok(Pending {
            rx,
            op: op.into(),
            group: self.clone(),
        })
    }

    /// Runs `f` on the MPI thread and waits for it.
    pub(crate) fn run<R: Send + 'static>(
        &self,
        op: impl Into<String>,
        f: impl FnOnce(&SimpleCommunicator) -> R + Send + 'static,
    ) -> Result<R, DistributedError> {
        self.start(op, f)?.wait()
    }

    /// Waits until every rank has reached this point.
    pub fn barrier(&self) -> Result<(), DistributedError> {
        if self.world_size() == 1 {
            return Ok(());
        }
        self.run("barrier", |comm| comm.barrier())
    }

    /// Replaces `values` with their sums over all ranks (metrics: losses,
    /// counts). Every rank gets the same bits.
    pub fn all_reduce_sum(&self, values: &mut [f64]) -> Result<(), DistributedError> {
        if self.world_size() == 1 || values.is_empty() {
            return Ok(());
        }
        let data = values.to_vec();
        let sums = self.run("all-reduce of metrics", move |comm| {
            let mut sums = Vec::new();
            sum_into(comm, &data, &mut sums);
            sums
        })?;
        values.copy_from_slice(&sums);
        Ok(())
    }

    /// Rank 0's `values`, on every rank (what the others pass is ignored, its
    /// length included).
    pub fn broadcast<T: Equivalence + Copy + Default + Send + 'static>(
        &self,
        values: Vec<T>,
    ) -> Result<Vec<T>, DistributedError> {
        if self.world_size() == 1 {
            return Ok(values);
        }
        self.run("broadcast from rank 0", move |comm| {
            let root = comm.process_at_rank(0);
            let mut len = values.len() as u64;
            root.broadcast_into(&mut len);
            let mut values = values;
            values.resize(len as usize, T::default());
            root.broadcast_into(&mut values[..]);
            values
        })
    }

    fn poison(&self) {
        self.inner.poisoned.store(true, Ordering::SeqCst);
    }
}

/// A collective queued on the MPI thread.
pub(crate) struct Pending<R> {
    rx: mpsc::Receiver<R>,
    op: String,
    group: ProcessGroup,
}

impl<R> Pending<R> {
    /// Its result, or [`DistributedError::Timeout`] when it has not completed
    /// within the group's timeout (which poisons the group).
    pub(crate) fn wait(self) -> Result<R, DistributedError> {
        let start = Instant::now();
        match self.rx.recv_timeout(self.group.timeout()) {
            Ok(r) => Ok(r),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.group.poison();
                let err = DistributedError::Timeout {
                    op: self.op,
                    rank: self.group.rank(),
                    world: self.group.world_size(),
                    waited: start.elapsed(),
                };
                // Said here too: the abort when the group drops may come before
                // the caller prints the error.
                eprintln!("volta::distributed: {err}");
                Err(err)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(DistributedError::Init(
                "the MPI thread ended during a collective".into(),
            )),
        }
    }
}

/// Sums `data` over the ranks into `out` (resized to fit): `MPI_Allreduce`.
/// Every rank receives the same bits, run after run, for a given world size and
/// length: Open MPI picks its algorithm from those alone, and each of its
/// algorithms either sums every block once and hands the sum around (ring,
/// Rabenseifner) or has pairs of ranks add the same two partial sums (recursive
/// doubling, where `a + b == b + a` exactly). The tests check two ranks' weights
/// are bitwise equal after training.
pub(crate) fn sum_into<E: Float + Equivalence>(
    comm: &SimpleCommunicator,
    data: &[E],
    out: &mut Vec<E>,
) {
    out.resize(data.len(), E::ZERO);
    if comm.size() == 1 {
        out.copy_from_slice(data);
    } else if !data.is_empty() {
        comm.all_reduce_into(data, &mut out[..], SystemOperation::sum());
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let abort = |why: &str| {
            eprintln!(
                "volta::distributed: rank {}: {why}; aborting the job",
                self.rank
            );
            // SAFETY: MPI is initialised with MPI_THREAD_MULTIPLE, which allows any
            // thread to call MPI_Abort; it does not return.
            unsafe {
                mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, 1);
            }
            std::process::exit(1);
        };
        if self.poisoned.load(Ordering::SeqCst) {
            abort("a collective timed out and MPI cannot cancel it");
        }
        // Closing the queue ends the MPI thread, which finalises.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((done, thread)) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            match done.recv_timeout(self.timeout) {
                Ok(()) => {
                    let _ = thread.join();
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // The thread ended without finalising: a job panicked there.
                    let _ = thread.join();
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    abort("MPI_Finalize did not complete within the timeout")
                }
            }
        }
    }
}
