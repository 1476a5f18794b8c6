//! Dropout: zeroes elements at random while training.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::random::Rng;
use crate::shape::Shape;
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicU64, Ordering};

/// Zeroes each element with probability `p` and scales the others by `1/(1 − p)`
/// in training mode; the identity in evaluation mode (PyTorch's `nn.Dropout`).
///
/// Seeded: the layer draws its seed from the `Rng` it is built with, and call `k`
/// uses the mask of `(seed, k)`, generated on the tensor's device by a counter-based
/// generator, so a CPU run and a GPU run drop the same elements.
///
/// ```
/// use volta::prelude::*;
/// let mut drop = Dropout::new(0.5, &mut Rng::seed(0));
/// let x = Tensor::<Rank1<1000>>::ones();
/// let kept = drop.forward(&x).to_vec().iter().filter(|&&v| v == 2.0).count();
/// assert!((400..600).contains(&kept));
/// Module::<Cpu, f32>::eval(&mut drop);
/// assert_eq!(Module::<Cpu, f32>::param_count(&mut drop), 0);
/// assert_eq!(drop.forward(&x).to_vec(), x.to_vec());
/// ```
#[derive(Debug)]
pub struct Dropout {
    p: f64,
    seed: u64,
    calls: AtomicU64,
    training: bool,
}

impl Clone for Dropout {
    fn clone(&self) -> Self {
        Dropout {
            p: self.p,
            seed: self.seed,
            calls: AtomicU64::new(self.calls.load(Ordering::Relaxed)),
            training: self.training,
        }
    }
}

impl Dropout {
    /// Dropout with probability `p ∈ [0, 1]`, in training mode.
    ///
    /// # Panics
    /// When `p` is outside `[0, 1]`.
    pub fn new(p: f64, rng: &mut Rng) -> Self {
        assert!(
            (0.0..=1.0).contains(&p),
            "Dropout: p must be in [0, 1], got {p}"
        );
        Dropout {
            p,
            seed: rng.next_u64(),
            calls: AtomicU64::new(0),
            training: true,
        }
    }

    /// Dropout with probability `p` and the mask stream `seed` (no `Rng` drawn).
    ///
    /// # Panics
    /// When `p` is outside `[0, 1]`.
    pub fn seeded(p: f64, seed: u64) -> Self {
        assert!(
            (0.0..=1.0).contains(&p),
            "Dropout: p must be in [0, 1], got {p}"
        );
        Dropout {
            p,
            seed,
            calls: AtomicU64::new(0),
            training: true,
        }
    }

    /// A second layer of the same `p` whose masks are unrelated to this one's: its
    /// seed is this one's mixed with `stream` (a layer that drops in two places
    /// takes one per place, without drawing from the `Rng` again).
    pub fn split(&self, stream: u64) -> Self {
        let seed = (self.seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
        Dropout {
            training: self.training,
            ..Dropout::seeded(self.p, seed)
        }
    }

    /// The drop probability.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// Whether the layer drops (training mode).
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// Applies dropout (training) or passes `x` through (evaluation).
    pub fn forward<S: Shape, D: Backend<E>, E: Float>(
        &self,
        x: &Tensor<S, D, E>,
    ) -> Tensor<S, D, E> {
        match self.next_seed() {
            Some(seed) => x.map_raw(|r| crate::nn::functional::dropout(r, self.p, seed)),
            None => x.clone(),
        }
    }

    /// The mask seed of this call (and counts the call), or `None` where the
    /// call does not drop (evaluation mode, or `p` = 0). For kernels that drop
    /// inside themselves, such as fused attention.
    pub fn next_seed(&self) -> Option<u64> {
        if !self.training || self.p == 0.0 {
            return None;
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        // SplitMix-style mixing keeps the streams of consecutive calls unrelated.
        Some(
            self.seed
                .wrapping_add(call.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .rotate_left(17),
        )
    }
}

impl<D: Backend<E>, E: Float> Module<D, E> for Dropout {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.training(&mut self.training);
        v.counter("seed", &mut self.seed);
        v.counter("calls", self.calls.get_mut());
    }
}

impl<E: Float> ToDevice<E> for Dropout {
    type On<D2: Backend<E>> = Dropout;
    fn to<D2: Backend<E>>(&self) -> Dropout {
        self.clone()
    }
}
