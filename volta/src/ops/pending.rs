//! TEMPORARY: signatures of the raw ops being built on branch `kernels`; removed at merge.
#![allow(missing_docs, unused_variables)]
use crate::backend::Backend;
use crate::dtype::Float;
use crate::tensor::RawTensor;
use volta_kernels::Window2d;
impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    pub fn unfold2d(&self, win: Window2d, pad_value: E) -> Self {
        unimplemented!()
    }
    pub fn fold2d(&self, win: Window2d, input_hw: [usize; 2]) -> Self {
        unimplemented!()
    }
    pub fn normalize(&self, axis: usize, center: bool, eps: f64) -> Self {
        unimplemented!()
    }
    pub fn uniform(dims: &[usize], seed: u64) -> Self {
        unimplemented!()
    }
}
