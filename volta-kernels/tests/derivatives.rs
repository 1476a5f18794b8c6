//! Symbolic derivatives from `ir::diff` against hand-derived formulas and central
//! finite differences, evaluated numerically.
use volta_kernels::ir::{Graph, NodeId, diff::derivatives};
use volta_kernels::{BinaryOp, UnaryOp};

/// Builds `f(inputs)` in a fresh graph and returns it with its derivative nodes.
fn derive(n: u16, f: impl Fn(&mut Graph, &[NodeId]) -> NodeId) -> (Graph, NodeId, Vec<NodeId>) {
    let mut g = Graph::new();
    let inputs: Vec<NodeId> = (0..n).map(|i| g.input(i)).collect();
    let out = f(&mut g, &inputs);
    let seed = g.lit(1.0);
    let grads = derivatives(&mut g, out, seed, n);
    (g, out, grads)
}

fn assert_close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
        "{what}: {a} vs {b}"
    );
}

/// Checks the symbolic gradient against central differences at `x`.
fn check_fd(g: &Graph, out: NodeId, grads: &[NodeId], x: &[f64]) {
    let sym = g.eval(grads, x, &[]);
    for i in 0..x.len() {
        let h = 1e-6;
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[i] += h;
        xm[i] -= h;
        let fd = (g.eval(&[out], &xp, &[])[0] - g.eval(&[out], &xm, &[])[0]) / (2.0 * h);
        assert!(
            (sym[i] - fd).abs() <= 1e-4 * (1.0 + fd.abs()),
            "input {i} at {x:?}: symbolic {} vs numeric {fd}",
            sym[i]
        );
    }
}

#[test]
fn sigmoid_matches_hand_formula() {
    let (g, _, d) = derive(1, |g, x| g.unary(UnaryOp::Sigmoid, x[0]));
    for x in [-3.0, -0.5, 0.0, 0.7, 4.0] {
        let s = 1.0 / (1.0 + f64::exp(-x));
        assert_close(g.eval(&d, &[x], &[])[0], s * (1.0 - s), "σ'");
    }
}

#[test]
fn tanh_matches_hand_formula() {
    let (g, _, d) = derive(1, |g, x| g.unary(UnaryOp::Tanh, x[0]));
    for x in [-2.0, -0.1, 0.0, 1.3] {
        assert_close(g.eval(&d, &[x], &[])[0], 1.0 - x.tanh().powi(2), "tanh'");
    }
}

#[test]
fn product_rule() {
    let (g, _, d) = derive(2, |g, x| g.mul(x[0], x[1]));
    let v = g.eval(&d, &[3.0, -2.0], &[]);
    assert_eq!(v, vec![-2.0, 3.0]);
}

#[test]
fn select_routes_gradient_to_taken_branch() {
    // f(x, y) = x > y ? x·x : 3y
    let (g, _, d) = derive(2, |g, x| {
        let c = g.binary(BinaryOp::Gt, x[0], x[1]);
        let xx = g.mul(x[0], x[0]);
        let y3 = g.scale(x[1], 3.0);
        g.select(c, xx, y3)
    });
    assert_eq!(g.eval(&d, &[2.0, 1.0], &[]), vec![4.0, 0.0]);
    assert_eq!(g.eval(&d, &[1.0, 2.0], &[]), vec![0.0, 3.0]);
}

#[test]
fn every_unary_op_matches_finite_differences() {
    for op in UnaryOp::ALL {
        if op == UnaryOp::Floor {
            continue; // piecewise constant: derivative 0 by rule
        }
        let (g, out, d) = derive(1, |g, x| g.unary(op, x[0]));
        for x in [0.3, 0.9, 1.7] {
            check_fd(&g, out, &d, &[x]);
        }
        if !matches!(op, UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt) {
            for x in [-0.6, -1.4] {
                check_fd(&g, out, &d, &[x]);
            }
        }
    }
}

#[test]
fn every_binary_op_matches_finite_differences() {
    for op in BinaryOp::ALL {
        let (g, out, d) = derive(2, |g, x| g.binary(op, x[0], x[1]));
        for (a, b) in [(0.7, 1.9), (2.3, 0.6), (1.2, 0.45)] {
            check_fd(&g, out, &d, &[a, b]);
        }
    }
}

#[test]
fn swish_with_shared_subexpressions() {
    // x·σ(βx) with β a param; the derivative reuses σ(βx).
    let mut g = Graph::new();
    let x = g.input(0);
    let beta = g.param(0);
    let bx = g.mul(beta, x);
    let s = g.unary(UnaryOp::Sigmoid, bx);
    let out = g.mul(x, s);
    let seed = g.lit(1.0);
    let d = derivatives(&mut g, out, seed, 1);
    for (xv, b) in [(0.5, 1.5), (-1.0, 0.8)] {
        let sv = 1.0 / (1.0 + f64::exp(-b * xv));
        let hand = sv + xv * b * sv * (1.0 - sv);
        assert_close(g.eval(&d, &[xv], &[b])[0], hand, "swish'");
    }
    // σ(βx) appears once in the graph (hash-consing), however often it is used.
    let sigmoids = g
        .nodes()
        .iter()
        .filter(|n| matches!(n, volta_kernels::ir::Node::Unary(UnaryOp::Sigmoid, _)))
        .count();
    assert_eq!(sigmoids, 1);
}

#[test]
fn simplification_folds_constants_and_identities() {
    let mut g = Graph::new();
    let x = g.input(0);
    let one = g.lit(1.0);
    let zero = g.lit(0.0);
    assert_eq!(g.mul(x, one), x);
    assert_eq!(g.add(zero, x), x);
    let two = g.lit(2.0);
    let three = g.lit(3.0);
    let six = g.mul(two, three);
    assert_eq!(g.as_lit(six), Some(6.0));
    let xy = g.mul(x, two);
    let yx = g.mul(two, x);
    assert_eq!(xy, yx, "commutative ops are canonicalised");
}
