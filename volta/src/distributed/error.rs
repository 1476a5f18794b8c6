//! What data-parallel training can fail with.
use std::fmt;
use std::time::Duration;

/// An error of [`volta::distributed`](crate::distributed).
#[derive(Debug, Clone, PartialEq)]
pub enum DistributedError {
    /// MPI is already initialised in this process: call [`init`](super::init) once
    /// and share the [`ProcessGroup`](super::ProcessGroup) (it is cheap to clone).
    AlreadyInitialized,
    /// MPI could not start (the message says why).
    Init(String),
    /// A collective did not complete within the timeout: a rank died, stalled, or
    /// never reached it. MPI cannot cancel a collective, so the group is unusable
    /// from then on; dropping its last handle aborts the whole job
    /// (`MPI_Abort`) rather than hang.
    Timeout {
        /// The collective (`"all-reduce of gradient bucket 2"`).
        op: String,
        /// This process's rank.
        rank: usize,
        /// The ranks in the group.
        world: usize,
        /// How long this rank waited.
        waited: Duration,
    },
    /// An earlier collective timed out (see [`Timeout`](Self::Timeout)).
    Poisoned,
    /// The ranks hold different models: the first entry, in visit order, whose
    /// name, kind or dims differ from rank 0's. Every rank returns the same error.
    ModelMismatch {
        /// The first rank whose entry differs from rank 0's.
        rank: usize,
        /// The entry's name on rank 0 (`fc.weight`), or on this rank when rank 0
        /// has fewer entries.
        name: String,
        /// The entry on rank 0 (`param fc.weight [10, 256]`), or `nothing`.
        on_rank0: String,
        /// The entry on rank `rank`, or `nothing`.
        here: String,
    },
    /// Reading a gradient or parameter back from the device failed.
    Device(String),
}

impl fmt::Display for DistributedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistributedError::AlreadyInitialized => write!(
                f,
                "MPI is already initialised in this process: call volta::distributed::init() \
                 once and clone the ProcessGroup it returns"
            ),
            DistributedError::Init(why) => write!(f, "MPI could not start: {why}"),
            DistributedError::Timeout {
                op,
                rank,
                world,
                waited,
            } => write!(
                f,
                "rank {rank} of {world}: the {op} did not complete within {:.1} s: a rank \
                 died, stalled or did not reach it (set VOLTA_DISTRIBUTED_TIMEOUT to wait \
                 longer)",
                waited.as_secs_f64()
            ),
            DistributedError::Poisoned => write!(
                f,
                "an earlier collective of this process group timed out; the group cannot \
                 be used again"
            ),
            DistributedError::ModelMismatch {
                rank,
                name,
                on_rank0,
                here,
            } => write!(
                f,
                "the ranks hold different models at `{name}`: rank 0 has {on_rank0}, rank \
                 {rank} has {here}"
            ),
            DistributedError::Device(why) => write!(f, "device error during a collective: {why}"),
        }
    }
}

impl std::error::Error for DistributedError {}
