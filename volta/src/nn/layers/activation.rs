//! Activation functions as layers, for `model!` blocks and layer lists.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::shape::Shape;
use crate::tensor::Tensor;

macro_rules! activation {
    ($($(#[$doc:meta])* $name:ident => $method:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;

        impl $name {
            /// Applies the activation elementwise (any shape, any device).
            pub fn forward<S: Shape, D: Backend<E>, E: Float>(
                &self,
                x: &Tensor<S, D, E>,
            ) -> Tensor<S, D, E> {
                x.$method()
            }
        }

        impl<D: Backend<E>, E: Float> Module<D, E> for $name {
            fn visit(&mut self, _: &mut Visitor<'_, D, E>) {}
        }

        impl<E: Float> ToDevice<E> for $name {
            type On<D2: Backend<E>> = $name;
            fn to<D2: Backend<E>>(&self) -> $name {
                *self
            }
        }
    )*};
}

activation! {
    /// `max(x, 0)`.
    Relu => relu;
    /// The Gaussian error linear unit `x·Φ(x)` (exact, with erf).
    Gelu => gelu;
    /// `x·σ(x)` (also called swish).
    Silu => silu;
    /// The logistic function `1 / (1 + e^−x)`.
    Sigmoid => sigmoid;
    /// The hyperbolic tangent.
    Tanh => tanh;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Rank1;

    #[test]
    fn layers_apply_their_function() {
        let x = Tensor::<Rank1<3>>::from_array([-1.0, 0.0, 2.0]);
        assert_eq!(Relu.forward(&x).to_vec(), vec![0.0, 0.0, 2.0]);
        let t = Tanh.forward(&x).to_vec();
        assert!((t[2] - 2f32.tanh()).abs() < 1e-6);
        let s = Sigmoid.forward(&x).to_vec();
        assert!((s[1] - 0.5).abs() < 1e-7);
        let si = Silu.forward(&x).to_vec();
        assert!((si[2] - 2.0 / (1.0 + (-2f32).exp())).abs() < 1e-6);
        // GELU(−1) = −Φ(−1) = −0.15865525…
        assert!((Gelu.forward(&x).to_vec()[0] + 0.158_655_25).abs() < 1e-6);
    }
}
