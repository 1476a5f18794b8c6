//! The processes a run trains on: this one alone, or — built with the
//! `distributed` feature and started by `mpirun -np N` — the ranks of an MPI job,
//! each training a replica of the model on its share of every batch.
//!
//! The training loop is the same either way: [`Replica::backward`] returns the
//! gradients averaged over the ranks, [`Ranks::sum`] adds up metrics, and only
//! the main rank prints and writes files.
use std::error::Error;
use volta::autograd::Gradients;
use volta::nn::{Module, Visitor};
use volta::prelude::*;

#[cfg(feature = "distributed")]
use volta::distributed::{DataParallel, ProcessGroup};

/// This process's place among the ranks.
pub struct Ranks {
    /// The MPI job, when a launcher started this process.
    #[cfg(feature = "distributed")]
    group: Option<ProcessGroup>,
}

impl Ranks {
    /// Joins the MPI job this process was started in; without `mpirun` (or the
    /// `distributed` feature) a world of one, which starts no MPI.
    pub fn join() -> Result<Self, Box<dyn Error>> {
        Ok(Ranks {
            #[cfg(feature = "distributed")]
            group: if volta::distributed::launched() {
                Some(volta::distributed::init()?)
            } else {
                None
            },
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        #[cfg(feature = "distributed")]
        return self.group.as_ref().map_or(0, ProcessGroup::rank);
        #[cfg(not(feature = "distributed"))]
        0
    }

    /// The number of ranks.
    pub fn world(&self) -> usize {
        #[cfg(feature = "distributed")]
        return self.group.as_ref().map_or(1, ProcessGroup::world_size);
        #[cfg(not(feature = "distributed"))]
        1
    }

    /// Whether this rank prints, plots and writes checkpoints.
    pub fn is_main(&self) -> bool {
        self.rank() == 0
    }

    /// Replaces `values` with their sums over the ranks.
    pub fn sum(&self, values: &mut [f64]) -> Result<(), Box<dyn Error>> {
        #[cfg(feature = "distributed")]
        if let Some(group) = &self.group {
            group.all_reduce_sum(values)?;
        }
        let _ = values;
        Ok(())
    }

    /// Opens this rank's GPU: the local rank's among the host's adapters.
    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> Result<volta::backend::gpu::GpuInfo, volta::backend::gpu::GpuError> {
        #[cfg(feature = "distributed")]
        if let Some(group) = &self.group {
            return group.init_gpu();
        }
        Gpu::init()
    }

    /// `model`, replicated over the ranks: rank 0's values on every rank.
    pub fn replicate<M: Module<D, f32>, D: Backend<f32>>(
        &self,
        model: M,
    ) -> Result<Replica<M, D>, Box<dyn Error>> {
        #[cfg(feature = "distributed")]
        if let Some(group) = &self.group {
            return Ok(Replica::Ranks(DataParallel::new(group, model)?));
        }
        Ok(Replica::Alone(model, std::marker::PhantomData))
    }
}

/// A model trained on every rank (see [`Ranks::replicate`]); it dereferences to
/// the model, and is a [`Module`] with the model's names (checkpoints are the
/// same as a single process's).
pub enum Replica<M: Module<D, f32>, D: Backend<f32>> {
    /// This process alone.
    Alone(M, std::marker::PhantomData<fn() -> D>),
    /// One of the ranks of an MPI job.
    #[cfg(feature = "distributed")]
    Ranks(DataParallel<M, D>),
}

impl<M: Module<D, f32>, D: Backend<f32>> Replica<M, D> {
    /// The gradients of `loss`, averaged over the ranks.
    pub fn backward<S: Scalar>(
        &mut self,
        loss: Tensor<S, D>,
    ) -> Result<Gradients<D>, Box<dyn Error>> {
        match self {
            Replica::Alone(..) => Ok(loss.backward()),
            #[cfg(feature = "distributed")]
            Replica::Ranks(m) => Ok(m.backward(loss)?),
        }
    }
}

impl<M: Module<D, f32>, D: Backend<f32>> std::ops::Deref for Replica<M, D> {
    type Target = M;
    fn deref(&self) -> &M {
        match self {
            Replica::Alone(m, _) => m,
            #[cfg(feature = "distributed")]
            Replica::Ranks(m) => m.module(),
        }
    }
}

impl<M: Module<D, f32>, D: Backend<f32>> std::ops::DerefMut for Replica<M, D> {
    fn deref_mut(&mut self) -> &mut M {
        match self {
            Replica::Alone(m, _) => m,
            #[cfg(feature = "distributed")]
            Replica::Ranks(m) => m.module_mut(),
        }
    }
}

impl<M: Module<D, f32>, D: Backend<f32>> Module<D, f32> for Replica<M, D> {
    fn visit(&mut self, v: &mut Visitor<'_, D, f32>) {
        (**self).visit(v);
    }
}

/// Runs this test binary's test `rank_test` on two ranks (`mpirun -np 2`) with
/// `env`, and returns its stdout; panics with both outputs when it fails.
#[cfg(all(test, feature = "distributed"))]
pub fn run_two_ranks(rank_test: &str, env: &[(&str, &std::path::Path)]) -> String {
    let mut cmd = std::process::Command::new("mpirun");
    cmd.args(["-np", "2", "--oversubscribe"])
        .arg(std::env::current_exe().expect("the test binary's path"))
        .args(["--ignored", "--exact", rank_test, "--nocapture"])
        // As root (containers, CI), Open MPI wants to be told that is fine.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = cmd
        .output()
        .expect("mpirun runs (install Open MPI: openmpi-bin)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}
