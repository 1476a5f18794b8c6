//! Recording a step's kernels once and replaying them (CUDA graphs' idea).
//!
//! A decode step runs the same few hundred kernels every token; recording them
//! through the op layer costs host time per op (bind groups, parameter blocks,
//! locks). [`Replay::capture`] runs a closure once and keeps what it launched; each
//! [`Replay::replay`] then re-issues those launches with their bindings as they
//! were. What changes between replays must therefore live in device buffers that
//! the captured kernels read, updated with [`Replay::overwrite`] (a token id, a
//! position); shapes and grids stay as captured.
//!
//! On the CPU, which launches nothing, `capture` just runs the closure and returns
//! no graph: callers run their step again instead.
use super::{Buf, Device};

/// Capture and replay of recorded work: run a step once, re-issue its launches
/// per later step with new inputs written by [`overwrite`](Replay::overwrite).
pub trait Replay: Device {
    /// The recorded launches, and the buffers they bind, kept alive.
    type Graph: Send + Sync;

    /// Runs `f`, which computes a step, and returns its result and, on devices
    /// that record work, the graph that [`replay`](Replay::replay) re-runs. The
    /// results `f` returns must be in memory when it returns (a pending fused
    /// value computed later would not be part of the graph), and `f` may not read
    /// values back to the host.
    fn capture<R>(f: impl FnOnce() -> R) -> (R, Option<Self::Graph>);

    /// Re-issues the launches of `graph`, in order after the work recorded so far.
    /// The buffers the step wrote now hold the new results.
    fn replay(graph: &Self::Graph);

    /// Writes `data` over the start of `buf` in place, in order with recorded
    /// work: the way to give a captured step new inputs (token ids, a position).
    /// Other handles to `buf` see the new values on the GPU; the CPU copies first
    /// when `buf` is shared.
    fn overwrite(buf: &mut Buf<Self, u32>, data: &[u32]);
}
