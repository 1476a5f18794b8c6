//! Data-parallel training across processes, over MPI (the `distributed` feature).
//!
//! Start the same program once per GPU (or per CPU share) with an MPI launcher —
//! `mpirun -np 2 target/release/volta-train` on one host, `mpirun -H a,b …` on
//! several — and in it:
//!
//! 1. [`init`] joins the job: [`ProcessGroup::rank`], `world_size`, `local_rank`.
//! 2. [`ProcessGroup::init_gpu`] opens the local rank's GPU (one per process).
//! 3. [`DataLoader::shard`](crate::data::DataLoader::shard) gives each rank its
//!    share of every epoch.
//! 4. [`DataParallel`] wraps the model: rank 0's values reach every rank, and
//!    [`DataParallel::backward`] returns gradients averaged over the ranks, each
//!    bucket's all-reduce started while the backward pass goes on.
//! 5. [`ProcessGroup::all_reduce_sum`] sums metrics; rank 0
//!    ([`ProcessGroup::is_main`]) prints, plots and saves.
//!
//! Gradients are staged through host memory: Volta's buffers are Vulkan (or
//! Metal, DX12) memory, which NCCL cannot reach, and MPI moves host memory over
//! shared memory on one host and TCP or InfiniBand between hosts. `docs/distributed.md`
//! has the arithmetic of where this goes at 8 and 64 GPUs.
//!
//! **Faults.** Every collective runs on one MPI thread and the caller waits for it
//! at most [`ProcessGroup::timeout`] ([`DEFAULT_TIMEOUT`], or
//! `VOLTA_DISTRIBUTED_TIMEOUT` seconds). A rank that dies or stalls makes the
//! others' next collective fail with [`DistributedError::Timeout`]; MPI cannot
//! cancel the collective, so dropping the group then aborts the job
//! (`MPI_Abort`). (`mpirun` by default tears the job down itself as soon as a rank
//! exits with an error or a signal.) Ranks holding different models fail in
//! [`DataParallel::new`] with [`DistributedError::ModelMismatch`], naming the
//! first parameter that differs.
mod data_parallel;
#[cfg(feature = "gpu")]
mod device;
mod error;
mod group;

pub use data_parallel::{BucketTiming, DEFAULT_BUCKET_BYTES, DataParallel, StepProfile};
pub use error::DistributedError;
pub(crate) use group::Pending;
pub use group::{DEFAULT_TIMEOUT, ProcessGroup, TIMEOUT_ENV, init, launched};
/// The MPI bindings Volta runs on (the `mpi` crate), for programs that need
/// their own collectives or name [`Equivalence`](mpi::datatype::Equivalence).
pub use mpi;
