//! `Gpu`'s capture and replay of recorded work (see [`Replay`]).
use super::Gpu;
use super::device::rt;
use super::runtime::recorder::Graph;
use super::runtime::transfer::stage;
use crate::backend::{Buf, Replay};

/// Kernel launches captured by [`Replay::capture`] on the GPU, with their bind
/// groups and parameters, and every buffer they bind (kept out of the pool while
/// the graph lives). A replay records them again at a fraction of the cost of
/// recording the ops.
pub struct GpuGraph(Graph);

impl GpuGraph {
    /// Kernel launches in the graph.
    pub fn launches(&self) -> usize {
        self.0.len()
    }

    /// Distinct device buffers the graph keeps alive, and their bytes.
    pub fn memory(&self) -> (usize, u64) {
        self.0.memory()
    }
}

impl std::fmt::Debug for GpuGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuGraph({} launches)", self.0.len())
    }
}

impl Replay for Gpu {
    type Graph = GpuGraph;

    /// # Panics
    /// Inside another capture or `Gpu::profile`, or when `f` reads a value back.
    fn capture<R>(f: impl FnOnce() -> R) -> (R, Option<GpuGraph>) {
        let c = rt();
        let recorder = || c.recorder();
        assert!(
            !recorder().is_capturing_here(),
            "Gpu::capture cannot run inside Gpu::capture"
        );
        // One capture at a time: another thread's waits for this one to end.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        recorder().begin_capture(&c.gpu);
        // Capturing stops even if `f` panics.
        struct Stop;
        impl Drop for Stop {
            fn drop(&mut self) {
                let c = rt();
                c.recorder().end_capture(&c.gpu);
            }
        }
        let stop = Stop;
        let out = f();
        let graph = recorder().end_capture(&c.gpu).map(GpuGraph);
        drop(stop); // nothing left to stop
        (out, graph)
    }

    fn replay(graph: &GpuGraph) {
        let c = rt();
        c.recorder().replay(&c.gpu, &graph.0);
    }

    fn overwrite(buf: &mut Buf<Self, u32>, data: &[u32]) {
        assert!(
            data.len() <= buf.len(),
            "Gpu::overwrite: {} values into a buffer of {}",
            data.len(),
            buf.len()
        );
        if data.is_empty() {
            return;
        }
        let c = rt();
        let dst = buf.raw_mut().clone();
        let staging = stage(c, bytemuck::cast_slice(data));
        c.recorder().upload(&c.gpu, &staging, &dst, 0);
    }
}
