//! Creating tensors: constants, ranges, random values, host data.
use super::{RawTensor, Tensor};
use crate::backend::{Backend, Device, Memory};
use crate::dtype::{Element, Float};
use crate::random::Rng;
use crate::shape::{Const, ConstShape, Shape, ShapeError};

impl<S: Shape, D: Device + Memory<E>, E: Element> Tensor<S, D, E> {
    /// A tensor of `value` with the run-time `shape`.
    pub fn full_shaped(shape: S, value: E) -> Self {
        let dims = shape.dims();
        Tensor::from_raw(
            shape,
            RawTensor::leaf(
                D::full(dims.numel(), value),
                crate::layout::Layout::contiguous(&dims),
            ),
        )
    }

    /// Zeros with the run-time `shape`, for every element type (`u32` indices too).
    pub fn zeros_shaped(shape: S) -> Self {
        Self::full_shaped(shape, E::from(0u8))
    }

    /// Ones with the run-time `shape`, for every element type.
    pub fn ones_shaped(shape: S) -> Self {
        Self::full_shaped(shape, E::from(1u8))
    }

    /// A tensor from row-major host data and a run-time `shape`; a wrong length is an
    /// error.
    pub fn from_vec_shaped(data: Vec<E>, shape: S) -> Result<Self, ShapeError> {
        let dims = shape.dims();
        if data.len() != dims.numel() {
            return Err(ShapeError::DataLength {
                expected: dims.numel(),
                found: data.len(),
            });
        }
        Ok(Tensor::from_raw(shape, RawTensor::from_vec(data, &dims)))
    }

    /// A tensor from row-major data and run-time dims, checked against `S`.
    pub fn from_vec_dims(data: Vec<E>, dims: &[usize]) -> Result<Self, ShapeError> {
        Self::from_vec_shaped(data, S::from_dims(dims)?)
    }
}

impl<S: ConstShape, D: Device + Memory<E>, E: Element> Tensor<S, D, E> {
    /// A tensor of `value`, for every element type.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let classes = Tensor::<Rank1<3>, Cpu, u32>::full(7);
    /// assert_eq!(classes.to_vec(), vec![7, 7, 7]);
    /// ```
    pub fn full(value: E) -> Self {
        Self::full_shaped(S::default(), value)
    }
    /// Zeros, for every element type: `Tensor::<Rank1<4>, Cpu, u32>::zeros()` is a
    /// tensor of index 0.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let labels = Tensor::<Rank1<4>, Cpu, u32>::zeros();
    /// assert_eq!(labels.to_vec(), vec![0; 4]);
    /// ```
    pub fn zeros() -> Self {
        Self::zeros_shaped(S::default())
    }
    /// Ones, for every element type.
    pub fn ones() -> Self {
        Self::ones_shaped(S::default())
    }
    /// A tensor from row-major host data; the length must be the shape's element
    /// count.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let t = Tensor::<Rank2<2, 2>>::from_vec(vec![1.0, 2.0, 3.0]);
    /// assert!(t.is_err()); // 3 elements for a 2×2 tensor
    /// ```
    pub fn from_vec(data: Vec<E>) -> Result<Self, ShapeError> {
        Self::from_vec_shaped(data, S::default())
    }
    /// A tensor from a nested array whose nesting matches the shape.
    pub fn from_array<A: FromArray<S, E>>(array: A) -> Self {
        Self::from_vec(array.flatten()).expect("array dims match the shape by construction")
    }
}

impl<S: Shape, D: Device + Memory<E>, E: Float> Tensor<S, D, E> {
    /// Uniform values in `[0, 1)` with the run-time `shape`.
    pub fn rand_shaped(shape: S, rng: &mut Rng) -> Self {
        let data = (0..shape.numel())
            .map(|_| E::from_f64(rng.uniform()))
            .collect();
        Self::from_vec_shaped(data, shape).expect("length matches by construction")
    }
    /// Standard normal values with the run-time `shape`.
    pub fn randn_shaped(shape: S, rng: &mut Rng) -> Self {
        let data = (0..shape.numel())
            .map(|_| E::from_f64(rng.normal()))
            .collect();
        Self::from_vec_shaped(data, shape).expect("length matches by construction")
    }
    /// Uniform values in `[lo, hi)` with the run-time `shape`.
    pub fn uniform_shaped(shape: S, lo: E, hi: E, rng: &mut Rng) -> Self {
        let (lo, hi) = (lo.to_f64(), hi.to_f64());
        let data = (0..shape.numel())
            .map(|_| E::from_f64(lo + (hi - lo) * rng.uniform()))
            .collect();
        Self::from_vec_shaped(data, shape).expect("length matches by construction")
    }
}

impl<S: ConstShape, D: Device + Memory<E>, E: Float> Tensor<S, D, E> {
    /// Uniform values in `[0, 1)` from a seedable generator.
    pub fn rand(rng: &mut Rng) -> Self {
        Self::rand_shaped(S::default(), rng)
    }
    /// Standard normal values from a seedable generator.
    pub fn randn(rng: &mut Rng) -> Self {
        Self::randn_shaped(S::default(), rng)
    }
    /// Uniform values in `[lo, hi)`.
    pub fn uniform(lo: E, hi: E, rng: &mut Rng) -> Self {
        Self::uniform_shaped(S::default(), lo, hi, rng)
    }
}

impl<const N: usize, D: Device + Memory<E>, E: Float> Tensor<(Const<N>,), D, E> {
    /// `0, 1, …, N−1`.
    pub fn arange() -> Self {
        Self::from_vec((0..N).map(|i| E::from_f64(i as f64)).collect()).expect("N elements")
    }
}

impl<D: Device + Memory<E>, E: Float> Tensor<(usize,), D, E> {
    /// `start, start + step, …` below `end`, with a run-time length.
    pub fn arange_dyn(start: f64, end: f64, step: f64) -> Self {
        assert!(step != 0.0, "arange: step must not be zero");
        let n = ((end - start) / step).ceil().max(0.0) as usize;
        let data = (0..n)
            .map(|i| E::from_f64(start + i as f64 * step))
            .collect();
        Self::from_vec_shaped(data, (n,)).expect("length matches by construction")
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Zeros with the shape and device of `self`.
    pub fn zeros_like(&self) -> Self {
        Self::zeros_shaped(self.shape())
    }
    /// Ones with the shape and device of `self`.
    pub fn ones_like(&self) -> Self {
        Self::ones_shaped(self.shape())
    }
}

/// Nested arrays that fill a shape: `[[E; N]; M]` fills `Rank2<M, N>`.
pub trait FromArray<S: Shape, E> {
    /// Row-major elements.
    fn flatten(self) -> Vec<E>;
}
impl<E: Element> FromArray<(), E> for E {
    fn flatten(self) -> Vec<E> {
        vec![self]
    }
}
impl<E: Element, const A: usize> FromArray<(Const<A>,), E> for [E; A] {
    fn flatten(self) -> Vec<E> {
        self.to_vec()
    }
}
impl<E: Element, const A: usize, const B: usize> FromArray<(Const<A>, Const<B>), E>
    for [[E; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.iter().flatten().copied().collect()
    }
}
impl<E: Element, const A: usize, const B: usize, const C: usize>
    FromArray<(Const<A>, Const<B>, Const<C>), E> for [[[E; C]; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.iter().flatten().flatten().copied().collect()
    }
}
impl<E: Element, const A: usize, const B: usize, const C: usize, const F: usize>
    FromArray<(Const<A>, Const<B>, Const<C>, Const<F>), E> for [[[[E; F]; C]; B]; A]
{
    fn flatten(self) -> Vec<E> {
        self.iter().flatten().flatten().flatten().copied().collect()
    }
}
