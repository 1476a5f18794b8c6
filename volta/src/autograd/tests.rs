//! What the graph keeps of an op's inputs, and what the backward walk releases.
use crate::Cpu;
use crate::tensor::RawTensor;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

type T = RawTensor<Cpu, f64>;

fn tracked(values: &[f64]) -> T {
    T::from_vec(values.to_vec(), &[values.len()]).tracked_leaf()
}

#[test]
fn ops_keep_only_the_input_values_their_rules_read() {
    let (a, b) = (tracked(&[1.0, 2.0]), tracked(&[3.0, 4.0]));
    let mask = T::from_vec(vec![0.0, 2.0], &[2]);
    let kept = |t: &T| {
        let op = t.op().expect("an op");
        let op = op.as_ref().expect("not released");
        op.inputs().iter().map(|i| i.has_data()).collect::<Vec<_>>()
    };
    // A sum's inputs: graph edges only.
    assert_eq!(kept(&a.binary(BinaryOp::Add, &b)), [false, false]);
    // A product of tracked factors keeps both; with an untracked mask (dropout),
    // the mask's values are kept and the tracked factor's are not.
    assert_eq!(kept(&a.binary(BinaryOp::Mul, &b)), [true, true]);
    let dropped = a.binary(BinaryOp::Mul, &mask);
    let op = dropped.op().unwrap();
    let Some(crate::autograd::Op::Binary(x, m, _)) = op.as_ref() else {
        panic!("a binary op")
    };
    assert!(!x.has_data() && m.has_data());
    // exp's rule reads its output, not its input; relu's its input.
    assert_eq!(kept(&a.unary(UnaryOp::Exp)), [false]);
    assert_eq!(kept(&a.unary(UnaryOp::Relu)), [true]);
    // A quotient keeps the divisor only.
    assert_eq!(kept(&a.binary(BinaryOp::Div, &b)), [false, true]);
}

#[test]
fn gradients_through_edges_match_the_rules() {
    // d/da Σ (exp(a) + a·m) / b = (exp(a) + m) / b ; d/db = −(exp(a) + a·m) / b²
    let (a, b) = (tracked(&[0.5, -1.0]), tracked(&[2.0, 4.0]));
    let m = T::from_vec(vec![0.0, 1.25], &[2]);
    let num = a
        .unary(UnaryOp::Exp)
        .binary(BinaryOp::Add, &a.binary(BinaryOp::Mul, &m));
    let loss = num.binary(BinaryOp::Div, &b).reduce(ReduceOp::Sum, 0);
    let grads = loss.backward();
    let (av, bv, mv) = ([0.5f64, -1.0], [2.0f64, 4.0], [0.0, 1.25]);
    let ga = grads.get_raw(a.id()).unwrap().to_vec();
    let gb = grads.get_raw(b.id()).unwrap().to_vec();
    for i in 0..2 {
        let n = av[i].exp() + av[i] * mv[i];
        assert!((ga[i] - (av[i].exp() + mv[i]) / bv[i]).abs() < 1e-12);
        assert!((gb[i] + n / (bv[i] * bv[i])).abs() < 1e-12);
    }
}

#[test]
fn a_view_shared_by_two_losses_carries_gradients_twice() {
    let w = T::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).tracked_leaf();
    let view = w.permute(&[1, 0]);
    let first = view.reduce_all(ReduceOp::Sum).backward();
    let second = view
        .scalar(BinaryOp::Mul, 3.0)
        .reduce_all(ReduceOp::Sum)
        .backward();
    assert_eq!(first.get_raw(w.id()).unwrap().to_vec(), [1.0; 4]);
    assert_eq!(second.get_raw(w.id()).unwrap().to_vec(), [3.0; 4]);
}

#[test]
#[should_panic(expected = "whose op an earlier backward pass has run and released")]
fn a_second_backward_through_released_values_panics() {
    let w = tracked(&[1.0, 2.0, 3.0]);
    let square = w.binary(BinaryOp::Mul, &w);
    let _ = square.reduce_all(ReduceOp::Sum).backward();
    let _ = square.reduce_all(ReduceOp::Sum).backward();
}

#[test]
fn a_transposed_weights_gradient_is_laid_out_like_the_weight() {
    // y = x·Wᵀ with W (out 3, in 4): W's gradient Gᵀ·x comes out row-major, as W
    // is, so an optimiser reads it without a copy.
    let x = T::from_vec((0..20).map(f64::from).collect(), &[5, 4]);
    let w = T::from_vec((0..12).map(|i| f64::from(i) * 0.5).collect(), &[3, 4]).tracked_leaf();
    let g = T::from_vec((0..15).map(|i| f64::from(i % 4)).collect(), &[5, 3]);
    let loss = x
        .matmul(&w.permute(&[1, 0]))
        .binary(BinaryOp::Mul, &g)
        .reduce_all(ReduceOp::Sum);
    let grads = loss.backward();
    let gw = grads.get_raw(w.id()).unwrap();
    assert!(gw.layout().is_contiguous(), "{:?}", gw.layout());
    let (xv, gv) = (x.to_vec(), g.to_vec());
    let expect: Vec<f64> = (0..12)
        .map(|e| (0..5).map(|r| gv[r * 3 + e / 4] * xv[r * 4 + e % 4]).sum())
        .collect();
    assert_eq!(gw.to_vec(), expect);
}

#[test]
fn a_retained_graph_carries_gradients_again() {
    let w = tracked(&[1.0, 2.0, 3.0]);
    let loss = w.binary(BinaryOp::Mul, &w).reduce_all(ReduceOp::Sum);
    let first = loss.backward_retain_graph();
    let second = loss.backward();
    for g in [first, second] {
        assert_eq!(g.get_raw(w.id()).unwrap().to_vec(), [2.0, 4.0, 6.0]);
    }
}
