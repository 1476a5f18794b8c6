//! How optimisers, checkpoints and mode switches reach the insides of a model.
use crate::autograd::Gradients;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::{Shape, ShapeError};
use crate::tensor::{RawTensor, Tensor};

/// One tensor of a model (a trainable parameter or a buffer such as batch norm's
/// running mean), seen without its shape type so that one loop reaches tensors of
/// every shape.
pub trait Param<D: Backend<E>, E: Float> {
    /// The current value.
    fn value(&self) -> &RawTensor<D, E>;
    /// This parameter's gradient in `grads`; `None` when the loss did not depend on it.
    fn grad(&self, grads: &Gradients<D, E>) -> Option<RawTensor<D, E>>;
    /// Replaces the value with `value` as a new tracked leaf (the next forward pass
    /// records gradients for it). Fails when `value`'s dims differ from the
    /// parameter's type.
    fn update(&mut self, value: RawTensor<D, E>) -> Result<(), ShapeError>;
    /// Replaces the value with `value`, untracked (a buffer: no gradient flows to it).
    fn set(&mut self, value: RawTensor<D, E>) -> Result<(), ShapeError>;
}

impl<S: Shape, D: Backend<E>, E: Float> Param<D, E> for Tensor<S, D, E> {
    fn value(&self) -> &RawTensor<D, E> {
        self.raw()
    }
    fn grad(&self, grads: &Gradients<D, E>) -> Option<RawTensor<D, E>> {
        grads.get(self).map(|g| g.raw().clone())
    }
    fn update(&mut self, value: RawTensor<D, E>) -> Result<(), ShapeError> {
        *self = Tensor::try_from_raw(value.tracked_leaf())?;
        Ok(())
    }
    fn set(&mut self, value: RawTensor<D, E>) -> Result<(), ShapeError> {
        *self = Tensor::try_from_raw(value.detach())?;
        Ok(())
    }
}

/// What a [`Visitor`] is shown: each with its dotted name (`conv1.weight`).
pub enum Entry<'a, D: Backend<E>, E: Float> {
    /// A trainable parameter.
    Param(&'a mut dyn Param<D, E>),
    /// A tensor that is part of the model's state but not trained (running
    /// statistics): saved in checkpoints and moved with the model.
    Buffer(&'a mut dyn Param<D, E>),
    /// A layer's train/eval flag (`true`: training).
    Training(&'a mut bool),
    /// A layer's integer state outside its tensors (a dropout layer's seed and call
    /// count): saved in checkpoints, so that a resumed run draws the random numbers
    /// the uninterrupted run would have.
    Counter(&'a mut u64),
}

/// Walks a model, naming what it finds by its path of field names, like PyTorch's
/// `named_parameters()` (`block.0.norm.scale`).
pub struct Visitor<'a, D: Backend<E>, E: Float> {
    path: String,
    f: &'a mut dyn FnMut(&str, Entry<'_, D, E>),
}

impl<'a, D: Backend<E>, E: Float> Visitor<'a, D, E> {
    /// A visitor calling `f(name, entry)` for everything a module shows it.
    pub fn new(f: &'a mut dyn FnMut(&str, Entry<'_, D, E>)) -> Self {
        Visitor {
            path: String::new(),
            f,
        }
    }

    fn at(&mut self, name: &str, entry: Entry<'_, D, E>) {
        let len = self.path.len();
        self.push(name);
        (self.f)(&self.path, entry);
        self.path.truncate(len);
    }

    fn push(&mut self, name: &str) {
        if !self.path.is_empty() && !name.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(name);
    }

    /// A trainable parameter called `name`.
    pub fn param(&mut self, name: &str, p: &mut dyn Param<D, E>) {
        self.at(name, Entry::Param(p));
    }

    /// A non-trainable state tensor called `name`.
    pub fn buffer(&mut self, name: &str, b: &mut dyn Param<D, E>) {
        self.at(name, Entry::Buffer(b));
    }

    /// An integer state called `name` (see [`Entry::Counter`]).
    pub fn counter(&mut self, name: &str, value: &mut u64) {
        self.at(name, Entry::Counter(value));
    }

    /// The train/eval flag of the module being visited.
    pub fn training(&mut self, flag: &mut bool) {
        self.at("", Entry::Training(flag));
    }

    /// A child module called `name` (its entries are named `name.…`).
    pub fn module<M: Module<D, E> + ?Sized>(&mut self, name: &str, m: &mut M) {
        let len = self.path.len();
        self.push(name);
        m.visit(self);
        self.path.truncate(len);
    }
}

/// A model or layer: something that holds parameters, buffers or a train/eval mode.
///
/// `visit` must show the same entries in the same order on every call: optimisers
/// keep their per-parameter state (momentum, Adam moments) by position.
/// `#[derive(Module)]` writes it for a struct of layers (each field visited under
/// its name), and `model!` for the structs it defines:
///
/// ```
/// use volta::prelude::*;
///
/// #[derive(Module)]
/// struct Mlp<D: Backend<f32> = Cpu> {
///     hidden: Linear<4, 8, D>,
///     out: Linear<8, 2, D>,
/// }
/// let mut rng = Rng::seed(0);
/// let mut mlp: Mlp = Mlp { hidden: Linear::new(&mut rng), out: Linear::new(&mut rng) };
/// assert_eq!(mlp.param_count(), 4 * 8 + 8 + 8 * 2 + 2);
/// let names: Vec<String> = mlp.named_params().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["hidden.weight", "hidden.bias", "out.weight", "out.bias"]);
/// ```
pub trait Module<D: Backend<E>, E: Float> {
    /// Shows `v` every parameter, buffer, train/eval flag and child module, in a
    /// fixed order.
    fn visit(&mut self, v: &mut Visitor<'_, D, E>);

    /// Calls `f` on every trainable parameter, in a fixed order.
    fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<D, E>)) {
        self.visit(&mut Visitor::new(&mut |_, e| {
            if let Entry::Param(p) = e {
                f(p)
            }
        }));
    }

    /// Every trainable parameter with its dotted name, in visiting order.
    fn named_params(&mut self) -> Vec<(String, RawTensor<D, E>)> {
        let mut out = Vec::new();
        self.visit(&mut Visitor::new(&mut |name, e| {
            if let Entry::Param(p) = e {
                out.push((name.to_string(), p.value().clone()));
            }
        }));
        out
    }

    /// Every parameter and buffer with its dotted name: what a checkpoint holds.
    fn named_tensors(&mut self) -> Vec<(String, RawTensor<D, E>)> {
        let mut out = Vec::new();
        self.visit(&mut Visitor::new(&mut |name, e| match e {
            Entry::Param(p) | Entry::Buffer(p) => out.push((name.to_string(), p.value().clone())),
            Entry::Training(_) | Entry::Counter(_) => {}
        }));
        out
    }

    /// The number of scalar parameters.
    fn param_count(&mut self) -> usize {
        let mut n = 0;
        self.visit_params(&mut |p| n += p.value().layout().numel());
        n
    }

    /// Sets every layer's mode: training (dropout drops, batch norm uses batch
    /// statistics and updates its running ones) or evaluation.
    fn set_training(&mut self, training: bool) {
        self.visit(&mut Visitor::new(&mut |_, e| {
            if let Entry::Training(flag) = e {
                *flag = training
            }
        }));
    }

    /// Training mode (see [`set_training`](Self::set_training)).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode (see [`set_training`](Self::set_training)).
    fn eval(&mut self) {
        self.set_training(false);
    }
}

/// A bare tensor is a module with one parameter (a learned embedding, a scale).
impl<S: Shape, D: Backend<E>, E: Float> Module<D, E> for Tensor<S, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("", self);
    }
}

/// A vector of modules visits each under its index (`0.weight`, `1.weight`, …).
impl<M: Module<D, E>, D: Backend<E>, E: Float> Module<D, E> for Vec<M> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        for (i, m) in self.iter_mut().enumerate() {
            v.module(&i.to_string(), m);
        }
    }
}

/// An absent module (an optional bias, a layer switched off) shows nothing.
impl<M: Module<D, E>, D: Backend<E>, E: Float> Module<D, E> for Option<M> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        if let Some(m) = self {
            m.visit(v);
        }
    }
}

macro_rules! tuple_module {
    ($($m:ident $i:tt),*) => {
        /// A tuple of modules visits each element under its index.
        impl<D: Backend<E>, E: Float, $($m: Module<D, E>),*> Module<D, E> for ($($m,)*) {
            fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
                $(v.module(stringify!($i), &mut self.$i);)*
            }
        }
    };
}
tuple_module!(A 0, B 1);
tuple_module!(A 0, B 1, C 2);
tuple_module!(A 0, B 1, C 2, F 3);
tuple_module!(A 0, B 1, C 2, F 3, G 4);
tuple_module!(A 0, B 1, C 2, F 3, G 4, H 5);

/// A model or layer that can be copied to another device: `model.to::<Gpu>()`.
/// `#[derive(Module)]` and `model!` implement it for structs generic over their device.
pub trait ToDevice<E: Float> {
    /// The same type on device `D2`.
    type On<D2: Backend<E>>;
    /// A copy on device `D2`. Parameters stay trainable (tracked leaves) and buffers
    /// stay untracked; gradients do not flow back across devices.
    fn to<D2: Backend<E>>(&self) -> Self::On<D2>;
}

impl<S: Shape, D: Backend<E>, E: Float> ToDevice<E> for Tensor<S, D, E> {
    type On<D2: Backend<E>> = Tensor<S, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Tensor<S, D2, E> {
        Tensor::to::<D2>(self)
    }
}

impl<T: ToDevice<E>, E: Float> ToDevice<E> for Option<T> {
    type On<D2: Backend<E>> = Option<T::On<D2>>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        self.as_ref().map(|t| t.to::<D2>())
    }
}

impl<T: ToDevice<E>, E: Float> ToDevice<E> for Vec<T> {
    type On<D2: Backend<E>> = Vec<T::On<D2>>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        self.iter().map(|t| t.to::<D2>()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Cpu;
    use crate::nn::Linear;
    use crate::random::Rng;
    use crate::shape::Rank1;

    #[test]
    fn names_follow_the_path_of_fields_and_indices() {
        let mut rng = Rng::seed(0);
        let mut model = (
            Linear::<2, 3>::new(&mut rng),
            vec![Tensor::<Rank1<3>>::zeros().requires_grad()],
        );
        let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["0.weight", "0.bias", "1.0"]);
        assert_eq!(model.param_count(), 2 * 3 + 3 + 3);
    }

    #[test]
    fn moves_keep_parameters_trainable() {
        let t = Tensor::<Rank1<2>>::ones().requires_grad();
        let moved: Tensor<Rank1<2>, Cpu> = ToDevice::to::<Cpu>(&t);
        assert!(moved.is_tracked());
        let plain: Tensor<Rank1<2>, Cpu> = ToDevice::to::<Cpu>(&Tensor::<Rank1<2>>::ones());
        assert!(!plain.is_tracked());
    }
}
