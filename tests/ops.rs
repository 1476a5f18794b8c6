//! Op semantics: forward values (f32) against hand-computed or independently
//! computed results, views against contiguous copies, creation, errors, and the
//! behaviour of autograd.
mod common;

use std::f32::consts::SQRT_2;
use std::sync::Arc;
use volta::prelude::*;
use volta::shape::ShapeError;
use volta::{RawTensor, Window2d};

/// Tolerance for f32 results computed in a different order than the reference.
const TOL: f32 = 1e-5;

#[track_caller]
fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "lengths differ: {got:?} vs {want:?}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}\n got: {got:?}\nwant: {want:?}"
        );
    }
}

fn randn<S: Shape>(rng: &mut Rng, shape: S) -> Tensor<S> {
    Tensor::randn_shaped(shape, rng)
}

/// A contiguous copy with the same shape (built from host data, so it shares nothing
/// with the view).
fn copy<S: Shape>(t: &Tensor<S>) -> Tensor<S> {
    Tensor::from_vec_shaped(t.to_vec(), t.shape()).unwrap()
}

// ---------------------------------------------------------------- elementwise values

#[test]
fn unary_ops_on_literals() {
    let x = Tensor::<Rank1<4>>::from_array([-1.5, -0.25, 0.5, 2.0]);
    let xs = x.to_vec();
    let map = |f: fn(f32) -> f32| xs.iter().map(|&v| f(v)).collect::<Vec<_>>();
    assert_eq!(x.neg().to_vec(), vec![1.5, 0.25, -0.5, -2.0]);
    assert_eq!((-&x).to_vec(), vec![1.5, 0.25, -0.5, -2.0]);
    assert_close(&x.exp().to_vec(), &map(f32::exp), TOL);
    assert_close(
        &x.exp2().to_vec(),
        &[0.5 / SQRT_2, 0.840_896_4, SQRT_2, 4.0],
        TOL,
    );
    assert_close(&x.sin().to_vec(), &map(f32::sin), TOL);
    assert_close(&x.cos().to_vec(), &map(f32::cos), TOL);
    assert_close(&x.tanh().to_vec(), &map(f32::tanh), TOL);
    assert_eq!(x.relu().to_vec(), vec![0.0, 0.0, 0.5, 2.0]);
    assert_eq!(x.abs().to_vec(), vec![1.5, 0.25, 0.5, 2.0]);
    assert_eq!(x.floor().to_vec(), vec![-2.0, -1.0, 0.0, 2.0]);
    assert_close(
        &x.sigmoid().to_vec(),
        &map(|v| 1.0 / (1.0 + (-v).exp())),
        TOL,
    );
    assert_close(&x.silu().to_vec(), &map(|v| v / (1.0 + (-v).exp())), TOL);
    // erf and GELU against values tabulated with Python's math.erf.
    let erf = [-0.966_105_1, -0.276_326_4, 0.520_499_9, 0.995_322_3];
    assert_close(&x.erf().to_vec(), &erf, 1e-6);
    // GELU(x) = x·Φ(x) = ½x(1 + erf(x/√2)).
    let gelu = [-0.100_210_8, -0.100_323_4, 0.345_731_2, 1.954_499_7];
    assert_close(&x.gelu().to_vec(), &gelu, 1e-6);

    let p = Tensor::<Rank1<3>>::from_array([0.25, 1.0, 4.0]);
    assert_eq!(p.sqrt().to_vec(), vec![0.5, 1.0, 2.0]);
    assert_eq!(p.recip().to_vec(), vec![4.0, 1.0, 0.25]);
    assert_eq!(p.log2().to_vec(), vec![-2.0, 0.0, 2.0]);
    assert_close(&p.log().to_vec(), &[-1.386_294_4, 0.0, 1.386_294_4], TOL);
}

#[test]
fn binary_ops_on_literals() {
    let a = Tensor::<Rank2<2, 3>>::from_array([[1.0, -7.0, 7.0], [2.0, 3.0, -4.5]]);
    let b = Tensor::<Rank2<2, 3>>::from_array([[4.0, 3.0, -3.0], [2.0, 0.5, 2.0]]);
    assert_eq!(a.add(&b).to_vec(), vec![5.0, -4.0, 4.0, 4.0, 3.5, -2.5]);
    assert_eq!((&a - &b).to_vec(), vec![-3.0, -10.0, 10.0, 0.0, 2.5, -6.5]);
    assert_eq!((&a * &b).to_vec(), vec![4.0, -21.0, -21.0, 4.0, 1.5, -9.0]);
    assert_eq!(
        (a.clone() / b.clone()).to_vec(),
        vec![0.25, -7.0 / 3.0, -7.0 / 3.0, 1.0, 6.0, -2.25]
    );
    assert_eq!(a.maximum(&b).to_vec(), vec![4.0, 3.0, 7.0, 2.0, 3.0, 2.0]);
    assert_eq!(
        a.minimum(&b).to_vec(),
        vec![1.0, -7.0, -3.0, 2.0, 0.5, -4.5]
    );
    // Python's `%`: the result has the sign of the divisor.
    assert_eq!((&a % &b).to_vec(), vec![1.0, 2.0, -2.0, 0.0, 0.0, 1.5]);
    assert_eq!(a.rem(&b).to_vec(), (&a % &b).to_vec());
    let base = Tensor::<Rank1<3>>::from_array([2.0, 9.0, 4.0]);
    let expo = Tensor::<Rank1<3>>::from_array([3.0, 0.5, -1.0]);
    assert_eq!(base.pow(&expo).to_vec(), vec![8.0, 3.0, 0.25]);
}

#[test]
fn scalar_ops_on_literals() {
    let x = Tensor::<Rank1<4>>::from_array([-2.0, -0.5, 1.0, 3.0]);
    assert_eq!(x.add_scalar(1.0).to_vec(), vec![-1.0, 0.5, 2.0, 4.0]);
    assert_eq!((&x + 1.0).to_vec(), vec![-1.0, 0.5, 2.0, 4.0]);
    assert_eq!((&x - 1.0).to_vec(), vec![-3.0, -1.5, 0.0, 2.0]);
    assert_eq!(x.mul_scalar(2.0).to_vec(), vec![-4.0, -1.0, 2.0, 6.0]);
    assert_eq!((x.clone() * 2.0).to_vec(), vec![-4.0, -1.0, 2.0, 6.0]);
    assert_eq!(x.div_scalar(2.0).to_vec(), vec![-1.0, -0.25, 0.5, 1.5]);
    assert_eq!((&x / 2.0).to_vec(), vec![-1.0, -0.25, 0.5, 1.5]);
    assert_eq!(x.powf(2.0).to_vec(), vec![4.0, 0.25, 1.0, 9.0]);
    assert_eq!(x.square().to_vec(), vec![4.0, 0.25, 1.0, 9.0]);
    assert_eq!(x.max_scalar(0.0).to_vec(), vec![0.0, 0.0, 1.0, 3.0]);
    assert_eq!(x.min_scalar(0.0).to_vec(), vec![-2.0, -0.5, 0.0, 0.0]);
    assert_eq!(x.clamp(-1.0, 2.0).to_vec(), vec![-1.0, -0.5, 1.0, 2.0]);
    assert_eq!(x.rem_scalar(2.0).to_vec(), vec![0.0, 1.5, 1.0, 1.0]);
    assert_eq!((&x % -2.0).to_vec(), vec![0.0, -0.5, -1.0, -1.0]);
}

#[test]
fn comparisons_and_select() {
    let a = Tensor::<Rank1<4>>::from_array([1.0, 2.0, 3.0, 4.0]);
    let b = Tensor::<Rank1<4>>::from_array([4.0, 2.0, 1.0, 4.5]);
    assert_eq!(a.lt(&b).to_vec(), vec![1.0, 0.0, 0.0, 1.0]);
    assert_eq!(a.le(&b).to_vec(), vec![1.0, 1.0, 0.0, 1.0]);
    assert_eq!(a.gt(&b).to_vec(), vec![0.0, 0.0, 1.0, 0.0]);
    assert_eq!(a.ge(&b).to_vec(), vec![0.0, 1.0, 1.0, 0.0]);
    assert_eq!(a.eq(&b).to_vec(), vec![0.0, 1.0, 0.0, 0.0]);
    assert_eq!(a.ne(&b).to_vec(), vec![1.0, 0.0, 1.0, 1.0]);
    assert_eq!(a.gt_scalar(2.5).to_vec(), vec![0.0, 0.0, 1.0, 1.0]);
    assert_eq!(a.le_scalar(2.0).to_vec(), vec![1.0, 1.0, 0.0, 0.0]);
    assert_eq!(a.eq_scalar(3.0).to_vec(), vec![0.0, 0.0, 1.0, 0.0]);
    assert_eq!(a.lt(&b).select(&a, &b).to_vec(), vec![1.0, 2.0, 1.0, 4.0]);
    // Any non-zero value selects the first operand.
    let mask = Tensor::<Rank1<4>>::from_array([0.0, -3.0, 0.5, 0.0]);
    assert_eq!(mask.select(&a, &b).to_vec(), vec![4.0, 2.0, 3.0, 4.5]);
}

// ---------------------------------------------------------------- broadcasting

#[test]
fn broadcasting() {
    let m = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let row = Tensor::<Rank1<3>>::from_array([10.0, 20.0, 30.0]);
    let col = Tensor::<Rank1<2>>::from_array([100.0, 200.0]);
    let r: Tensor<Rank2<2, 3>> = row.broadcast();
    assert_eq!(r.to_vec(), vec![10.0, 20.0, 30.0, 10.0, 20.0, 30.0]);
    assert_eq!(
        m.add(&row.broadcast::<Rank2<2, 3>, _>()).to_vec(),
        vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]
    );
    assert_eq!(
        m.add(&col.broadcast::<Rank2<2, 3>, Axis<1>>()).to_vec(),
        vec![101.0, 102.0, 103.0, 204.0, 205.0, 206.0]
    );
    // Expand from size-1 axes on both sides: an outer sum.
    let u = Tensor::<Rank2<2, 1>>::from_array([[1.0], [2.0]]);
    let v = Tensor::<Rank2<1, 3>>::from_array([[10.0, 20.0, 30.0]]);
    let outer = u.expand::<Rank2<2, 3>>().add(&v.expand::<Rank2<2, 3>>());
    assert_eq!(outer.to_vec(), vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
    // Dynamic shapes, and a rank-3 broadcast inserting two axes.
    let d = Tensor::<(usize,)>::from_vec_shaped(vec![1.0, 2.0], (2,)).unwrap();
    let b = d.broadcast_to::<_, Axes2<0, 2>>((2usize, 2usize, 2usize));
    assert_eq!(b.to_vec(), vec![1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0]);
}

// ---------------------------------------------------------------- non-contiguous inputs

/// Runs a battery of ops on `v` (a view) and on a contiguous copy of it; the results
/// must agree.
fn same_as_contiguous<S>(v: &Tensor<S>, other: &Tensor<S>)
where
    S: SameShape<S> + ReplaceAxis<Axis<0>, Const<1>> + ReplaceAxis<Axis<1>, Const<1>>,
{
    let c = copy(v);
    let pairs: Vec<(Vec<f32>, Vec<f32>)> = vec![
        (v.to_vec(), c.to_vec()),
        (v.exp().to_vec(), c.exp().to_vec()),
        (v.add(other).to_vec(), c.add(other).to_vec()),
        (other.mul(v).to_vec(), other.mul(&c).to_vec()),
        (v.maximum(v).to_vec(), c.maximum(&c).to_vec()),
        (v.add_scalar(1.0).to_vec(), c.add_scalar(1.0).to_vec()),
        (v.sum_all().to_vec(), c.sum_all().to_vec()),
        (v.max_all().to_vec(), c.max_all().to_vec()),
        (
            v.sum_keepdim::<Axis<0>>().to_vec(),
            c.sum_keepdim::<Axis<0>>().to_vec(),
        ),
        (
            v.min_keepdim::<Axis<1>>().to_vec(),
            c.min_keepdim::<Axis<1>>().to_vec(),
        ),
        (
            v.softmax::<Axis<1>>().to_vec(),
            c.softmax::<Axis<1>>().to_vec(),
        ),
        (v.gt(other).to_vec(), c.gt(other).to_vec()),
        (
            v.gt(other).select(v, other).to_vec(),
            c.gt(other).select(&c, other).to_vec(),
        ),
    ];
    for (i, (a, b)) in pairs.iter().enumerate() {
        assert_close(a, b, 1e-6);
        assert!(!a.is_empty(), "case {i} is empty");
    }
}

#[test]
fn views_give_the_same_results_as_contiguous_copies() {
    let mut rng = Rng::seed(7);
    let x = randn(&mut rng, (5usize, 6usize));
    let other = randn(&mut rng, (6usize, 5usize));
    // Permuted (transposed).
    same_as_contiguous(&x.t(), &other);
    // Strided along both axes: (5, 6) → (3, 3).
    let s = x
        .stride::<Axis<0>, 2, (usize, usize)>()
        .stride::<Axis<1>, 2, (usize, usize)>();
    let o33 = randn(&mut rng, (3usize, 3usize));
    same_as_contiguous(&s, &o33);
    // Sliced with an offset, then transposed.
    let sl = x.slice::<Axis<0>>(1..4).slice::<Axis<1>>(2..5).t();
    same_as_contiguous(&sl, &o33);
    // Expanded (stride 0).
    let row = randn(&mut rng, (1usize, 5usize));
    same_as_contiguous(&row.expand_to((6usize, 5usize)), &other);
    // Rank 3: a permuted batch matmul equals the contiguous one.
    let a = randn(&mut rng, (4usize, 3usize, 2usize));
    let b = randn(&mut rng, (3usize, 2usize, 5usize));
    let ap = a.permute::<_, Axes3<1, 0, 2>>(); // (3, 4, 2)
    assert_close(
        &ap.matmul(&b).to_vec(),
        &copy(&ap).matmul(&b).to_vec(),
        1e-6,
    );
    // Views through the movement ops that copy.
    let t = x.t();
    let cp = copy(&t);
    assert_eq!(
        t.pad::<Axis<0>, 1, 1, (usize, usize)>(9.0).to_vec(),
        cp.pad::<Axis<0>, 1, 1, (usize, usize)>(9.0).to_vec()
    );
    assert_eq!(
        t.concat::<Axis<1>, (usize, usize), _>(&t).to_vec(),
        cp.concat::<Axis<1>, (usize, usize), _>(&cp).to_vec()
    );
    assert_eq!(
        t.reshape_to((30usize,)).unwrap().to_vec(),
        cp.reshape_to((30usize,)).unwrap().to_vec()
    );
    let idx = Tensor::<(usize, usize), Cpu, u32>::from_vec_shaped(
        (0..12).map(|i| (i * 7 % 5) as u32).collect(),
        (6, 2),
    )
    .unwrap();
    assert_eq!(
        t.gather::<Axis<1>, _>(&idx).to_vec(),
        cp.gather::<Axis<1>, _>(&idx).to_vec()
    );
}

// ---------------------------------------------------------------- reductions

/// Naive reduction of a row-major rank-3 array over one axis (keep-dim layout).
fn reduce_ref(
    data: &[f32],
    dims: [usize; 3],
    axis: usize,
    init: f32,
    f: fn(f32, f32) -> f32,
) -> Vec<f32> {
    let mut out_dims = dims;
    out_dims[axis] = 1;
    let mut out = vec![init; out_dims.iter().product()];
    for i in 0..dims[0] {
        for j in 0..dims[1] {
            for k in 0..dims[2] {
                let mut o = [i, j, k];
                o[axis] = 0;
                let oi = (o[0] * out_dims[1] + o[1]) * out_dims[2] + o[2];
                out[oi] = f(out[oi], data[(i * dims[1] + j) * dims[2] + k]);
            }
        }
    }
    out
}

#[test]
fn reductions_over_each_axis_of_a_rank3_tensor() {
    let mut rng = Rng::seed(11);
    let x = randn(&mut rng, <Rank3<3, 4, 5>>::default());
    let data = x.to_vec();
    let dims = [3, 4, 5];
    let sum = |a: f32, b: f32| a + b;
    for axis in 0..3 {
        let n = dims[axis] as f32;
        let s = reduce_ref(&data, dims, axis, 0.0, sum);
        let mx = reduce_ref(&data, dims, axis, f32::NEG_INFINITY, f32::max);
        let mn = reduce_ref(&data, dims, axis, f32::INFINITY, f32::min);
        let mean: Vec<f32> = s.iter().map(|v| v / n).collect();
        let (got_s, got_mx, got_mn, got_mean, keep_s) = match axis {
            0 => (
                x.sum::<_, Axis<0>>().to_vec(),
                x.max::<_, Axis<0>>().to_vec(),
                x.min::<_, Axis<0>>().to_vec(),
                x.mean::<_, Axis<0>>().to_vec(),
                x.sum_keepdim::<Axis<0>>().to_vec(),
            ),
            1 => (
                x.sum::<_, Axis<1>>().to_vec(),
                x.max::<_, Axis<1>>().to_vec(),
                x.min::<_, Axis<1>>().to_vec(),
                x.mean::<_, Axis<1>>().to_vec(),
                x.sum_keepdim::<Axis<1>>().to_vec(),
            ),
            _ => (
                x.sum::<_, Axis<2>>().to_vec(),
                x.max::<_, Axis<2>>().to_vec(),
                x.min::<_, Axis<2>>().to_vec(),
                x.mean::<_, Axis<2>>().to_vec(),
                x.sum_keepdim::<Axis<2>>().to_vec(),
            ),
        };
        assert_close(&got_s, &s, TOL);
        assert_eq!(got_mx, mx, "max over axis {axis}");
        assert_eq!(got_mn, mn, "min over axis {axis}");
        assert_close(&got_mean, &mean, TOL);
        assert_close(&keep_s, &s, TOL);
    }
    // Keep-dim shapes.
    let k: Tensor<Rank3<3, 1, 5>> = x.max_keepdim::<Axis<1>>();
    assert_eq!(k.dims(), &[3, 1, 5]);
    let k: Tensor<Rank3<3, 4, 1>> = x.mean_keepdim::<Axis<2>>();
    assert_eq!(k.dims(), &[3, 4, 1]);
    // Two axes at once, and everything.
    let s02: Tensor<Rank1<4>> = x.sum::<_, Axes2<0, 2>>();
    let s0 = reduce_ref(&data, dims, 0, 0.0, sum);
    let s02_ref = reduce_ref(&s0, [1, 4, 5], 2, 0.0, sum);
    assert_close(&s02.to_vec(), &s02_ref, TOL);
    let total: f32 = data.iter().sum();
    assert!((x.sum_all().item() - total).abs() < 1e-4);
    assert!((x.mean_all().item() - total / 60.0).abs() < 1e-5);
    let max = data.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = data.iter().copied().fold(f32::INFINITY, f32::min);
    assert_eq!(x.max_all().item(), max);
    assert_eq!(x.min_all().item(), min);
}

// ---------------------------------------------------------------- matmul

/// `(m, k) × (k, n)` by the textbook triple loop, accumulating in f64.
fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f64;
            for p in 0..k {
                acc += a[i * k + p] as f64 * b[p * n + j] as f64;
            }
            out[i * n + j] = acc as f32;
        }
    }
    out
}

#[test]
fn matmul_against_a_triple_loop() {
    let mut rng = Rng::seed(12);
    for _ in 0..4 {
        let (m, k, n) = (1 + rng.below(9), 1 + rng.below(9), 1 + rng.below(9));
        let a = randn(&mut rng, (m, k));
        let b = randn(&mut rng, (k, n));
        let want = matmul_ref(&a.to_vec(), &b.to_vec(), m, k, n);
        assert_close(&a.matmul(&b).to_vec(), &want, TOL);
        // Transposed views: (Aᵀ)ᵀ·(Bᵀ)ᵀ.
        let (at, bt) = (copy(&a.t()), copy(&b.t()));
        assert_close(&at.t().matmul(&bt.t()).to_vec(), &want, TOL);
        // Vector × matrix: the first row of A.
        let v = a.slice::<Axis<0>>(0..1).reshape_to((k,)).unwrap();
        assert_close(&v.matmul(&b).to_vec(), &want[..n], TOL);
    }
    // Batched, batched × shared weight, rank 4.
    let (bs, m, k, n) = (3, 4, 5, 2);
    let a = randn(&mut rng, (bs, m, k));
    let b = randn(&mut rng, (bs, k, n));
    let w = randn(&mut rng, (k, n));
    let (ad, bd, wd) = (a.to_vec(), b.to_vec(), w.to_vec());
    let batched = a.matmul(&b).to_vec();
    let shared = a.matmul(&w).to_vec();
    for i in 0..bs {
        let ai = &ad[i * m * k..(i + 1) * m * k];
        let bi = &bd[i * k * n..(i + 1) * k * n];
        let out = &batched[i * m * n..(i + 1) * m * n];
        assert_close(out, &matmul_ref(ai, bi, m, k, n), TOL);
        let out = &shared[i * m * n..(i + 1) * m * n];
        assert_close(out, &matmul_ref(ai, &wd, m, k, n), TOL);
    }
    let a4 = randn(&mut rng, <Rank4<2, 3, 4, 5>>::default());
    let b4 = randn(&mut rng, <Rank4<2, 3, 5, 2>>::default());
    let out: Tensor<Rank4<2, 3, 4, 2>> = a4.matmul(&b4);
    let (ad, bd, od) = (a4.to_vec(), b4.to_vec(), out.to_vec());
    for i in 0..6 {
        let want = matmul_ref(
            &ad[i * 20..(i + 1) * 20],
            &bd[i * 10..(i + 1) * 10],
            4,
            5,
            2,
        );
        assert_close(&od[i * 8..(i + 1) * 8], &want, TOL);
    }
    // A batch from a permuted tensor: (m, bs, k) viewed as (bs, m, k).
    let p = randn(&mut rng, (m, bs, k));
    let pv = p.permute::<_, Axes3<1, 0, 2>>();
    let pd = copy(&pv).to_vec();
    let got = pv.matmul(&w).to_vec();
    for i in 0..bs {
        let want = matmul_ref(&pd[i * m * k..(i + 1) * m * k], &wd, m, k, n);
        assert_close(&got[i * m * n..(i + 1) * m * n], &want, TOL);
    }
    // Large enough for the multi-threaded GEMM path.
    let (m, k, n) = (64, 70, 50);
    let a = randn(&mut rng, (m, k));
    let b = randn(&mut rng, (n, k));
    let want = matmul_ref(&a.to_vec(), &copy(&b.t()).to_vec(), m, k, n);
    assert_close(&a.matmul(&b.t()).to_vec(), &want, 1e-4);
}

// ---------------------------------------------------------------- softmax

#[test]
fn softmax_rows_sum_to_one_and_are_stable() {
    let mut rng = Rng::seed(13);
    let x = randn(&mut rng, <Rank2<4, 7>>::default()).mul_scalar(3.0);
    let s = x.softmax::<Axis<1>>();
    for row in s.sum::<_, Axis<1>>().to_vec() {
        assert!((row - 1.0).abs() < 1e-6, "row sums to {row}");
    }
    assert!(s.to_vec().iter().all(|&p| p > 0.0 && p < 1.0));
    // Columns along axis 0.
    for col in x.softmax::<Axis<0>>().sum::<_, Axis<0>>().to_vec() {
        assert!((col - 1.0).abs() < 1e-6, "column sums to {col}");
    }
    // Large inputs: no overflow, and shift invariance.
    let big = Tensor::<Rank2<1, 3>>::from_array([[1000.0, 1001.0, 1002.0]]);
    let small = Tensor::<Rank2<1, 3>>::from_array([[0.0, 1.0, 2.0]]);
    let (b, sm) = (
        big.softmax::<Axis<1>>().to_vec(),
        small.softmax::<Axis<1>>().to_vec(),
    );
    assert!(b.iter().all(|v| v.is_finite()), "{b:?}");
    assert_close(&b, &sm, 1e-6);
    assert_close(&sm, &[0.090_030_57, 0.244_728_48, 0.665_240_94], 1e-6);
    let lb = big.log_softmax::<Axis<1>>().to_vec();
    assert!(lb.iter().all(|v| v.is_finite()), "{lb:?}");
    assert_close(&lb, &small.log_softmax::<Axis<1>>().to_vec(), 1e-6);
    let neg = Tensor::<Rank1<2>>::from_array([-1000.0, -1000.0]);
    assert_eq!(neg.softmax::<Axis<0>>().to_vec(), vec![0.5, 0.5]);
}

#[test]
fn log_softmax_is_log_of_softmax() {
    let mut rng = Rng::seed(14);
    let x = randn(&mut rng, <Rank3<2, 3, 4>>::default());
    assert_close(
        &x.log_softmax::<Axis<2>>().to_vec(),
        &x.softmax::<Axis<2>>().log().to_vec(),
        1e-5,
    );
    assert_close(
        &x.log_softmax::<Axis<0>>().to_vec(),
        &x.softmax::<Axis<0>>().log().to_vec(),
        1e-5,
    );
}

// ---------------------------------------------------------------- movement values

#[test]
fn movement_ops_on_literals() {
    let x = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    assert_eq!(x.t().to_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let r: Tensor<Rank2<3, 2>> = x.reshape();
    assert_eq!(r.to_vec(), x.to_vec());
    assert_eq!(r.dims(), &[3, 2]);
    let f: Tensor<Rank1<6>> = x.t().flatten();
    assert_eq!(f.to_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    let c: Tensor<Rank2<2, 5>> = x.concat::<Axis<1>, _, _>(&Tensor::<Rank2<2, 2>>::zeros());
    assert_eq!(
        c.to_vec(),
        vec![1.0, 2.0, 3.0, 0.0, 0.0, 4.0, 5.0, 6.0, 0.0, 0.0]
    );
    let c: Tensor<Rank2<3, 3>> = x.concat::<Axis<0>, _, _>(&Tensor::<Rank2<1, 3>>::ones());
    assert_eq!(
        c.to_vec(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 1.0, 1.0]
    );
    assert_eq!(x.slice::<Axis<1>>(1..3).to_vec(), vec![2.0, 3.0, 5.0, 6.0]);
    assert_eq!(x.slice::<Axis<1>>(1..3).dims(), &[2, 2]);
    let s: Tensor<Rank2<2, 1>> = x.shrink::<Axis<1>, 2, _>();
    assert_eq!(s.to_vec(), vec![3.0, 6.0]);
    let st: Tensor<Rank2<2, 2>> = x.stride::<Axis<1>, 2, _>();
    assert_eq!(st.to_vec(), vec![1.0, 3.0, 4.0, 6.0]);
    let p: Tensor<Rank2<2, 6>> = x.pad::<Axis<1>, 1, 2, _>(-1.0);
    assert_eq!(
        p.to_vec(),
        vec![
            -1.0, 1.0, 2.0, 3.0, -1.0, -1.0, -1.0, 4.0, 5.0, 6.0, -1.0, -1.0
        ]
    );
    let p: Tensor<Rank2<3, 3>> = x.pad::<Axis<0>, 1, 0, _>(0.0);
    assert_eq!(
        p.to_vec(),
        vec![0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    let cube = Tensor::<Rank3<2, 3, 4>>::from_vec((0..24).map(|i| i as f32).collect()).unwrap();
    let perm: Tensor<Rank3<4, 2, 3>> = cube.permute::<_, Axes3<2, 0, 1>>();
    // perm[i][j][k] = cube[j][k][i]
    let pv = perm.to_vec();
    for i in 0..4 {
        for j in 0..2 {
            for k in 0..3 {
                assert_eq!(pv[(i * 2 + j) * 3 + k], (j * 12 + k * 4 + i) as f32);
            }
        }
    }
}

#[test]
fn gather_and_index_select_on_literals() {
    let x = Tensor::<Rank2<3, 2>>::from_array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]);
    let idx = Tensor::<Rank2<3, 3>, Cpu, u32>::from_array([[1, 0, 1], [0, 0, 0], [1, 1, 0]]);
    let g: Tensor<Rank2<3, 3>> = x.gather::<Axis<1>, _>(&idx);
    assert_eq!(
        g.to_vec(),
        vec![2.0, 1.0, 2.0, 3.0, 3.0, 3.0, 6.0, 6.0, 5.0]
    );
    let idx0 = Tensor::<Rank2<1, 2>, Cpu, u32>::from_array([[2, 0]]);
    assert_eq!(x.gather::<Axis<0>, _>(&idx0).to_vec(), vec![5.0, 2.0]);
    let ids = Tensor::<Rank1<4>, Cpu, u32>::from_array([2, 0, 2, 1]);
    let e: Tensor<Rank2<4, 2>> = x.index_select(&ids);
    assert_eq!(e.to_vec(), vec![5.0, 6.0, 1.0, 2.0, 5.0, 6.0, 3.0, 4.0]);
}

#[test]
#[should_panic(expected = "out of range")]
fn gather_out_of_range_panics() {
    let x = Tensor::<Rank2<2, 2>>::zeros();
    let idx = Tensor::<Rank2<2, 1>, Cpu, u32>::from_array([[0], [2]]);
    let _ = x.gather::<Axis<1>, _>(&idx);
}

// ---------------------------------------------------------------- windows, normalisation, uniform

fn raw(data: Vec<f32>, dims: &[usize]) -> RawTensor<Cpu, f32> {
    RawTensor::from_vec(data, dims)
}

#[test]
fn unfold2d_on_literals() {
    // Two channels of 3×3: x[0, c, i, j] = 10c + 3i + j.
    let x = raw(
        (0..2)
            .flat_map(|c| (0..9).map(move |k| (10 * c + k) as f32))
            .collect(),
        &[1, 2, 3, 3],
    );
    // 2×2 taps, stride 2, padding 1: output 2×2, each (c, kh, kw) = 8 values.
    let win = Window2d {
        stride: [2, 2],
        padding: [1, 1],
        ..Window2d::square(2)
    };
    let cols = x.unfold2d(win, -1.0);
    assert_eq!(cols.dims(), &[1, 2, 2, 2, 2, 2]);
    let v = cols.to_vec();
    // Position (0, 0) covers rows −1, 0 and columns −1, 0.
    assert_eq!(&v[..8], &[-1.0, -1.0, -1.0, 0.0, -1.0, -1.0, -1.0, 10.0]);
    // Position (1, 1) covers rows 1, 2 and columns 1, 2.
    assert_eq!(&v[24..], &[4.0, 5.0, 7.0, 8.0, 14.0, 15.0, 17.0, 18.0]);
    // Dilation 2 on 3×3 without padding: one position, the four corners.
    let corners = Window2d {
        dilation: [2, 2],
        ..Window2d::square(2)
    };
    let v = x.unfold2d(corners, 0.0).to_vec();
    assert_eq!(v, vec![0.0, 2.0, 6.0, 8.0, 10.0, 12.0, 16.0, 18.0]);
    // A transposed view (H and W swapped) unfolds like its contiguous copy.
    let t = x.permute(&[0, 1, 3, 2]);
    let copy = raw(t.to_vec(), &[1, 2, 3, 3]);
    assert_eq!(
        t.unfold2d(win, 0.5).to_vec(),
        copy.unfold2d(win, 0.5).to_vec()
    );
}

#[test]
fn fold2d_on_literals() {
    // Ones through a 2×2 window, stride 1, on 3×3: each pixel counts its windows.
    let ones = raw(vec![1.0; 16], &[1, 2, 2, 1, 2, 2]);
    let img = ones.fold2d(Window2d::square(2), [3, 3]);
    assert_eq!(img.dims(), &[1, 1, 3, 3]);
    assert_eq!(
        img.to_vec(),
        vec![1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]
    );
    // Stride = kernel with padding 1: every pixel is read once, and the taps in the
    // padding are dropped. Window (0, 0) keeps its tap (1, 1) = 4; window (0, 1)
    // keeps (1, 0) = 7 and (1, 1) = 8; …
    let win = Window2d {
        stride: [2, 2],
        padding: [1, 1],
        ..Window2d::square(2)
    };
    let cols = raw((1..=16).map(|v| v as f32).collect(), &[1, 2, 2, 1, 2, 2]);
    assert_eq!(
        cols.fold2d(win, [3, 3]).to_vec(),
        vec![4.0, 7.0, 8.0, 10.0, 13.0, 14.0, 12.0, 15.0, 16.0]
    );
    // A stride larger than the kernel leaves pixels no window reads: they stay 0.
    let sparse = Window2d {
        stride: [2, 2],
        ..Window2d::square(1)
    };
    let cols = raw(vec![1.0, 2.0, 3.0, 4.0], &[1, 2, 2, 1, 1, 1]);
    assert_eq!(
        cols.fold2d(sparse, [3, 3]).to_vec(),
        vec![1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 4.0]
    );
}

/// fold2d is the adjoint of unfold2d: ⟨unfold(x), y⟩ = ⟨x, fold(y)⟩.
#[test]
fn fold2d_is_the_adjoint_of_unfold2d() {
    let mut rng = Rng::seed(80);
    let win = Window2d {
        kernel: [3, 2],
        stride: [2, 1],
        padding: [1, 1],
        dilation: [1, 2],
    };
    let (n, c, h, w) = (2, 3, 6, 5);
    let [oh, ow] = win.output([h, w]).unwrap();
    let x = RawTensor::<Cpu, f64>::from_vec(
        (0..n * c * h * w).map(|_| rng.normal()).collect(),
        &[n, c, h, w],
    );
    let y = RawTensor::<Cpu, f64>::from_vec(
        (0..n * oh * ow * c * 6).map(|_| rng.normal()).collect(),
        &[n, oh, ow, c, 3, 2],
    );
    let dot = |a: Vec<f64>, b: Vec<f64>| a.iter().zip(&b).map(|(a, b)| a * b).sum::<f64>();
    let lhs = dot(x.unfold2d(win, 0.0).to_vec(), y.to_vec());
    let rhs = dot(x.to_vec(), y.fold2d(win, [h, w]).to_vec());
    assert!((lhs - rhs).abs() < 1e-10, "{lhs} vs {rhs}");
}

#[test]
#[should_panic(expected = "unfold2d: the input must be (N, C, H, W), got dims [3, 3]")]
fn unfold2d_of_a_matrix_panics() {
    let _ = raw(vec![0.0; 9], &[3, 3]).unfold2d(Window2d::square(2), 0.0);
}

#[test]
#[should_panic(expected = "the kernel spans 5 along the width, but the padded input has only 4")]
fn unfold2d_with_a_window_larger_than_the_input_panics() {
    let win = Window2d {
        kernel: [1, 3],
        dilation: [1, 2],
        ..Window2d::square(1)
    };
    let _ = raw(vec![0.0; 8], &[1, 1, 2, 4]).unfold2d(win, 0.0);
}

#[test]
#[should_panic(expected = "which needs (N, 2, 3, C, 2, 2)")]
fn fold2d_of_columns_of_another_window_panics() {
    let _ = raw(vec![0.0; 16], &[1, 2, 2, 1, 2, 2]).fold2d(Window2d::square(2), [3, 4]);
}

#[test]
fn normalize_on_literals() {
    let x = raw(vec![1.0, 2.0, 3.0, 4.0, -2.0, 0.0, 2.0, 4.0], &[2, 4]);
    // Row 0: mean 2.5, biased variance 1.25; row 1: mean 1, variance 5.
    let (r0, r1) = (1.25f32.sqrt(), 5.0f32.sqrt());
    assert_close(
        &x.normalize(1, true, 0.0).to_vec(),
        &[
            -1.5 / r0,
            -0.5 / r0,
            0.5 / r0,
            1.5 / r0,
            -3.0 / r1,
            -1.0 / r1,
            1.0 / r1,
            3.0 / r1,
        ],
        TOL,
    );
    // RMS with eps: row 0's mean square is 7.5.
    let r = (7.5f32 + 0.5).sqrt();
    let y = x.normalize(1, false, 0.5).to_vec();
    assert_close(&y[..4], &[1.0 / r, 2.0 / r, 3.0 / r, 4.0 / r], TOL);
    // Along axis 0: columns (1, −2), (2, 0), … become (±1) when centered; the
    // constant column (4, 4) becomes 0 (with eps > 0: 0/0 otherwise).
    let y = x.normalize(0, true, 1e-6).to_vec();
    assert_close(&y, &[1.0, 1.0, 1.0, 0.0, -1.0, -1.0, -1.0, 0.0], TOL);
    // A large offset does not cancel the variance (two passes).
    let big = raw(vec![1e4 + 1.0, 1e4 + 3.0], &[1, 2]);
    assert_close(&big.normalize(1, true, 0.0).to_vec(), &[-1.0, 1.0], TOL);
}

#[test]
#[should_panic(expected = "normalize: axis 2 out of range for [2, 4]")]
fn normalize_along_a_missing_axis_panics() {
    let _ = raw(vec![0.0; 8], &[2, 4]).normalize(2, true, 1e-5);
}

#[test]
fn uniform_is_a_counter_stream() {
    let u = RawTensor::<Cpu, f32>::uniform(&[4, 250], 42).to_vec();
    assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
    let mean = u.iter().sum::<f32>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    // Element i depends on (seed, i) only: a prefix is the same stream, in f64 too.
    let prefix = RawTensor::<Cpu, f32>::uniform(&[10], 42).to_vec();
    assert_eq!(&u[..10], &prefix[..]);
    let wide = RawTensor::<Cpu, f64>::uniform(&[10], 42).to_vec();
    assert!(wide.iter().zip(&prefix).all(|(&a, &b)| a == f64::from(b)));
    assert_eq!(u[7], volta::random::uniform_at(42, 7));
    // Another seed, another stream; and the result is an untracked leaf.
    let other = RawTensor::<Cpu, f32>::uniform(&[10], 43);
    assert_ne!(other.to_vec(), prefix);
    assert!(!other.is_tracked());
}

// ---------------------------------------------------------------- creation

#[test]
fn creation() {
    assert_eq!(Tensor::<Rank2<2, 2>>::zeros().to_vec(), vec![0.0; 4]);
    assert_eq!(Tensor::<Rank1<3>>::ones().to_vec(), vec![1.0; 3]);
    assert_eq!(Tensor::<Rank1<2>>::full(2.5).to_vec(), vec![2.5, 2.5]);
    let z = Tensor::<(usize, Const<3>)>::zeros_shaped((2, Const));
    assert_eq!(z.dims(), &[2, 3]);
    assert_eq!(
        Tensor::<Rank1<4>>::arange().to_vec(),
        vec![0.0, 1.0, 2.0, 3.0]
    );
    let a = Tensor::<(usize,)>::arange_dyn(1.0, 2.0, 0.25);
    assert_eq!(a.to_vec(), vec![1.0, 1.25, 1.5, 1.75]);
    assert_eq!(a.dims(), &[4]);
    let down = Tensor::<(usize,)>::arange_dyn(3.0, 0.0, -1.0);
    assert_eq!(down.to_vec(), vec![3.0, 2.0, 1.0]);
    assert_eq!(Tensor::<(usize,)>::arange_dyn(0.0, -1.0, 1.0).dims(), &[0]);
    let s = Tensor::<()>::from_array(4.0);
    assert_eq!(s.item(), 4.0);
    let like = s.ones_like();
    assert_eq!(like.item(), 1.0);
}

#[test]
fn rand_is_uniform_in_unit_interval_and_seeded() {
    let a = Tensor::<Rank2<100, 100>>::rand(&mut Rng::seed(5)).to_vec();
    assert!(a.iter().all(|&v| (0.0..1.0).contains(&v)));
    let mean = a.iter().sum::<f32>() / a.len() as f32;
    assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    let again = Tensor::<Rank2<100, 100>>::rand(&mut Rng::seed(5)).to_vec();
    assert_eq!(a, again, "same seed, same values");
    let other = Tensor::<Rank2<100, 100>>::rand(&mut Rng::seed(6)).to_vec();
    assert!(
        a.iter().zip(&other).filter(|(x, y)| x == y).count() < 10,
        "different seeds gave mostly equal values"
    );
    // One generator continues its stream: two draws differ.
    let mut rng = Rng::seed(5);
    let (x, y) = (
        Tensor::<Rank1<8>>::rand(&mut rng).to_vec(),
        Tensor::<Rank1<8>>::rand(&mut rng).to_vec(),
    );
    assert_ne!(x, y);
    let u = Tensor::<Rank1<1000>>::uniform(-2.0, 3.0, &mut rng).to_vec();
    assert!(u.iter().all(|&v| (-2.0..3.0).contains(&v)));
}

#[test]
fn randn_has_zero_mean_and_unit_std() {
    let x = Tensor::<Rank1<10000>>::randn(&mut Rng::seed(9)).to_vec();
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    // Standard error of the mean is 0.01, of the std ≈ 0.007.
    assert!(mean.abs() < 0.04, "mean {mean}");
    assert!((var.sqrt() - 1.0).abs() < 0.03, "std {}", var.sqrt());
    let same = Tensor::<Rank1<10000>>::randn(&mut Rng::seed(9)).to_vec();
    assert_eq!(x, same);
}

// ---------------------------------------------------------------- errors

#[test]
fn from_vec_with_the_wrong_length_is_an_error() {
    let e = Tensor::<Rank2<2, 3>>::from_vec(vec![1.0; 5]).unwrap_err();
    assert_eq!(
        e,
        ShapeError::DataLength {
            expected: 6,
            found: 5
        }
    );
    assert!(e.to_string().contains("6") && e.to_string().contains("5"));
    let e = Tensor::<(usize, usize)>::from_vec_shaped(vec![0.0; 7], (2, 3)).unwrap_err();
    assert_eq!(
        e,
        ShapeError::DataLength {
            expected: 6,
            found: 7
        }
    );
}

#[test]
fn wrong_run_time_dims_are_errors() {
    let x = Tensor::<(usize, usize)>::zeros_shaped((2, 3));
    assert!(matches!(
        x.reshape_to((4usize, 2usize)),
        Err(ShapeError::DataLength {
            expected: 8,
            found: 6
        })
    ));
    assert!(x.reshape_to((3usize, 2usize)).is_ok());
    let e = x.realize::<Rank2<3, 2>>().unwrap_err();
    assert!(
        matches!(&e, ShapeError::Mismatch { found, .. } if found == &vec![2, 3]),
        "{e:?}"
    );
    assert!(x.realize::<Rank2<2, 3>>().is_ok());
    assert!(x.realize::<(Const<2>, usize)>().is_ok());
    assert!(
        x.realize::<(usize, usize, usize)>().is_err(),
        "rank differs"
    );
    let e = Tensor::<Rank2<2, 3>>::from_vec_dims(vec![0.0; 6], &[3, 2]).unwrap_err();
    assert!(matches!(e, ShapeError::Mismatch { .. }));
}

#[test]
#[should_panic(expected = "shape mismatch at run time: [3] vs [4]")]
fn dynamic_dim_mismatch_in_a_binary_op_panics_naming_both_dims() {
    let a = Tensor::<(usize,)>::zeros_shaped((3,));
    let b = Tensor::<(usize,)>::zeros_shaped((4,));
    let _ = a.add(&b);
}

#[test]
#[should_panic(expected = "[2, 3] vs [2, 5]")]
fn dynamic_dim_mismatch_against_a_static_dim_panics() {
    let a = Tensor::<Rank2<2, 3>>::zeros();
    let b = Tensor::<(Const<2>, usize)>::zeros_shaped((Const, 5));
    let _ = a.mul(&b);
}

#[test]
#[should_panic(expected = "matmul: inner dims differ at run time")]
fn dynamic_matmul_mismatch_panics() {
    let a = Tensor::<(usize, usize)>::zeros_shaped((2, 3));
    let b = Tensor::<(usize, usize)>::zeros_shaped((4, 2));
    let _ = a.matmul(&b);
}

// ---------------------------------------------------------------- autograd behaviour

#[test]
fn gradients_accumulate_across_backward_passes_and_clear() {
    let w = Tensor::<Rank1<3>>::from_array([1.0, 2.0, 3.0]).requires_grad();
    let mut grads = w.square().sum_all().backward(); // 2w
    assert_eq!(grads.get(&w).unwrap().to_vec(), vec![2.0, 4.0, 6.0]);
    grads.accumulate(w.mul_scalar(3.0).sum_all().backward()); // + 3
    assert_eq!(grads.get(&w).unwrap().to_vec(), vec![5.0, 7.0, 9.0]);
    assert_eq!(grads.len(), 1);
    // Accumulating records no graph of its own.
    assert!(!grads.get(&w).unwrap().is_tracked());
    grads.clear();
    assert!(grads.is_empty());
    assert!(grads.get(&w).is_none());
}

#[test]
fn no_grad_records_nothing() {
    let w = Tensor::<Rank1<3>>::ones().requires_grad();
    assert!(w.is_tracked());
    assert!(w.exp().is_tracked());
    {
        let _guard = volta::no_grad();
        assert!(!volta::grad_enabled());
        let y = w.exp().sum_all();
        assert!(!y.is_tracked());
        assert!(y.backward().is_empty());
    }
    assert!(volta::grad_enabled(), "the guard restores grad mode");
    assert!(w.exp().is_tracked());
    // Untracked inputs record nothing either.
    assert!(!Tensor::<Rank1<3>>::ones().exp().is_tracked());
}

#[test]
fn detach_stops_gradients() {
    let w = Tensor::<Rank1<2>>::from_array([2.0, 3.0]).requires_grad();
    let d = w.detach();
    assert!(!d.is_tracked());
    assert_eq!(d.to_vec(), w.to_vec());
    // d/dw (w · detach(w)) = detach(w), not 2w.
    let grads = w.mul(&d).sum_all().backward();
    assert_eq!(grads.get(&w).unwrap().to_vec(), vec![2.0, 3.0]);
    // A loss built only from the detached copy reaches nothing.
    let grads = d.exp().sum_all().backward();
    assert!(grads.get(&w).is_none());
}

#[test]
fn a_tensor_used_twice_gets_the_summed_gradient() {
    let x = Tensor::<Rank1<3>>::from_array([1.0, -2.0, 0.5]).requires_grad();
    // y = x·x + 3x + x.exp() → dy/dx = 2x + 3 + eˣ
    let y = x.mul(&x).add(&x.mul_scalar(3.0)).add(&x.exp());
    let grads = y.sum_all().backward();
    let want: Vec<f32> = x.to_vec().iter().map(|v| 2.0 * v + 3.0 + v.exp()).collect();
    assert_close(&grads.get(&x).unwrap().to_vec(), &want, 1e-6);
    // Two leaves: only tracked ones get gradients.
    let c = Tensor::<Rank1<3>>::ones();
    let grads = x.mul(&c).sum_all().backward();
    assert!(grads.get(&c).is_none());
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![1.0; 3]);
}

#[test]
fn a_long_chain_does_not_overflow_the_stack() {
    let x = Tensor::<Rank1<2>>::from_array([0.5, -0.5]).requires_grad();
    let mut y = x.clone();
    for _ in 0..100_000 {
        y = y.add_scalar(1e-5);
    }
    let grads = y.sum_all().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), vec![1.0, 1.0]);
    // Building and dropping a long chain without calling backward must not overflow
    // either (dropping nested nodes recursively would).
    let mut z = x.clone();
    for _ in 0..100_000 {
        z = z.mul_scalar(1.0);
    }
    drop(z);
}

/// `Cpu` buffers are `Arc<Vec<f32>>`: a weak handle to an intermediate's buffer tells
/// whether the graph still holds it.
#[test]
fn the_graph_is_freed_after_backward() {
    let x = Tensor::<Rank1<4>>::from_array([1.0, 2.0, 3.0, 4.0]).requires_grad();
    let h = x.exp();
    let weak = Arc::downgrade(h.raw().buffer());
    let loss = h.sin().sum_all();
    drop(h);
    assert!(weak.upgrade().is_some(), "the graph keeps the intermediate");
    let grads = loss.backward();
    assert!(
        weak.upgrade().is_none(),
        "backward consumed the loss, so the graph should be gone"
    );
    assert!(grads.get(&x).is_some());
    // Dropping a loss without backward frees the graph too.
    let h = x.exp();
    let weak = Arc::downgrade(h.raw().buffer());
    let loss = h.sin().sum_all();
    drop(h);
    drop(loss);
    assert!(weak.upgrade().is_none());
}
