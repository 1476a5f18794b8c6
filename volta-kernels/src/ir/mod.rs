//! The kernel IR: an elementwise computation as a graph of scalar nodes.
//!
//! A [`Graph`] is built through hash-consing constructors that also simplify
//! (`x·1 → x`, constant folding, …), so equal subexpressions are one node — common
//! subexpression elimination comes for free. [`derivative`](diff::derivatives)
//! differentiates a graph symbolically in reverse mode, adding the gradient nodes to
//! the same graph, and [`emit`] prints any set of nodes as WGSL or Rust.

pub mod diff;
pub mod emit;
mod graph;

pub use graph::{CallEval, CallSite, Graph, Node, NodeId};
