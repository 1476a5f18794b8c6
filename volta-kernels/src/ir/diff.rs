//! Symbolic reverse-mode differentiation of a graph.
//!
//! Rules for the non-differentiable pieces: comparisons and `floor` have zero
//! derivative; `select` routes the gradient to the branch taken (the condition gets
//! none); `max`/`min` split the gradient evenly on ties; `mod` behaves as
//! `a − b·floor(a/b)` with `floor` constant; `relu` and `abs` have derivative 0 at 0.
//! A call of another kernel contributes through that kernel's own partial derivatives.
use super::{Graph, Node, NodeId};
use crate::{BinaryOp, UnaryOp};
use std::collections::{BTreeMap, HashSet};

/// Adds to `g` the gradient of `output` with respect to each of the tensor inputs
/// `0..n_inputs`, times the upstream gradient `seed`. Returns one node per input
/// (a literal 0 when the output does not depend on it).
pub fn derivatives(g: &mut Graph, output: NodeId, seed: NodeId, n_inputs: u16) -> Vec<NodeId> {
    let reachable = reachable_from(g, output);
    let mut adjoint: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    adjoint.insert(output, seed);
    let zero = g.lit(0.0);
    let mut grads = vec![zero; n_inputs as usize];
    // Ids are topological (inputs first), so walking them downwards visits every user
    // of a node before the node itself.
    for id in (0..=output.0).rev().map(NodeId) {
        if !reachable.contains(&id) {
            continue;
        }
        let Some(&adj) = adjoint.get(&id) else {
            continue;
        };
        for (target, contribution) in local_grads(g, id, adj) {
            let sum = match adjoint.get(&target) {
                Some(&prev) => g.add(prev, contribution),
                None => contribution,
            };
            adjoint.insert(target, sum);
        }
        if let Node::Input(k) = g.node(id)
            && k < n_inputs
        {
            grads[k as usize] = adj;
        }
    }
    grads
}

fn reachable_from(g: &Graph, output: NodeId) -> HashSet<NodeId> {
    let mut seen = HashSet::new();
    let mut stack = vec![output];
    while let Some(id) = stack.pop() {
        if seen.insert(id) {
            stack.extend(operands(g, g.node(id)));
        }
    }
    seen
}

fn operands(g: &Graph, node: Node) -> Vec<NodeId> {
    match node {
        Node::Input(_) | Node::Param(_) | Node::Lit(_) => vec![],
        Node::Call(site) | Node::CallPartial(site, _) => g.call_site(site).args.clone(),
        Node::Unary(_, x) => vec![x],
        Node::Binary(_, a, b) => vec![a, b],
        Node::Select(c, a, b) => vec![c, a, b],
    }
}

/// The contributions `(operand, adj · ∂node/∂operand)` of one node.
fn local_grads(g: &mut Graph, id: NodeId, adj: NodeId) -> Vec<(NodeId, NodeId)> {
    match g.node(id) {
        Node::Input(_) | Node::Param(_) | Node::Lit(_) => vec![],
        // A partial of a call is treated as constant: second derivatives through
        // calls are not needed by the backward pass.
        Node::CallPartial(..) => vec![],
        Node::Call(site) => {
            let args = g.call_site(site).args.clone();
            args.iter()
                .enumerate()
                .map(|(k, &arg)| {
                    let d = g.call_partial(site, k as u16);
                    (arg, g.mul(adj, d))
                })
                .collect()
        }
        Node::Unary(op, x) => {
            let d = unary_derivative(g, op, x, id);
            vec![(x, g.mul(adj, d))]
        }
        Node::Binary(op, a, b) => {
            let (da, db) = binary_derivatives(g, op, a, b, id);
            let mut out = Vec::new();
            if g.as_lit(da) != Some(0.0) {
                out.push((a, g.mul(adj, da)));
            }
            if g.as_lit(db) != Some(0.0) {
                out.push((b, g.mul(adj, db)));
            }
            out
        }
        Node::Select(c, a, b) => {
            let zero = g.lit(0.0);
            let to_a = g.select(c, adj, zero);
            let to_b = g.select(c, zero, adj);
            vec![(a, to_a), (b, to_b)]
        }
    }
}

/// d op(x) / dx, where `y` is the node `op(x)` itself (reused where it helps).
pub fn unary_derivative(g: &mut Graph, op: UnaryOp, x: NodeId, y: NodeId) -> NodeId {
    use std::f32::consts::{LN_2, PI};
    let one = g.lit(1.0);
    let zero = g.lit(0.0);
    match op {
        UnaryOp::Neg => g.lit(-1.0),
        UnaryOp::Exp => y,
        UnaryOp::Log => g.unary(UnaryOp::Recip, x),
        UnaryOp::Exp2 => g.scale(y, LN_2),
        UnaryOp::Log2 => {
            let t = g.scale(x, LN_2);
            g.unary(UnaryOp::Recip, t)
        }
        UnaryOp::Sqrt => {
            let r = g.unary(UnaryOp::Recip, y);
            g.scale(r, 0.5)
        }
        UnaryOp::Recip => {
            let yy = g.mul(y, y);
            g.neg(yy)
        }
        UnaryOp::Relu => g.binary(BinaryOp::Gt, x, zero),
        UnaryOp::Sigmoid => {
            let one_minus = g.sub(one, y);
            g.mul(y, one_minus)
        }
        UnaryOp::Tanh => {
            let yy = g.mul(y, y);
            g.sub(one, yy)
        }
        UnaryOp::Sin => g.unary(UnaryOp::Cos, x),
        UnaryOp::Cos => {
            let s = g.unary(UnaryOp::Sin, x);
            g.neg(s)
        }
        UnaryOp::Abs => {
            let pos = g.binary(BinaryOp::Gt, x, zero);
            let neg = g.binary(BinaryOp::Lt, x, zero);
            g.sub(pos, neg)
        }
        // Φ(x) + x·φ(x)
        UnaryOp::Gelu => g.unary(UnaryOp::GeluGrad, x),
        UnaryOp::GeluGrad => {
            // φ(x)·(2 − x²)
            let xx = g.mul(x, x);
            let e = g.scale(xx, -0.5);
            let exp = g.unary(UnaryOp::Exp, e);
            let pdf = g.scale(exp, 1.0 / (2.0 * PI).sqrt());
            let two = g.add(one, one);
            let factor = g.sub(two, xx);
            g.mul(pdf, factor)
        }
        UnaryOp::Silu => {
            // σ(x)·(1 + x·(1 − σ(x)))
            let s = g.unary(UnaryOp::Sigmoid, x);
            let one_minus = g.sub(one, s);
            let x_term = g.mul(x, one_minus);
            let inner = g.add(one, x_term);
            g.mul(s, inner)
        }
        UnaryOp::Floor => zero,
        UnaryOp::Erf => {
            let xx = g.mul(x, x);
            let e = g.neg(xx);
            let exp = g.unary(UnaryOp::Exp, e);
            g.scale(exp, 2.0 / PI.sqrt())
        }
    }
}

/// (∂/∂a, ∂/∂b) of `op(a, b)`, where `y` is the node itself.
pub fn binary_derivatives(
    g: &mut Graph,
    op: BinaryOp,
    a: NodeId,
    b: NodeId,
    y: NodeId,
) -> (NodeId, NodeId) {
    let one = g.lit(1.0);
    let zero = g.lit(0.0);
    match op {
        BinaryOp::Add => (one, one),
        BinaryOp::Sub => (one, g.lit(-1.0)),
        BinaryOp::Mul => (b, a),
        BinaryOp::Div => {
            let da = g.unary(UnaryOp::Recip, b);
            let q = g.mul(y, da);
            (da, g.neg(q))
        }
        BinaryOp::Max | BinaryOp::Min => {
            let wins = if op == BinaryOp::Max {
                BinaryOp::Gt
            } else {
                BinaryOp::Lt
            };
            let eq = g.binary(BinaryOp::Eq, a, b);
            let tie = g.scale(eq, 0.5);
            let a_wins = g.binary(wins, a, b);
            let b_wins = g.binary(wins, b, a);
            (g.add(a_wins, tie), g.add(b_wins, tie))
        }
        BinaryOp::Mod => {
            let q = g.div(a, b);
            let f = g.unary(UnaryOp::Floor, q);
            (one, g.neg(f))
        }
        BinaryOp::Pow => {
            let b1 = g.sub(b, one);
            let p = g.binary(BinaryOp::Pow, a, b1);
            let da = g.mul(b, p);
            let ln = g.unary(UnaryOp::Log, a);
            (da, g.mul(y, ln))
        }
        BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne => {
            (zero, zero)
        }
    }
}
