//! Gradient checks: for every differentiable op, the gradient `backward()` computes
//! must match central finite differences in f64 on random shapes and values.
//!
//! Each case draws its shapes from a seeded [`Rng`] (dynamic `usize` dims), so shapes
//! really vary, plus a few static-shape cases. Inputs stay away from kinks (relu/abs
//! at 0, ties of max/min, jumps of `rem`, the domain edges of log/sqrt/pow).
mod common;

use common::*;
use volta::kernel::{BinaryOp, UnaryOp};
use volta::prelude::*;
use volta::{RawTensor, Window2d};

/// Random shapes tried per case.
const TRIALS: usize = 3;

/// Runs `case` for `TRIALS` random draws from a generator seeded by `seed`.
fn trials(seed: u64, mut case: impl FnMut(&mut Rng)) {
    let mut rng = Rng::seed(seed);
    for _ in 0..TRIALS {
        case(&mut rng);
    }
}

// ---------------------------------------------------------------- the checker itself

/// A gradient that ignores part of the computation must fail the check, or the check
/// proves nothing: `x · detach(x)` has analytic gradient `x`, true derivative `2x`.
#[test]
fn checker_rejects_a_wrong_gradient() {
    let mut rng = Rng::seed(0);
    let x = away_from_zero(&mut rng, (3, 4), 0.5);
    let r = try_check_grad(&mut rng, x.clone(), |x| x.mul(&x.detach()));
    assert!(r.is_err(), "a wrong gradient passed the check");
    let r = try_check_grad(&mut rng, x, |x| x.mul(x));
    assert!(r.is_ok(), "{r:?}");
}

// ---------------------------------------------------------------- binary elementwise

#[test]
fn add_sub_mul() {
    trials(1, |rng| {
        let d = dims2(rng, 5);
        let (a, b) = (randn(rng, d), randn(rng, d));
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| a.add(b));
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| a.sub(b));
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| a.mul(b));
        // Operators on references and owned values, and with scalars.
        check_grad(rng, (a, b), |(a, b)| (a + b) * b - a * 2.0 + 1.5);
    });
}

#[test]
fn div() {
    trials(2, |rng| {
        let d = dims2(rng, 5);
        let (a, b) = (randn(rng, d), away_from_zero(rng, d, 0.5));
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| a.div(b));
        check_grad(rng, (a, b), |(a, b)| a / b);
    });
}

#[test]
fn maximum_minimum() {
    trials(3, |rng| {
        let d = dims2(rng, 5);
        let a = randn(rng, d);
        let b = apart_from(rng, &a, 0.05);
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| a.maximum(b));
        check_grad(rng, (a, b), |(a, b)| a.minimum(b));
    });
}

/// `a = b·(k + frac)` with `frac ∈ [0.1, 0.9]`: away from the jumps of `a mod b`.
fn rem_operands<S: Shape>(rng: &mut Rng, b: &T<S>, shape: S) -> T<S> {
    let data = b
        .to_vec()
        .iter()
        .map(|&b| b * ((rng.below(7) as f64 - 3.0) + 0.1 + 0.8 * rng.uniform()))
        .collect();
    T::from_vec_shaped(data, shape).unwrap()
}

#[test]
fn rem() {
    trials(4, |rng| {
        let d = dims2(rng, 5);
        let b = away_from_zero(rng, d, 0.5);
        let a = rem_operands(rng, &b, d);
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| a.rem(b));
        check_grad(rng, (a, b), |(a, b)| a % b);
    });
}

#[test]
fn pow() {
    trials(5, |rng| {
        let d = dims2(rng, 5);
        let (a, b) = (uniform(rng, d, 0.5, 2.0), uniform(rng, d, -2.0, 2.0));
        check_grad(rng, (a, b), |(a, b)| a.pow(b));
    });
}

// ---------------------------------------------------------------- broadcasting

/// Each binary op with the right operand broadcast along rows, along columns, and
/// both operands expanded from size-1 axes.
#[test]
fn binary_ops_with_broadcast_operands() {
    trials(6, |rng| {
        let (m, n) = dims2(rng, 5);
        let a = randn(rng, (m, n));
        let row = randn(rng, (n,));
        let col = away_from_zero(rng, (m,), 0.5);
        check_grad(rng, (a.clone(), row.clone()), |(a, r)| {
            a.add(&r.broadcast_to::<_, Axis<0>>(a.shape()))
        });
        check_grad(rng, (a.clone(), row.clone()), |(a, r)| {
            a.sub(&r.broadcast_to::<_, Axis<0>>(a.shape()))
        });
        check_grad(rng, (a.clone(), row.clone()), |(a, r)| {
            r.broadcast_to::<_, Axis<0>>(a.shape()).mul(a)
        });
        check_grad(rng, (a.clone(), col.clone()), |(a, c)| {
            a.div(&c.broadcast_to::<_, Axis<1>>(a.shape()))
        });
        // Outer product through expand: (m, 1) ⊙ (1, n).
        let u = randn(rng, (m, 1));
        let v = randn(rng, (1, n));
        check_grad(rng, (u, v), |(u, v)| {
            u.expand_to((m, n)).mul(&v.expand_to((m, n)))
        });
    });
}

#[test]
fn maximum_minimum_rem_pow_with_broadcast_operands() {
    trials(7, |rng| {
        let (m, n) = dims2(rng, 5);
        // Grids shifted by 0.05 never tie (see `distinct`).
        let a = distinct(rng, (m, n), 0.0);
        let row = distinct(rng, (n,), 0.05);
        check_grad(rng, (a.clone(), row.clone()), |(a, r)| {
            a.maximum(&r.broadcast_to::<_, Axis<0>>(a.shape()))
        });
        check_grad(rng, (a, row), |(a, r)| {
            r.broadcast_to::<_, Axis<0>>(a.shape()).minimum(a)
        });

        let b = away_from_zero(rng, (n,), 0.5);
        let bb = b.broadcast_to::<_, Axis<0>>((m, n)).detach();
        let a = rem_operands(rng, &bb, (m, n));
        check_grad(rng, (a, b), |(a, b)| {
            a.rem(&b.broadcast_to::<_, Axis<0>>(a.shape()))
        });

        let base = uniform(rng, (m, 1), 0.5, 2.0);
        let expo = uniform(rng, (m, n), -2.0, 2.0);
        check_grad(rng, (base, expo), |(a, b)| a.expand_to(b.shape()).pow(b));
    });
}

#[test]
fn static_broadcast_and_expand() {
    let mut rng = Rng::seed(8);
    let a = randn(&mut rng, <Rank2<4, 3>>::default());
    let bias = randn(&mut rng, <Rank1<3>>::default());
    let col = randn(&mut rng, <Rank2<4, 1>>::default());
    check_grad(&mut rng, (a.clone(), bias), |(a, b)| {
        a.add(&b.broadcast::<Rank2<4, 3>, _>())
    });
    check_grad(&mut rng, (a, col), |(a, c)| {
        a.mul(&c.expand::<Rank2<4, 3>>())
    });
    // A rank-3 broadcast inserting two axes.
    let v = randn(&mut rng, <Rank1<2>>::default());
    check_grad(&mut rng, v, |v| {
        v.broadcast::<Rank3<3, 2, 4>, Axes2<0, 2>>().sin()
    });
}

// ---------------------------------------------------------------- ops with a scalar

#[test]
fn scalar_ops() {
    trials(9, |rng| {
        let d = dims2(rng, 5);
        let x = randn(rng, d);
        check_grad(rng, x.clone(), |x| x.add_scalar(0.7));
        check_grad(rng, x.clone(), |x| x.mul_scalar(-1.3));
        check_grad(rng, x.clone(), |x| x.div_scalar(2.5));
        check_grad(rng, x.clone(), |x| x - 0.25);
        check_grad(rng, x.clone(), |x| x.square());
        // Integer power of negative bases is defined.
        check_grad(rng, x.clone(), |x| x.powf(3.0));
        let pos = uniform(rng, d, 0.3, 2.0);
        check_grad(rng, pos.clone(), |x| x.powf(2.5));
        check_grad(rng, pos, |x| x.powf(-0.5));
        // max/min/clamp against a threshold the inputs stay 0.05 away from.
        let around = away_from_zero(rng, d, 0.05).add_scalar(0.3);
        check_grad(rng, around.clone(), |x| x.max_scalar(0.3));
        check_grad(rng, around.clone(), |x| x.min_scalar(0.3));
        let wide = away_from_zero(rng, d, 0.05).mul_scalar(0.1);
        check_grad(rng, wide, |x| x.clamp(-0.2, 0.2));
        // rem by a scalar, away from its jumps.
        let c = 1.3;
        let cs = T::full_shaped(d, c);
        let x = rem_operands(rng, &cs, d);
        check_grad(rng, x.clone(), |x| x.rem_scalar(c));
        check_grad(rng, x, |x| x % c);
    });
}

// ---------------------------------------------------------------- unary

#[test]
fn smooth_unary_ops() {
    trials(10, |rng| {
        let d = dims2(rng, 5);
        let x = randn(rng, d);
        check_grad(rng, x.clone(), |x| x.neg());
        check_grad(rng, x.clone(), |x| -x);
        check_grad(rng, x.clone(), |x| x.exp());
        check_grad(rng, x.clone(), |x| x.exp2());
        check_grad(rng, x.clone(), |x| x.sigmoid());
        check_grad(rng, x.clone(), |x| x.tanh());
        check_grad(rng, x.clone(), |x| x.sin());
        check_grad(rng, x.clone(), |x| x.cos());
        check_grad(rng, x.clone(), |x| x.gelu());
        check_grad(rng, x.clone(), |x| x.silu());
        check_grad(rng, x, |x| x.erf());
    });
}

#[test]
fn unary_ops_on_restricted_domains() {
    trials(11, |rng| {
        let d = dims2(rng, 5);
        let pos = uniform(rng, d, 0.2, 3.0);
        check_grad(rng, pos.clone(), |x| x.log());
        check_grad(rng, pos.clone(), |x| x.log2());
        check_grad(rng, pos, |x| x.sqrt());
        let nz = away_from_zero(rng, d, 0.3);
        check_grad(rng, nz, |x| x.recip());
        let nz = away_from_zero(rng, d, 0.05);
        check_grad(rng, nz.clone(), |x| x.relu());
        check_grad(rng, nz, |x| x.abs());
    });
}

#[test]
fn unary_ops_static_shape() {
    let mut rng = Rng::seed(12);
    let x = away_from_zero(&mut rng, <Rank3<2, 3, 2>>::default(), 0.1);
    check_grad(&mut rng, x.clone(), |x| x.relu().mul(&x.tanh()));
    check_grad(&mut rng, x, |x| x.abs().log().gelu());
}

/// `floor` has zero derivative almost everywhere: the check confirms the recorded
/// gradient is zero away from integers.
#[test]
fn floor_has_zero_gradient() {
    let mut rng = Rng::seed(13);
    let x = uniform(&mut rng, (3, 4), 0.1, 0.9).add_scalar(2.0);
    check_grad(&mut rng, x, |x| x.floor().add(x));
}

// ---------------------------------------------------------------- matmul

#[test]
fn matmul_2d() {
    trials(20, |rng| {
        let (m, k, n) = dims3(rng, 5);
        let (a, b) = (randn(rng, (m, k)), randn(rng, (k, n)));
        check_grad(rng, (a, b), |(a, b)| a.matmul(b));
    });
}

#[test]
fn matmul_vector_matrix() {
    trials(21, |rng| {
        let (k, n) = dims2(rng, 5);
        let (v, w) = (randn(rng, (k,)), randn(rng, (k, n)));
        check_grad(rng, (v, w), |(v, w)| v.matmul(w));
    });
}

#[test]
fn matmul_batched() {
    trials(22, |rng| {
        let (bs, m) = dims2(rng, 3);
        let (k, n) = dims2(rng, 4);
        let (a, b) = (randn(rng, (bs, m, k)), randn(rng, (bs, k, n)));
        check_grad(rng, (a, b), |(a, b)| a.matmul(b));
    });
}

#[test]
fn matmul_batched_with_shared_weight() {
    trials(23, |rng| {
        let (bs, m) = dims2(rng, 3);
        let (k, n) = dims2(rng, 4);
        let (a, w) = (randn(rng, (bs, m, k)), randn(rng, (k, n)));
        check_grad(rng, (a, w), |(a, w)| a.matmul(w));
        // The same weight as an explicit stride-0 batch.
        let (a, w) = (randn(rng, (bs, m, k)), randn(rng, (1, k, n)));
        check_grad(rng, (a, w), |(a, w)| a.matmul(&w.expand_to((bs, k, n))));
    });
}

#[test]
fn matmul_rank4() {
    trials(24, |rng| {
        let (bs, h, m) = dims3(rng, 2);
        let (k, n) = dims2(rng, 3);
        let (a, b) = (randn(rng, (bs, h, m, k)), randn(rng, (bs, h, k, n)));
        check_grad(rng, (a, b), |(a, b)| a.matmul(b));
    });
}

#[test]
fn matmul_with_transposed_and_permuted_operands() {
    trials(25, |rng| {
        let (m, k, n) = dims3(rng, 4);
        // Aᵀ·B and A·Bᵀ, both views.
        let (at, b) = (randn(rng, (k, m)), randn(rng, (k, n)));
        check_grad(rng, (at, b), |(at, b)| at.t().matmul(b));
        let (a, bt) = (randn(rng, (m, k)), randn(rng, (n, k)));
        check_grad(rng, (a, bt), |(a, bt)| a.matmul(&bt.t()));
        // A batch taken from a permuted tensor: (m, bs, k) → (bs, m, k).
        let bs = size(rng, 3);
        let (a, b) = (randn(rng, (m, bs, k)), randn(rng, (bs, n, k)));
        check_grad(rng, (a, b), |(a, b)| {
            a.permute::<_, Axes3<1, 0, 2>>()
                .matmul(&b.permute::<_, Axes3<0, 2, 1>>())
        });
    });
}

#[test]
fn matmul_static() {
    let mut rng = Rng::seed(26);
    let a = randn(&mut rng, <Rank2<3, 4>>::default());
    let b = randn(&mut rng, <Rank2<4, 2>>::default());
    check_grad(&mut rng, (a, b), |(a, b)| a.matmul(b));
}

// ---------------------------------------------------------------- reductions

#[test]
fn sum_and_mean_over_axes() {
    trials(30, |rng| {
        let d = dims3(rng, 4);
        let x = randn(rng, d);
        check_grad(rng, x.clone(), |x| x.sum::<_, Axis<0>>());
        check_grad(rng, x.clone(), |x| x.sum::<_, Axis<1>>());
        check_grad(rng, x.clone(), |x| x.sum::<_, Axis<2>>());
        check_grad(rng, x.clone(), |x| x.sum::<_, Axes2<0, 2>>());
        check_grad(rng, x.clone(), |x| x.sum_keepdim::<Axis<1>>());
        check_grad(rng, x.clone(), |x| x.sum_all());
        check_grad(rng, x.clone(), |x| x.mean::<_, Axis<2>>());
        check_grad(rng, x.clone(), |x| x.mean::<_, Axes2<0, 1>>());
        check_grad(rng, x.clone(), |x| x.mean_keepdim::<Axis<0>>());
        check_grad(rng, x, |x| x.mean_all());
    });
}

#[test]
fn max_and_min_over_axes() {
    trials(31, |rng| {
        let d = dims3(rng, 4);
        let x = distinct(rng, d, 0.0);
        check_grad(rng, x.clone(), |x| x.max::<_, Axis<0>>());
        check_grad(rng, x.clone(), |x| x.max::<_, Axis<2>>());
        check_grad(rng, x.clone(), |x| x.max::<_, Axes2<1, 2>>());
        check_grad(rng, x.clone(), |x| x.max_keepdim::<Axis<1>>());
        check_grad(rng, x.clone(), |x| x.max_all());
        check_grad(rng, x.clone(), |x| x.min::<_, Axis<1>>());
        check_grad(rng, x.clone(), |x| x.min_keepdim::<Axis<2>>());
        check_grad(rng, x, |x| x.min_all());
    });
}

#[test]
fn reductions_of_views() {
    trials(32, |rng| {
        let (m, n) = dims2(rng, 5);
        let x = distinct(rng, (m, n), 0.0);
        check_grad(rng, x.clone(), |x| x.t().sum::<_, Axis<1>>());
        check_grad(rng, x.clone(), |x| x.t().max::<_, Axis<0>>());
        check_grad(rng, x, |x| x.t().mean_keepdim::<Axis<1>>().exp());
    });
}

// ---------------------------------------------------------------- movement

#[test]
fn permute_and_transpose() {
    trials(40, |rng| {
        let d = dims3(rng, 4);
        let x = randn(rng, d);
        check_grad(rng, x.clone(), |x| x.permute::<_, Axes3<2, 0, 1>>());
        // A non-elementwise op after the permute, so the layout matters.
        check_grad(rng, x, |x| {
            x.permute::<_, Axes3<1, 2, 0>>()
                .sum_keepdim::<Axis<2>>()
                .sin()
        });
        let d = dims2(rng, 5);
        let m = randn(rng, d);
        check_grad(rng, m, |m| m.t().exp());
    });
}

#[test]
fn expand_and_broadcast() {
    trials(41, |rng| {
        let (m, n) = dims2(rng, 5);
        let row = randn(rng, (1, n));
        check_grad(rng, row, |r| r.expand_to((m, n)).sin());
        let col = randn(rng, (m,));
        check_grad(rng, col, |c| c.broadcast_to::<_, Axis<1>>((m, n)).exp());
        let len = size(rng, 3);
        let s = randn(rng, (len,));
        check_grad(rng, s, |s| {
            let d = s.dims()[0];
            s.broadcast_to::<_, Axes2<0, 2>>((m, d, n)).cos()
        });
    });
}

#[test]
fn reshape_and_flatten() {
    let mut rng = Rng::seed(42);
    let x = randn(&mut rng, <Rank2<3, 4>>::default());
    check_grad(&mut rng, x.clone(), |x| {
        x.reshape::<Rank3<2, 3, 2>>().sum_keepdim::<Axis<2>>()
    });
    // Reshape of a non-contiguous view (needs a copy).
    check_grad(&mut rng, x.clone(), |x| {
        x.t().reshape::<Rank2<2, 6>>().max_keepdim::<Axis<1>>()
    });
    let x3 = randn(&mut rng, <Rank3<2, 3, 4>>::default());
    check_grad(&mut rng, x3.clone(), |x| {
        x.flatten::<Rank2<6, 4>>().softmax::<Axis<0>>()
    });
    check_grad(&mut rng, x3, |x| {
        x.permute::<Rank3<4, 2, 3>, _>()
            .flatten::<Rank1<24>>()
            .sin()
    });
    trials(43, |rng| {
        let (m, n) = dims2(rng, 5);
        let x = randn(rng, (m, n));
        check_grad(rng, x.clone(), |x| x.reshape_to((n, m)).unwrap().tanh());
        check_grad(rng, x.clone(), |x| {
            x.t()
                .reshape_to((m * n,))
                .unwrap()
                .mul(&x.t().reshape_to((m * n,)).unwrap())
        });
        // A sliced (offset) view reshaped.
        let x = randn(rng, (m + 1, n));
        check_grad(rng, x, |x| {
            x.slice::<Axis<0>>(1..m + 1)
                .reshape_to((n * m,))
                .unwrap()
                .exp()
        });
    });
}

#[test]
fn concat_slice_shrink() {
    trials(44, |rng| {
        let (m, n) = dims2(rng, 4);
        let (p, q) = dims2(rng, 3);
        let (a, b) = (randn(rng, (m, n)), randn(rng, (p, n)));
        check_grad(rng, (a, b), |(a, b)| {
            a.concat::<Axis<0>, (usize, usize), _>(b).sin()
        });
        let (a, b) = (randn(rng, (m, n)), randn(rng, (m, q)));
        check_grad(rng, (a, b), |(a, b)| {
            a.concat::<Axis<1>, (usize, usize), _>(b)
                .sum_keepdim::<Axis<1>>()
                .exp()
        });
        let x = randn(rng, (m, n + 2));
        check_grad(rng, x.clone(), |x| x.slice::<Axis<1>>(1..n + 1).tanh());
        check_grad(rng, x.clone(), |x| {
            x.shrink::<Axis<1>, 2, (usize, usize)>().cos()
        });
        check_grad(rng, x, |x| x.t().slice::<Axis<0>>(0..n).exp());
    });
    let mut rng = Rng::seed(45);
    let x = randn(&mut rng, <Rank2<5, 4>>::default());
    check_grad(&mut rng, x.clone(), |x| {
        x.shrink::<Axis<0>, 1, Rank2<3, 4>>().sin()
    });
    let y = randn(&mut rng, <Rank2<5, 2>>::default());
    check_grad(&mut rng, (x, y), |(x, y)| {
        x.concat::<Axis<1>, Rank2<5, 6>, _>(y)
            .max_keepdim::<Axis<0>>()
    });
}

#[test]
fn stride_and_pad() {
    let mut rng = Rng::seed(46);
    let x = randn(&mut rng, <Rank2<5, 4>>::default());
    check_grad(&mut rng, x.clone(), |x| {
        x.stride::<Axis<0>, 2, Rank2<3, 4>>().sin()
    });
    check_grad(&mut rng, x.clone(), |x| {
        x.stride::<Axis<1>, 3, Rank2<5, 2>>().exp()
    });
    check_grad(&mut rng, x, |x| {
        x.pad::<Axis<1>, 1, 2, Rank2<5, 7>>(0.5)
            .sum_keepdim::<Axis<1>>()
    });
    trials(47, |rng| {
        let (m, n) = dims2(rng, 5);
        let x = randn(rng, (m, n));
        check_grad(rng, x.clone(), |x| {
            x.stride::<Axis<1>, 2, (usize, usize)>().tanh()
        });
        check_grad(rng, x.clone(), |x| {
            x.pad::<Axis<0>, 2, 1, (usize, usize)>(0.0).sin()
        });
        // Pad of a transposed view, then a stride of the result.
        check_grad(rng, x, |x| {
            x.t()
                .pad::<Axis<1>, 1, 1, (usize, usize)>(-1.0)
                .stride::<Axis<1>, 2, (usize, usize)>()
                .exp()
        });
    });
}

// ---------------------------------------------------------------- softmax, select, indexing

#[test]
fn softmax_and_log_softmax() {
    trials(50, |rng| {
        let d = dims2(rng, 5);
        let x = randn(rng, d);
        check_grad(rng, x.clone(), |x| x.softmax::<Axis<1>>());
        check_grad(rng, x.clone(), |x| x.softmax::<Axis<0>>());
        check_grad(rng, x.clone(), |x| x.log_softmax::<Axis<1>>());
        check_grad(rng, x, |x| x.log_softmax::<Axis<0>>());
        let d3 = dims3(rng, 3);
        let x3 = randn(rng, d3);
        check_grad(rng, x3.clone(), |x| x.softmax::<Axis<1>>());
        check_grad(rng, x3, |x| {
            x.permute::<_, Axes3<2, 0, 1>>().log_softmax::<Axis<2>>()
        });
    });
}

#[test]
fn select() {
    trials(51, |rng| {
        let d = dims2(rng, 5);
        let (a, b) = (randn(rng, d), randn(rng, d));
        let mask =
            T::from_vec_shaped((0..d.0 * d.1).map(|_| rng.below(2) as f64).collect(), d).unwrap();
        check_grad(rng, (a.clone(), b.clone()), |(a, b)| mask.select(a, b));
        // A mask from a comparison (here: the larger of the two, elementwise).
        let b = apart_from(rng, &a, 0.05);
        check_grad(rng, (a, b), |(a, b)| a.gt(b).select(a, &b.exp()));
    });
}

#[test]
fn gather_and_index_select() {
    trials(52, |rng| {
        let (m, n) = dims2(rng, 5);
        let x = randn(rng, (m, n));
        // Repeated indices: the backward pass must add, not overwrite.
        let p = size(rng, 6);
        let idx = indices(rng, (m, p), n);
        check_grad(rng, x.clone(), |x| x.gather::<Axis<1>, _>(&idx));
        let idx = indices(rng, (p, n), m);
        check_grad(rng, x.clone(), |x| x.gather::<Axis<0>, _>(&idx));
        let ids = indices(rng, (p,), m);
        check_grad(rng, x.clone(), |x| x.index_select(&ids));
        // Gather from a transposed view.
        let idx = indices(rng, (n, p), m);
        check_grad(rng, x, |x| x.t().gather::<Axis<1>, _>(&idx));
    });
}

// ---------------------------------------------------------------- windows, normalisation

/// Dynamic rank-4 and rank-6 shapes (images, unfolded columns).
type Dims4 = (usize, usize, usize, usize);
type Dims6 = (usize, usize, usize, usize, usize, usize);

/// A raw op's result, typed with its run-time dims.
fn typed<S: Shape>(raw: RawTensor<Cpu, f64>) -> T<S> {
    T::try_from_raw(raw).expect("a shape of the right rank")
}

/// A random window (kernel 1..=3, stride 1..=2, padding 0..=1, dilation 1..=2) and
/// an (N, C, H, W) input it fits.
fn random_window(rng: &mut Rng) -> (Window2d, Dims4) {
    let mut pair = |f: &mut dyn FnMut(&mut Rng) -> usize| [f(rng), f(rng)];
    let win = Window2d {
        kernel: pair(&mut |r| size(r, 3)),
        stride: pair(&mut |r| size(r, 2)),
        padding: pair(&mut |r| r.below(2)),
        dilation: pair(&mut |r| size(r, 2)),
    };
    let fit = |a: usize, rng: &mut Rng| {
        let extent = win.dilation[a] * (win.kernel[a] - 1) + 1;
        extent.saturating_sub(2 * win.padding[a]).max(1) + rng.below(3)
    };
    let (h, w) = (fit(0, rng), fit(1, rng));
    (win, (size(rng, 2), size(rng, 2), h, w))
}

#[test]
fn unfold2d_and_fold2d_random_windows() {
    trials(70, |rng| {
        for _ in 0..3 {
            let (win, (n, c, h, w)) = random_window(rng);
            let x = randn(rng, (n, c, h, w));
            // The pad value is a constant: it gets no gradient, whatever it is.
            check_grad(rng, x, |x| typed::<Dims6>(x.raw().unfold2d(win, 0.7)));
            let [oh, ow] = win.output([h, w]).unwrap();
            let cols = randn(rng, (n, oh, ow, c, win.kernel[0], win.kernel[1]));
            check_grad(rng, cols, |c| typed::<Dims4>(c.raw().fold2d(win, [h, w])));
        }
    });
}

#[test]
fn unfold2d_odd_window_of_a_channels_last_view() {
    let mut rng = Rng::seed(71);
    // Stride 2 × 1, padding 1 × 2, dilation 2 × 1, pad value −3; the input is an
    // NHWC tensor viewed as NCHW (a permutation, no copy).
    let win = Window2d {
        kernel: [2, 3],
        stride: [2, 1],
        padding: [1, 2],
        dilation: [2, 1],
    };
    let x = randn(&mut rng, (2, 5, 4, 3));
    check_grad(&mut rng, x, |x| {
        typed::<Dims6>(x.raw().permute(&[0, 3, 1, 2]).unfold2d(win, -3.0))
    });
    // And fold2d of a permuted view of its columns.
    let [oh, ow] = win.output([5, 4]).unwrap();
    let cols = randn(&mut rng, (2, 3, 2, 3, oh, ow));
    check_grad(&mut rng, cols, |c| {
        typed::<Dims4>(c.raw().permute(&[0, 4, 5, 1, 2, 3]).fold2d(win, [5, 4]))
    });
}

/// A convolution as unfold → matmul, and average pooling as unfold → mean: every
/// input and the weights get checked through the window ops.
#[test]
fn convolution_and_pooling_chains() {
    trials(72, |rng| {
        let (win, (n, c, h, w)) = random_window(rng);
        let [oh, ow] = win.output([h, w]).unwrap();
        let taps = c * win.kernel[0] * win.kernel[1];
        let f = size(rng, 3);
        let x = randn(rng, (n, c, h, w));
        let wt = randn(rng, (taps, f));
        check_grad(rng, (x.clone(), wt), |(x, wt)| {
            let cols = x.raw().unfold2d(win, 0.0).reshape(&[n * oh * ow, taps]);
            let y = cols.matmul(wt.raw()).reshape(&[n, oh, ow, f]);
            typed::<Dims4>(y.permute(&[0, 3, 1, 2]).unary(UnaryOp::Tanh))
        });
        check_grad(rng, x, |x| {
            let cols = x.raw().unfold2d(win, 0.0);
            let cols = cols.reshape(&[n, oh, ow, c, win.kernel[0] * win.kernel[1]]);
            typed::<Dims4>(cols.mean_axis(4).reshape(&[n, oh, ow, c]))
        });
    });
}

#[test]
fn normalize_layer_and_rms_along_each_axis() {
    trials(73, |rng| {
        let (a, b, c) = (size(rng, 3), 1 + size(rng, 4), size(rng, 3));
        let x = randn(rng, (a, b, c + 1));
        for center in [true, false] {
            // The last axis (layer norm) and a middle one (strided rows).
            check_grad(rng, x.clone(), |x| {
                typed::<(usize, usize, usize)>(x.raw().normalize(2, center, 1e-3))
            });
            check_grad(rng, x.clone(), |x| {
                typed::<(usize, usize, usize)>(x.raw().normalize(1, center, 1e-5))
            });
            // Rows of a transposed view, and eps 0.
            check_grad(rng, x.clone(), |x| {
                typed::<(usize, usize, usize)>(
                    x.raw().permute(&[2, 0, 1]).normalize(2, center, 0.0),
                )
            });
        }
    });
}

/// Batch normalisation's statistics: each channel of (N, C, H, W) over (N, H, W),
/// then a scale per channel.
#[test]
fn normalize_channels_of_an_image_batch() {
    trials(74, |rng| {
        let (n, c, h, w) = (size(rng, 2), size(rng, 3), size(rng, 3), 1 + size(rng, 2));
        let x = randn(rng, (n, c, h, w));
        let gamma = randn(rng, (c,));
        check_grad(rng, (x, gamma), |(x, g)| {
            let rows = x.raw().permute(&[1, 0, 2, 3]).reshape(&[c, n * h * w]);
            let y = rows.normalize(1, true, 1e-5).binary(
                BinaryOp::Mul,
                &g.raw().reshape(&[c, 1]).expand(&[c, n * h * w]),
            );
            typed::<Dims4>(y.reshape(&[c, n, h, w]).permute(&[1, 0, 2, 3]))
        });
    });
}

// ---------------------------------------------------------------- composite chains

/// Two-layer MLP with cross-entropy built from log_softmax + gather; every
/// parameter and the input get checked.
#[test]
fn mlp_cross_entropy() {
    trials(60, |rng| {
        let n = size(rng, 6);
        let x = randn(rng, (n, Const::<4>));
        let labels = indices(rng, (n, Const::<1>), 3);
        let w1 = randn(rng, <Rank2<4, 5>>::default()).mul_scalar(0.5);
        let b1 = randn(rng, <Rank1<5>>::default());
        let w2 = randn(rng, <Rank2<5, 3>>::default()).mul_scalar(0.5);
        let b2 = randn(rng, <Rank1<3>>::default());
        check_grad(rng, (x, w1, b1, w2, b2), |(x, w1, b1, w2, b2)| {
            let h = x
                .matmul(w1)
                .add(&b1.broadcast_to::<_, Axis<0>>((n, Const)))
                .tanh();
            let logits = h.matmul(w2).add(&b2.broadcast_to::<_, Axis<0>>((n, Const)));
            logits
                .log_softmax::<Axis<1>>()
                .gather::<Axis<1>, _>(&labels)
                .mean_all()
                .neg()
        });
    });
}

/// Layer normalisation: keep-dim reductions broadcast back, a tensor used many
/// times, sqrt and division.
#[test]
fn layer_norm_chain() {
    trials(61, |rng| {
        let (m, n) = dims2(rng, 5);
        let n = n + 1; // variance of one element is degenerate
        let x = randn(rng, (m, n));
        let gain = randn(rng, (n,));
        check_grad(rng, (x, gain), |(x, g)| {
            let mu = x.mean_keepdim::<Axis<1>>().expand_to((m, n));
            let c = x.sub(&mu);
            let var = c.square().mean_keepdim::<Axis<1>>().expand_to((m, n));
            c.div(&var.add_scalar(1e-3).sqrt())
                .mul(&g.broadcast_to::<_, Axis<0>>((m, n)))
                .gelu()
        });
    });
}

/// A tensor used by several branches gets the sum of their gradients.
#[test]
fn shared_subexpressions() {
    trials(62, |rng| {
        let d = dims2(rng, 5);
        let x = randn(rng, d);
        check_grad(rng, x, |x| {
            let e = x.exp();
            e.mul(x).add(&e.sin()).sub(&x.t().t().silu())
        });
    });
}

// ---------------------------------------------------------------- losses

/// Residuals `r` with `|r|` at least `margin` from `delta` (the kink of Huber's
/// second derivative), signs random.
fn away_from_delta<S: Shape>(rng: &mut Rng, shape: S, delta: f64, margin: f64) -> T<S> {
    let data = (0..shape.numel())
        .map(|_| {
            let r = 2.0 * delta * rng.normal();
            if (r.abs() - delta).abs() < margin {
                r + 4.0 * margin * r.signum()
            } else {
                r
            }
        })
        .collect();
    T::from_vec_shaped(data, shape).unwrap()
}

#[test]
fn loss_nll() {
    use volta::nn::loss::nll;
    trials(80, |rng| {
        let (n, c) = dims2(rng, 5);
        let log_probs = randn(rng, (n, c));
        let targets = indices(rng, (n,), c);
        check_grad(rng, log_probs.clone(), |x| nll(x, &targets));
        // Through a log-softmax: cross-entropy.
        check_grad(rng, log_probs, |x| {
            nll(&x.log_softmax::<Axis<1>>(), &targets)
        });
    });
}

#[test]
fn loss_cross_entropy_smoothed() {
    use volta::nn::loss::{cross_entropy, cross_entropy_smoothed};
    trials(81, |rng| {
        let (n, c) = dims2(rng, 5);
        let targets = indices(rng, (n,), c);
        // Unit-scale logits, and large ones (saturated softmax rows).
        for scale in [1.0, 20.0] {
            let logits = randn(rng, (n, c)).mul_scalar(scale);
            check_grad(rng, logits.clone(), |x| cross_entropy(x, &targets));
            for eps in [0.0, 0.1, 0.7, 1.0] {
                check_grad(rng, logits.clone(), |x| {
                    cross_entropy_smoothed(x, &targets, eps)
                });
            }
        }
    });
    // Static shapes.
    let mut rng = Rng::seed(82);
    let logits = randn(&mut rng, <Rank2<3, 4>>::default());
    let targets = Tensor::<Rank1<3>, Cpu, u32>::from_array([3, 0, 2]);
    check_grad(&mut rng, logits, |x| {
        cross_entropy_smoothed(x, &targets, 0.25)
    });
}

#[test]
fn loss_binary_cross_entropy_with_logits() {
    use volta::nn::loss::binary_cross_entropy_with_logits as bce;
    trials(83, |rng| {
        let d = dims2(rng, 5);
        // Logits up to about ±9 (probabilities close to 0 and 1), soft targets in
        // [0, 1]; the gradient of both is checked.
        let x = randn(rng, d).mul_scalar(3.0);
        let y = uniform(rng, d, 0.0, 1.0);
        check_grad(rng, (x.clone(), y), |(x, y)| bce(x, y));
        // Hard 0/1 targets, gradient of the logits only.
        let hard = indices(rng, d, 2)
            .to_vec()
            .into_iter()
            .map(f64::from)
            .collect();
        let hard = T::from_vec_shaped(hard, d).unwrap();
        check_grad(rng, x, |x| bce(x, &hard));
    });
    let mut rng = Rng::seed(84);
    let x = randn(&mut rng, <Rank3<2, 3, 2>>::default());
    let y = uniform(&mut rng, <Rank3<2, 3, 2>>::default(), 0.0, 1.0);
    check_grad(&mut rng, (x, y), |(x, y)| bce(x, y));
}

#[test]
fn loss_l1() {
    use volta::nn::loss::l1;
    trials(85, |rng| {
        let d = dims3(rng, 4);
        let p = randn(rng, d);
        // Away from p = t, the kink of |p − t|.
        let t = apart_from(rng, &p, 0.1);
        check_grad(rng, (p, t), |(p, t)| l1(p, t));
    });
}

#[test]
fn loss_huber() {
    use volta::nn::loss::huber;
    trials(86, |rng| {
        let d = dims2(rng, 5);
        for delta in [0.3, 1.0, 2.5] {
            let p = randn(rng, d);
            let t = {
                let _guard = volta::no_grad();
                p.sub(&away_from_delta(rng, d, delta, 0.05))
            };
            check_grad(rng, (p, t), |(p, t)| huber(p, t, delta));
        }
    });
}

#[test]
fn rope_and_causal_attention() {
    use volta::nn::causal_attention;
    trials(90, |rng| {
        let x = randn(rng, (2usize, 3usize, Const::<4>));
        check_grad(rng, x, |x| x.rope(3, 100.0));
        // Grouped queries (4 heads over 2 kv heads) at a cache offset of 2.
        let q = randn(rng, (Const::<1>, Const::<4>, Const::<3>, Const::<4>));
        let k = randn(rng, (Const::<1>, Const::<2>, Const::<5>, Const::<4>));
        let v = randn(rng, (Const::<1>, Const::<2>, Const::<5>, Const::<4>));
        check_grad(rng, (q, k, v), |(q, k, v)| causal_attention(q, k, v, 2));
    });
}
