//! Which GPU a rank opens.
use super::ProcessGroup;
use crate::Gpu;
use crate::backend::gpu::{GpuError, GpuInfo};

impl ProcessGroup {
    /// Opens this rank's GPU: adapter `local_rank mod n` among the host's `n`
    /// hardware adapters (software ones such as lavapipe only when there is no
    /// other), so that the ranks on a host spread over its GPUs. `VOLTA_ADAPTER`
    /// in a rank's environment overrides the choice. Call it before the first
    /// `Gpu` op.
    pub fn init_gpu(&self) -> Result<GpuInfo, GpuError> {
        if std::env::var_os("VOLTA_ADAPTER").is_some() {
            return Gpu::init();
        }
        let adapters = Gpu::adapters();
        let hardware: Vec<usize> = adapters
            .iter()
            .filter(|a| a.device_type != "Cpu")
            .map(|a| a.index)
            .collect();
        let pool: Vec<usize> = if hardware.is_empty() {
            adapters.iter().map(|a| a.index).collect()
        } else {
            hardware
        };
        match pool.get(self.local_rank() % pool.len().max(1)) {
            Some(&index) => Gpu::init_on(index),
            None => Gpu::init(), // no adapter: init's own error says so
        }
    }
}
