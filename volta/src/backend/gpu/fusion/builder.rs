//! The tree one consumer builds: its distinct leaves, its scalars, and the
//! operands spliced in. Generic over the leaf type so that the splicing rules are
//! tested without a GPU.
use volta_kernels::wgsl::Expr;

/// The input index of a pending row op's value in a tree ([`RowRead`]); replaced
/// by a real input before any kernel is built.
pub(crate) const ROW_VALUE: usize = u16::MAX as usize;

/// Largest tree a consumer builds by splicing operands in.
pub(crate) const MAX_NODES: usize = 48;
/// Most distinct inputs a consumer binds after splicing operands in.
pub(crate) const MAX_INPUTS: usize = 8;

/// An expression over leaves `L` (read as `Input(i)`) and scalars (`Scalar(j)`, raw
/// `f32` bits).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fused<L> {
    pub expr: Expr,
    pub leaves: Vec<L>,
    pub scalars: Vec<u32>,
}

impl<L> Fused<L> {
    /// The tree that reads `leaf` as it is.
    pub fn read(leaf: L) -> Self {
        Fused {
            expr: Expr::input(0),
            leaves: vec![leaf],
            scalars: Vec::new(),
        }
    }
}

/// Builds the tree of one consumer: collects its distinct leaves and its scalars.
/// Generic over the leaf type so that the splicing rules are tested without a GPU.
pub(crate) struct Builder<L> {
    leaves: Vec<L>,
    scalars: Vec<u32>,
    nodes: usize,
    max_nodes: usize,
    max_inputs: usize,
}

impl<L: Clone + PartialEq> Builder<L> {
    /// A builder whose spliced trees may add up to `max_nodes` nodes and whose
    /// leaves may number `max_inputs`.
    pub fn new(max_nodes: usize, max_inputs: usize) -> Self {
        Builder {
            leaves: Vec::new(),
            scalars: Vec::new(),
            nodes: 0,
            max_nodes,
            max_inputs,
        }
    }

    /// Reads `leaf` (once, however often it is read).
    /// Whether `n` more leaves fit.
    pub fn has_room_for(&self, n: usize) -> bool {
        self.leaves.len() + n <= self.max_inputs
    }

    pub fn leaf(&mut self, leaf: L) -> Expr {
        Expr::input(index_of(&mut self.leaves, leaf))
    }

    /// Splices `op` in, or returns `None` when that would exceed the limits while
    /// keeping one input free for each of the `reserve` operands still to come.
    pub fn splice(&mut self, op: &Fused<L>, reserve: usize) -> Option<Expr> {
        let nodes = op.expr.nodes();
        let new = op
            .leaves
            .iter()
            .filter(|l| !self.leaves.contains(l))
            .count();
        if self.nodes + nodes > self.max_nodes
            || self.leaves.len() + new + reserve > self.max_inputs
        {
            return None;
        }
        self.nodes += nodes;
        let inputs: Vec<Expr> = op.leaves.iter().map(|l| self.leaf(l.clone())).collect();
        let base = self.scalars.len();
        self.scalars.extend_from_slice(&op.scalars);
        Some(op.expr.substitute(
            &|i| {
                if i == ROW_VALUE {
                    Expr::input(ROW_VALUE)
                } else {
                    inputs[i].clone()
                }
            },
            &|j| Expr::scalar(base + j),
        ))
    }

    /// The consumer's tree: `template` with `Input(i)` = `args[i]` and `Scalar(j)` =
    /// its own scalar `scalars[j]`.
    pub fn finish(mut self, template: &Expr, args: &[Expr], scalars: &[u32]) -> Fused<L> {
        let base = self.scalars.len();
        self.scalars.extend_from_slice(scalars);
        Fused {
            expr: template.substitute(&|i| args[i].clone(), &|j| Expr::scalar(base + j)),
            leaves: self.leaves,
            scalars: self.scalars,
        }
    }
}

/// The index of `leaf` in `leaves`, appended if it is not there (an input bound
/// once however often it is read).
pub(crate) fn index_of<L: PartialEq>(leaves: &mut Vec<L>, leaf: L) -> usize {
    match leaves.iter().position(|l| *l == leaf) {
        Some(i) => i,
        None => {
            leaves.push(leaf);
            leaves.len() - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Builder, Fused};
    use volta_kernels::wgsl::Expr;
    use volta_kernels::{BinaryOp, UnaryOp};

    fn pending(expr: Expr, leaves: &[&'static str], scalars: &[u32]) -> Fused<&'static str> {
        Fused {
            expr,
            leaves: leaves.to_vec(),
            scalars: scalars.to_vec(),
        }
    }

    #[test]
    fn splices_operands_and_binds_equal_inputs_once() {
        // p = a * b (pending); y = relu(p + c): one tree over a, b, c.
        let p = pending(
            Expr::input(0).binary(BinaryOp::Mul, Expr::input(1)),
            &["a", "b"],
            &[],
        );
        let template = Expr::input(0)
            .binary(BinaryOp::Add, Expr::input(1))
            .unary(UnaryOp::Relu);
        let mut b = Builder::new(48, 8);
        let args = [b.splice(&p, 1).unwrap(), b.leaf("c")];
        let y = b.finish(&template, &args, &[]);
        let expect = Expr::input(0)
            .binary(BinaryOp::Mul, Expr::input(1))
            .binary(BinaryOp::Add, Expr::input(2))
            .unary(UnaryOp::Relu);
        assert_eq!(y, pending(expect, &["a", "b", "c"], &[]));

        // q = x * s0 (pending); q * q reads x once and keeps both scalars.
        let q = pending(
            Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(0)),
            &["x"],
            &[7],
        );
        let mut b = Builder::new(48, 8);
        let args = [b.splice(&q, 1).unwrap(), b.splice(&q, 0).unwrap()];
        let sq = b.finish(
            &Expr::input(0)
                .binary(BinaryOp::Mul, Expr::input(1))
                .binary(BinaryOp::Add, Expr::scalar(0)),
            &args,
            &[9],
        );
        assert_eq!(sq.leaves, vec!["x"]);
        assert_eq!(sq.scalars, vec![7, 7, 9]);
        let x0 = Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(0));
        let x1 = Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(1));
        assert_eq!(
            sq.expr,
            x0.binary(BinaryOp::Mul, x1)
                .binary(BinaryOp::Add, Expr::scalar(2))
        );
    }

    #[test]
    fn refuses_to_grow_past_the_limits() {
        let wide = pending(
            Expr::input(0)
                .binary(BinaryOp::Add, Expr::input(1))
                .binary(BinaryOp::Add, Expr::input(2)),
            &["a", "b", "c"],
            &[],
        );
        // Three new inputs plus one reserved for the next operand exceed three.
        let mut b = Builder::new(48, 3);
        assert!(b.splice(&wide, 1).is_none());
        assert!(b.splice(&wide, 0).is_some());
        // Five nodes do not fit a budget of four.
        let mut b = Builder::<&str>::new(4, 8);
        assert!(b.splice(&wide, 0).is_none());
    }
}
