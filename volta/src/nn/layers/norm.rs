//! Normalisation layers: LayerNorm and RMSNorm over the last axis, BatchNorm2d over
//! each channel of a batch of images. The normalisation itself is one row kernel
//! (`RawTensor::normalize`); the learned scale and shift are elementwise ops that
//! fuse into whatever reads the result.
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::functional::{self, affine};
use crate::nn::{Module, ToDevice, Visitor};
use crate::shape::{Const, Dim, LastDim, Rank1};
use crate::tensor::{RawTensor, Tensor};
use std::sync::Mutex;

/// Layer normalisation over the last axis (size `N`): `(x − mean)/√(var + ε)·γ + β`,
/// as PyTorch's `nn.LayerNorm(N)` (biased variance, `ε = 1e-5`, `γ = 1`, `β = 0` at
/// start); [`LayerNorm::without_bias`] has no `β`, as `bias=False`.
///
/// ```
/// use volta::prelude::*;
/// let norm = LayerNorm::<4>::new();
/// let y = norm.forward(&Tensor::<Rank2<1, 4>>::from_array([[1.0, 2.0, 3.0, 4.0]]));
/// let v = y.to_vec();
/// assert!(v.iter().sum::<f32>().abs() < 1e-5 && (v[3] - 1.3416).abs() < 1e-3);
/// ```
#[derive(Clone, Debug)]
pub struct LayerNorm<const N: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// The learned scale `γ`.
    pub weight: Tensor<Rank1<N>, D, E>,
    /// The learned shift `β` (`None`: a layer without it).
    pub bias: Option<Tensor<Rank1<N>, D, E>>,
    /// Added to the variance.
    pub eps: f64,
}

impl<const N: usize, D: Backend<E>, E: Float> LayerNorm<N, D, E> {
    /// `γ = 1`, `β = 0`, `ε = 1e-5`.
    pub fn new() -> Self {
        LayerNorm {
            weight: Tensor::ones().requires_grad(),
            bias: Some(Tensor::zeros().requires_grad()),
            eps: 1e-5,
        }
    }
    /// Without the shift `β` (PyTorch's `bias=False`; nanoGPT's `bias = False`):
    /// `γ = 1`, `ε = 1e-5`.
    pub fn without_bias() -> Self {
        LayerNorm {
            bias: None,
            ..Self::new()
        }
    }
    /// With another `ε`.
    pub fn with_eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
    /// Normalises each row along the last axis, of any shape ending in `N`.
    pub fn forward<S: LastDim<Const<N>>>(&self, x: &Tensor<S, D, E>) -> Tensor<S, D, E> {
        let axis = S::RANK - 1;
        x.map_raw(|r| {
            let y = r.normalize(axis, true, self.eps);
            affine(
                &y,
                axis,
                self.weight.raw(),
                self.bias.as_ref().map(Tensor::raw),
            )
        })
    }
}

impl<const N: usize, D: Backend<E>, E: Float> Default for LayerNorm<N, D, E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Root-mean-square normalisation over the last axis: `x/√(mean(x²) + ε)·γ`, as in
/// Llama and PyTorch's `nn.RMSNorm(N)` (`ε = 1e-6` here, `γ = 1` at start).
///
/// ```
/// use volta::prelude::*;
/// let norm = RmsNorm::<2>::new();
/// let y = norm.forward(&Tensor::<Rank1<2>>::from_array([3.0, 4.0]));
/// let rms = (12.5f32 + 1e-6).sqrt();
/// assert!((y.to_vec()[1] - 4.0 / rms).abs() < 1e-5);
/// ```
#[derive(Clone, Debug)]
pub struct RmsNorm<const N: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// The learned scale `γ`.
    pub weight: Tensor<Rank1<N>, D, E>,
    /// Added to the mean square.
    pub eps: f64,
}

impl<const N: usize, D: Backend<E>, E: Float> RmsNorm<N, D, E> {
    /// `γ = 1`, `ε = 1e-6`.
    pub fn new() -> Self {
        RmsNorm {
            weight: Tensor::ones().requires_grad(),
            eps: 1e-6,
        }
    }
    /// With another `ε`.
    pub fn with_eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }
    /// Normalises each row along the last axis, of any shape ending in `N`.
    pub fn forward<S: LastDim<Const<N>>>(&self, x: &Tensor<S, D, E>) -> Tensor<S, D, E> {
        let axis = S::RANK - 1;
        x.map_raw(|r| {
            affine(
                &r.normalize(axis, false, self.eps),
                axis,
                self.weight.raw(),
                None,
            )
        })
    }
}

impl<const N: usize, D: Backend<E>, E: Float> Default for RmsNorm<N, D, E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Batch normalisation of each of `C` channels of NCHW images, as PyTorch's
/// `nn.BatchNorm2d(C)`: in training, each channel is normalised by the mean and
/// (biased) variance of the batch over `(B, H, W)`, and the running statistics move
/// towards the batch's (`momentum = 0.1`, unbiased variance); in evaluation the
/// running statistics are used. `ε = 1e-5`; `γ = 1`, `β = 0` at start.
///
/// The running statistics are buffers: [`Module::named_tensors`] lists them and
/// they move with the layer; updating them during `forward` needs no `&mut`.
pub struct BatchNorm2d<const C: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// The learned scale `γ`.
    pub weight: Tensor<Rank1<C>, D, E>,
    /// The learned shift `β`.
    pub bias: Tensor<Rank1<C>, D, E>,
    running: Mutex<Running<C, D, E>>,
    /// Added to the variance.
    pub eps: f64,
    /// How far each training batch moves the running statistics.
    pub momentum: f64,
    training: bool,
}

/// The running mean and variance of a [`BatchNorm2d`].
#[derive(Clone, Debug)]
struct Running<const C: usize, D: Backend<E>, E: Float> {
    mean: Tensor<Rank1<C>, D, E>,
    var: Tensor<Rank1<C>, D, E>,
}

impl<const C: usize, D: Backend<E>, E: Float> Clone for BatchNorm2d<C, D, E> {
    fn clone(&self) -> Self {
        BatchNorm2d {
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            running: Mutex::new(self.running()),
            eps: self.eps,
            momentum: self.momentum,
            training: self.training,
        }
    }
}

impl<const C: usize, D: Backend<E>, E: Float> std::fmt::Debug for BatchNorm2d<C, D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchNorm2d")
            .field("channels", &C)
            .field("eps", &self.eps)
            .field("momentum", &self.momentum)
            .field("training", &self.training)
            .finish()
    }
}

impl<const C: usize, D: Backend<E>, E: Float> Default for BatchNorm2d<C, D, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const C: usize, D: Backend<E>, E: Float> BatchNorm2d<C, D, E> {
    /// `γ = 1`, `β = 0`, running mean 0 and variance 1, in training mode.
    pub fn new() -> Self {
        BatchNorm2d {
            weight: Tensor::ones().requires_grad(),
            bias: Tensor::zeros().requires_grad(),
            running: Mutex::new(Running {
                mean: Tensor::zeros(),
                var: Tensor::ones(),
            }),
            eps: 1e-5,
            momentum: 0.1,
            training: true,
        }
    }

    fn running(&self) -> Running<C, D, E> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The running mean.
    pub fn running_mean(&self) -> Tensor<Rank1<C>, D, E> {
        self.running().mean
    }

    /// The running (unbiased) variance.
    pub fn running_var(&self) -> Tensor<Rank1<C>, D, E> {
        self.running().var
    }

    /// Whether the layer is in training mode (see [`Module::set_training`]).
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// Normalises each channel, `(B, C, H, W) → (B, C, H, W)`.
    pub fn forward<B: Dim, H: Dim, W: Dim>(
        &self,
        x: &Tensor<(B, Const<C>, H, W), D, E>,
    ) -> Tensor<(B, Const<C>, H, W), D, E> {
        let y = if self.training {
            let (y, mean, var) = functional::batch_norm_train(x.raw(), self.eps);
            let mut r = self.running.lock().unwrap_or_else(|p| p.into_inner());
            let blend = |old: &Tensor<Rank1<C>, D, E>, new: &RawTensor<D, E>| {
                Tensor::try_from_raw(functional::blend(old.raw(), new, self.momentum))
                    .expect("running statistics are (C,)")
            };
            r.mean = blend(&r.mean, &mean);
            r.var = blend(&r.var, &var);
            y
        } else {
            let r = self.running();
            functional::batch_norm_eval(x.raw(), r.mean.raw(), r.var.raw(), self.eps)
        };
        let y = affine(&y, 1, self.weight.raw(), Some(self.bias.raw()));
        Tensor::from_raw(x.shape(), y)
    }
}

impl<const N: usize, D: Backend<E>, E: Float> Module<D, E> for LayerNorm<N, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
        if let Some(bias) = &mut self.bias {
            v.param("bias", bias);
        }
    }
}

impl<const N: usize, D: Backend<E>, E: Float> Module<D, E> for RmsNorm<N, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
    }
}

impl<const C: usize, D: Backend<E>, E: Float> Module<D, E> for BatchNorm2d<C, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
        v.param("bias", &mut self.bias);
        let r = self.running.get_mut().unwrap_or_else(|p| p.into_inner());
        v.buffer("running_mean", &mut r.mean);
        v.buffer("running_var", &mut r.var);
        v.training(&mut self.training);
    }
}

impl<const N: usize, D: Backend<E>, E: Float> ToDevice<E> for LayerNorm<N, D, E> {
    type On<D2: Backend<E>> = LayerNorm<N, D2, E>;
    fn to<D2: Backend<E>>(&self) -> LayerNorm<N, D2, E> {
        LayerNorm {
            weight: self.weight.to::<D2>(),
            bias: self.bias.as_ref().map(|b| b.to::<D2>()),
            eps: self.eps,
        }
    }
}

impl<const N: usize, D: Backend<E>, E: Float> ToDevice<E> for RmsNorm<N, D, E> {
    type On<D2: Backend<E>> = RmsNorm<N, D2, E>;
    fn to<D2: Backend<E>>(&self) -> RmsNorm<N, D2, E> {
        RmsNorm {
            weight: self.weight.to::<D2>(),
            eps: self.eps,
        }
    }
}

impl<const C: usize, D: Backend<E>, E: Float> ToDevice<E> for BatchNorm2d<C, D, E> {
    type On<D2: Backend<E>> = BatchNorm2d<C, D2, E>;
    fn to<D2: Backend<E>>(&self) -> BatchNorm2d<C, D2, E> {
        let r = self.running();
        BatchNorm2d {
            weight: self.weight.to::<D2>(),
            bias: self.bias.to::<D2>(),
            running: Mutex::new(Running {
                mean: r.mean.to::<D2>(),
                var: r.var.to::<D2>(),
            }),
            eps: self.eps,
            momentum: self.momentum,
            training: self.training,
        }
    }
}
