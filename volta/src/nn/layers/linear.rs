//! A fully connected layer.
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::random::Rng;
use crate::shape::{Axis, Const, Dim, Rank1, Rank2};
use crate::tensor::Tensor;

/// `y = x · Wᵀ + b` from `I` input features to `O` output features; the bias is
/// optional, as `nn.Linear(I, O, bias=False)` ([`Linear::without_bias`]). It is
/// one product that starts from the bias (PyTorch's `addmm`,
/// [`RawTensor::matmul_add`](crate::RawTensor::matmul_add)), so the product is
/// written once, with its bias.
///
/// The batch dim of the input may be static (`Rank2<32, I>`) or dynamic
/// (`(usize, Const<I>)`, e.g. a last partial batch); the feature widths are part of
/// the type, so chaining layers of mismatched widths does not compile.
///
/// ```
/// use volta::prelude::*;
/// let mut rng = Rng::seed(0);
/// let layer = Linear::<3, 2>::new(&mut rng);
/// let y: Tensor<Rank2<4, 2>> = layer.forward(&Tensor::<Rank2<4, 3>>::ones());
/// let x = Tensor::<(usize, Const<3>)>::zeros_shaped((5, Const));
/// let z: Tensor<(usize, Const<2>)> = layer.forward(&x);
/// assert_eq!(z.dims(), &[5, 2]);
/// # let _ = y;
/// ```
#[derive(Clone, Debug)]
pub struct Linear<const I: usize, const O: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// The `O × I` weight, one row per output as PyTorch, safetensors and GGUF store
    /// it (so checkpoints interchange without transposes); `y = x · weightᵀ`, and the
    /// transpose is a strided view that both devices' matmuls read in place.
    pub weight: Tensor<Rank2<O, I>, D, E>,
    /// The `O` biases, added to every row (`None`: a layer without them).
    pub bias: Option<Tensor<Rank1<O>, D, E>>,
}

impl<const I: usize, const O: usize, D: Backend<E>, E: Float> Linear<I, O, D, E> {
    /// A layer with PyTorch's default initialisation (Kaiming-uniform with
    /// `a = √5`): weight and bias uniform in `±1/√I`. Both are tracked leaves.
    pub fn new(rng: &mut Rng) -> Self {
        // The bound keeps each output's variance near that of one input at start.
        let bound = 1.0 / (I as f64).sqrt();
        let (lo, hi) = (E::from_f64(-bound), E::from_f64(bound));
        Linear {
            weight: Tensor::uniform(lo, hi, rng).requires_grad(),
            bias: Some(Tensor::uniform(lo, hi, rng).requires_grad()),
        }
    }

    /// A layer without a bias, `y = x · Wᵀ` (PyTorch's `bias=False`; Llama's
    /// projections): the weight [`Linear::new`] draws.
    pub fn without_bias(rng: &mut Rng) -> Self {
        Linear {
            bias: None,
            ..Self::new(rng)
        }
    }

    /// A layer with the given weight and bias (tracked as they are given).
    pub fn from_tensors(weight: Tensor<Rank2<O, I>, D, E>, bias: Tensor<Rank1<O>, D, E>) -> Self {
        Linear {
            weight,
            bias: Some(bias),
        }
    }

    /// A layer with the given weight and no bias (tracked as it is given).
    pub fn from_weight(weight: Tensor<Rank2<O, I>, D, E>) -> Self {
        Linear { weight, bias: None }
    }

    /// Applies the layer to a batch of rows: `(B, I) → (B, O)`.
    pub fn forward<B: Dim>(&self, x: &Tensor<(B, Const<I>), D, E>) -> Tensor<(B, Const<O>), D, E> {
        let Some(bias) = &self.bias else {
            return x.matmul(&self.weight.t());
        };
        let shape = (x.shape().0, Const::<O>);
        let bias = bias.broadcast_to::<_, Axis<0>>(shape);
        // One product that starts from the bias (`addmm`).
        let y = x
            .raw()
            .matmul_add(&self.weight.raw().transpose_last(), bias.raw());
        Tensor::from_raw(shape, y)
    }
}

impl<const I: usize, const O: usize, D: Backend<E>, E: Float> Module<D, E> for Linear<I, O, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
        if let Some(bias) = &mut self.bias {
            v.param("bias", bias);
        }
    }
}

impl<const I: usize, const O: usize, D: Backend<E>, E: Float> ToDevice<E> for Linear<I, O, D, E> {
    type On<D2: Backend<E>> = Linear<I, O, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Linear<I, O, D2, E> {
        Linear {
            weight: self.weight.to::<D2>(),
            bias: self.bias.as_ref().map(|b| b.to::<D2>()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Rank2;

    #[test]
    fn forward_values_match_hand_computation() {
        let layer = Linear::<2, 3>::from_tensors(
            Tensor::from_array([[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]),
            Tensor::from_array([0.5, -0.5, 1.0]),
        );
        let x = Tensor::<Rank2<2, 2>>::from_array([[1.0, 1.0], [2.0, -1.0]]);
        let y = layer.forward(&x);
        // [1,1]·Wᵀ = [5,7,9]; [2,-1]·Wᵀ = [-2,-1,0]; plus bias.
        assert_eq!(y.to_vec(), vec![5.5, 6.5, 10.0, -1.5, -1.5, 1.0]);
    }

    #[test]
    fn dynamic_batch_shape_and_gradients() {
        let mut rng = Rng::seed(1);
        let layer = Linear::<4, 3>::new(&mut rng);
        let x = Tensor::<(usize, Const<4>)>::randn_shaped((5, Const), &mut rng);
        let y = layer.forward(&x);
        assert_eq!(y.dims(), &[5, 3]);
        let grads = y.sum_all().backward();
        // d(sum)/d(bias) = batch size for every output; d/dW[o, i] = Σ_rows x[r, i].
        let gb = grads
            .get(layer.bias.as_ref().unwrap())
            .expect("bias is used");
        assert_eq!(gb.to_vec(), vec![5.0; 3]);
        let gw = grads.get(&layer.weight).expect("weight is used").to_vec();
        let xv = x.to_vec();
        for i in 0..4 {
            let col: f32 = (0..5).map(|r| xv[r * 4 + i]).sum();
            for o in 0..3 {
                assert!((gw[o * 4 + i] - col).abs() < 1e-5, "dW[{o},{i}]");
            }
        }
    }

    #[test]
    fn init_is_bounded_and_tracked() {
        let mut layer = Linear::<16, 4>::new(&mut Rng::seed(3));
        assert!(layer.weight.is_tracked() && layer.bias.as_ref().unwrap().is_tracked());
        let bound = 0.25;
        assert!(layer.weight.to_vec().iter().all(|w| w.abs() <= bound));
        assert!(layer.weight.to_vec().iter().any(|w| w.abs() > bound / 4.0));
        assert_eq!(layer.param_count(), 16 * 4 + 4);
    }

    #[test]
    fn a_layer_without_bias_is_the_product_alone() {
        let mut layer =
            Linear::<2, 3>::from_weight(Tensor::from_array([[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]));
        let x = Tensor::<Rank2<2, 2>>::from_array([[1.0, 1.0], [2.0, -1.0]]);
        assert_eq!(
            layer.forward(&x).to_vec(),
            vec![5.0, 7.0, 9.0, -2.0, -1.0, 0.0]
        );
        let names: Vec<String> = layer.named_params().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["weight"]);
        let mut drawn = Linear::<16, 4>::without_bias(&mut Rng::seed(3));
        assert_eq!(drawn.param_count(), 16 * 4);
        // The same weight as `new` draws first.
        assert_eq!(
            drawn.weight.to_vec(),
            Linear::<16, 4>::new(&mut Rng::seed(3)).weight.to_vec()
        );
    }
}
