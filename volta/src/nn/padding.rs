//! Padded batches of sequences `(B, T, C)`: batch element `b` holds its tokens at
//! positions `keys[b]` (a range of `0..T`), the rest is padding. Attention takes
//! the ranges ([`padded_attention`](crate::nn::padded_attention),
//! `forward_padded` of the attention layers); what pools over positions takes
//! them here.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::ops::attention::check_key_ranges;
use crate::shape::{Const, Dim, ShapeError};
use crate::tensor::{RawTensor, Tensor};
use std::ops::Range;
use volta_kernels::{BinaryOp, ReduceOp};

/// The mean of each sequence's own positions `keys[b]` of `x` `(B, T, C)`: a
/// classifier's pooling over a padded batch (zeros for a sequence without
/// tokens). `model!`'s `mean_pool` runs it in `try_forward_padded`.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::padded_mean_pool;
/// let x = Tensor::<(Const<2>, usize, Const<1>)>::from_vec_shaped(
///     vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
///     (Const, 3, Const),
/// )?;
/// let pooled = padded_mean_pool(&x, &[0..3, 1..2])?;
/// assert_eq!(pooled.to_vec(), [2.0, 5.0]);
/// # Ok::<(), volta::shape::ShapeError>(())
/// ```
///
/// # Errors
/// [`ShapeError::KeyRanges`] unless `keys` holds one range per batch element,
/// each inside `0..T`.
pub fn padded_mean_pool<B: Dim, T: Dim, const C: usize, D: Backend<E>, E: Float>(
    x: &Tensor<(B, T, Const<C>), D, E>,
    keys: &[Range<usize>],
) -> Result<Tensor<(B, Const<C>), D, E>, ShapeError> {
    let (b, t) = (x.dims()[0], x.dims()[1]);
    check_key_ranges(keys, b, t)?;
    // Each position's weight in its sequence's mean: 1/len inside, 0 outside.
    let weights: Vec<E> = keys
        .iter()
        .flat_map(|r| {
            (0..t).map(move |i| {
                E::from_f64(if r.contains(&i) {
                    1.0 / r.len() as f64
                } else {
                    0.0
                })
            })
        })
        .collect();
    let weights = RawTensor::<D, E>::from_vec(weights, &[b, t, 1]).expand(&[b, t, C]);
    let pooled = x
        .raw()
        .binary(BinaryOp::Mul, &weights)
        .reduce(ReduceOp::Sum, 1)
        .reshape(&[b, C]);
    Tensor::try_from_raw(pooled)
}
