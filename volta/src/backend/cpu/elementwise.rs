//! Elementwise kernels. Each op is dispatched once, outside the loop, so every loop
//! body is a monomorphised, vectorisable closure.
use super::PARALLEL_THRESHOLD;
use super::buffers::Unwritten;
use super::rows::{Rows, contiguous_slice};
use super::simd::vectorized;
use crate::dtype::Float;
use crate::layout::Layout;
use rayon::prelude::*;
use volta_kernels::{BinaryOp, UnaryOp};

const CHUNK: usize = 1 << 13;

/// Applies `f` to every element of a view.
fn map<E: Float>(data: &[E], layout: &Layout, f: impl Fn(E) -> E + Sync) -> Vec<E> {
    if let Some(src) = contiguous_slice(data, layout) {
        let body = |(o, s): (Unwritten<E>, &[E])| {
            vectorized(
                #[inline(always)]
                || {
                    for (o, &x) in o.iter_mut().zip(s) {
                        o.write(f(x));
                    }
                },
            )
        };
        // SAFETY: the chunks of `out` and `src` pair up one to one, and each
        // body writes every element of its chunk.
        return unsafe {
            super::buffers::filled_by(src.len(), |out| {
                if src.len() >= PARALLEL_THRESHOLD {
                    out.par_chunks_mut(CHUNK)
                        .zip(src.par_chunks(CHUNK))
                        .for_each(body);
                } else {
                    body((out, src));
                }
            })
        };
    }
    let rows = Rows::of(layout);
    let mut out = Vec::with_capacity(layout.numel());
    for &start in &rows.starts {
        out.extend((0..rows.len).map(|j| f(data[start + j * rows.stride])));
    }
    out
}

/// Applies `f` to every pair of elements of two views with equal dims.
fn zip<E: Float>(a: (&[E], &Layout), b: (&[E], &Layout), f: impl Fn(E, E) -> E + Sync) -> Vec<E> {
    let n = a.1.numel();
    if let (Some(x), Some(y)) = (contiguous_slice(a.0, a.1), contiguous_slice(b.0, b.1)) {
        let body = |(o, (x, y)): (Unwritten<E>, (&[E], &[E]))| {
            vectorized(
                #[inline(always)]
                || {
                    for (o, (&x, &y)) in o.iter_mut().zip(x.iter().zip(y)) {
                        o.write(f(x, y));
                    }
                },
            )
        };
        assert_eq!((x.len(), y.len()), (n, n), "zip: views of unequal sizes");
        // SAFETY: `x` and `y` hold `n` elements each (asserted), their chunks
        // pair up with `out`'s one to one, and each body writes all of its chunk.
        return unsafe {
            super::buffers::filled_by(n, |out| {
                if n >= PARALLEL_THRESHOLD {
                    out.par_chunks_mut(CHUNK)
                        .zip(x.par_chunks(CHUNK).zip(y.par_chunks(CHUNK)))
                        .for_each(body);
                } else {
                    body((out, (x, y)));
                }
            })
        };
    }
    let [ra, rb] = Rows::of_all([a.1, b.1]);
    if ra.len == 0 || n == 0 {
        return Vec::new();
    }
    assert_eq!(
        ra.starts.len() * ra.len,
        n,
        "zip: rows that do not tile the view"
    );
    // Rows that both views walk one element at a time, or one of them not at all
    // (a broadcast bias, a per-row scale), run in the CPU's widest vectors.
    let len = ra.len;
    let row = |(o, (&sa, &sb)): (Unwritten<E>, (&usize, &usize))| {
        let strided = |o: Unwritten<E>| {
            for (j, o) in o.iter_mut().enumerate() {
                o.write(f(a.0[sa + j * ra.stride], b.0[sb + j * rb.stride]));
            }
        };
        if len < 16 {
            return strided(o);
        }
        vectorized(
            #[inline(always)]
            || match (ra.stride, rb.stride) {
                (1, 1) => {
                    let (x, y) = (&a.0[sa..sa + len], &b.0[sb..sb + len]);
                    for (o, (&x, &y)) in o.iter_mut().zip(x.iter().zip(y)) {
                        o.write(f(x, y));
                    }
                }
                (1, 0) => {
                    let y = b.0[sb];
                    for (o, &x) in o.iter_mut().zip(&a.0[sa..sa + len]) {
                        o.write(f(x, y));
                    }
                }
                (0, 1) => {
                    let x = a.0[sa];
                    for (o, &y) in o.iter_mut().zip(&b.0[sb..sb + len]) {
                        o.write(f(x, y));
                    }
                }
                _ => strided(o),
            },
        )
    };
    // SAFETY: the output's rows (asserted to tile it) pair up with the rows'
    // starts one to one, and each row writes every element of its chunk.
    unsafe {
        super::buffers::filled_by(n, |out| {
            if n >= PARALLEL_THRESHOLD {
                out.par_chunks_mut(ra.len)
                    .zip(ra.starts.par_iter().zip(rb.starts.par_iter()))
                    .for_each(row);
            } else {
                out.chunks_mut(ra.len)
                    .zip(ra.starts.iter().zip(rb.starts.iter()))
                    .for_each(row);
            }
        })
    }
}

/// Binds `$f` to the scalar function of `op` (a constant in each arm, so the loop
/// body is specialised per op) and evaluates `$body`. The function computes in
/// `E::Acc` (`f32` for `f16`) and rounds once. It and the closures that call it are
/// always inlined: a large body (GELU's gradient) would otherwise be called once per
/// element, and the loop would not vectorise.
macro_rules! with_unary_fn {
    ($op:expr, |$f:ident| $body:expr) => {
        with_unary_fn!(@arms $op, $f, $body, [Neg, Exp, Log, Exp2, Log2, Sqrt, Recip, Relu, Sigmoid, Tanh, Sin, Cos, Abs, Gelu, Silu, Floor, Erf, GeluGrad])
    };
    (@arms $op:expr, $f:ident, $body:expr, [$($v:ident),*]) => {
        match $op { $(UnaryOp::$v => {
            #[inline(always)]
            fn op<E: Float>(x: E) -> E { E::from_acc(UnaryOp::$v.eval(x.to_acc())) }
            let $f = op::<E>;
            $body
        })* }
    };
}

macro_rules! with_binary_fn {
    ($op:expr, |$f:ident| $body:expr) => {
        with_binary_fn!(@arms $op, $f, $body, [Add, Sub, Mul, Div, Max, Min, Mod, Pow, Lt, Le, Gt, Ge, Eq, Ne])
    };
    (@arms $op:expr, $f:ident, $body:expr, [$($v:ident),*]) => {
        match $op { $(BinaryOp::$v => {
            #[inline(always)]
            fn op<E: Float>(a: E, b: E) -> E { E::from_acc(BinaryOp::$v.eval(a.to_acc(), b.to_acc())) }
            let $f = op::<E>;
            $body
        })* }
    };
}

// The closures around `f` are what gets inlined into the loops: `f` passed as
// itself would be called through its `Fn::call` shim, once per element.
#[expect(
    clippy::redundant_closure,
    reason = "an always-inlined closure, see above"
)]
pub(crate) fn unary<E: Float>(op: UnaryOp, data: &[E], layout: &Layout) -> Vec<E> {
    with_unary_fn!(op, |f| map(
        data,
        layout,
        #[inline(always)]
        |x| f(x)
    ))
}

#[expect(
    clippy::redundant_closure,
    reason = "an always-inlined closure, see above"
)]
pub(crate) fn binary<E: Float>(op: BinaryOp, a: (&[E], &Layout), b: (&[E], &Layout)) -> Vec<E> {
    with_binary_fn!(op, |f| zip(
        a,
        b,
        #[inline(always)]
        |x, y| f(x, y)
    ))
}

pub(crate) fn binary_scalar<E: Float>(op: BinaryOp, data: &[E], layout: &Layout, c: E) -> Vec<E> {
    with_binary_fn!(op, |f| map(
        data,
        layout,
        #[inline(always)]
        move |x| f(x, c)
    ))
}

/// `cond != 0 ? a : b` over three views with equal dims.
pub(crate) fn select<E: Float>(
    cond: (&[E], &Layout),
    a: (&[E], &Layout),
    b: (&[E], &Layout),
) -> Vec<E> {
    let [rc, ra, rb] = Rows::of_all([cond.1, a.1, b.1]);
    let mut out = Vec::with_capacity(a.1.numel());
    for ((&sc, &sa), &sb) in rc.starts.iter().zip(&ra.starts).zip(&rb.starts) {
        out.extend((0..ra.len).map(|j| {
            if cond.0[sc + j * rc.stride] != E::ZERO {
                a.0[sa + j * ra.stride]
            } else {
                b.0[sb + j * rb.stride]
            }
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` over two views one element at a time, by their coordinates.
    fn naive(a: (&[f32], &Layout), b: (&[f32], &Layout), f: impl Fn(f32, f32) -> f32) -> Vec<f32> {
        let dims = &a.1.dims;
        let at = |l: &Layout, i: usize| {
            let (mut rem, mut off) = (i, l.offset);
            for ax in (0..dims.len()).rev() {
                off += (rem % dims[ax]) * l.strides[ax];
                rem /= dims[ax];
            }
            off
        };
        (0..a.1.numel())
            .map(|i| f(a.0[at(a.1, i)], b.0[at(b.1, i)]))
            .collect()
    }

    /// Strided zips: a broadcast row, a per-row scalar, a transposed view, rows
    /// long enough for vectors and short ones.
    #[test]
    fn strided_zips_match_the_element_by_element_result() {
        let f = |x: f32, y: f32| x * 2.0 - y;
        for (rows, cols) in [(5, 40), (7, 3), (40, 17)] {
            let x: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5).collect();
            let plain = Layout::contiguous(&[rows, cols]);
            let row: Vec<f32> = (0..cols).map(|i| 100.0 - i as f32).collect();
            let per_row: Vec<f32> = (0..rows).map(|i| i as f32 * 3.0).collect();
            let t: Vec<f32> = (0..rows * cols).map(|i| (i * 7 % 11) as f32).collect();
            let views = [
                (row, Layout::contiguous(&[1, cols]).expand(&[rows, cols])),
                (
                    per_row,
                    Layout::contiguous(&[rows, 1]).expand(&[rows, cols]),
                ),
                (t, Layout::contiguous(&[cols, rows]).permute(&[1, 0])),
            ];
            for (data, layout) in &views {
                let want = naive((&x, &plain), (data, layout), f);
                assert_eq!(zip((&x, &plain), (data, layout), f), want, "{rows}×{cols}");
                let want = naive((data, layout), (&x, &plain), f);
                assert_eq!(
                    zip((data, layout), (&x, &plain), f),
                    want,
                    "{rows}×{cols}, swapped"
                );
            }
        }
    }
}
