//! Adam and AdamW.
use super::{
    Optimizer, OptimizerState, StateError, check, check_kind, for_each_grad, slot, split_name,
};
use crate::autograd::Gradients;
use crate::backend::cpu::Cpu;
use crate::backend::{AdamInput, AdamStep, Backend};
use crate::dtype::Float;
use crate::layout::Layout;
use crate::nn::Module;
use crate::tensor::RawTensor;

/// Adam (Kingma & Ba) with bias correction, as PyTorch defines it:
/// `m ← β₁m + (1−β₁)g`, `v ← β₂v + (1−β₂)g²`,
/// `p ← p − lr · (m / (1−β₁ᵗ)) / (√(v / (1−β₂ᵗ)) + ε)`, with `t` counted per
/// parameter. Weight decay is L2 (added to `g`) for [`Adam::new`] and decoupled
/// (`p ← p·(1 − lr·λ)` before the step) for [`Adam::adamw`].
///
/// Each parameter's step is one fused pass that reads the parameter, its gradient
/// and its moments once and writes them anew; a model's parameters step together
/// ([`Backend::adam_steps`]: on the GPU, many to a launch, as PyTorch's
/// multi-tensor `foreach` step).
#[derive(Clone, Debug)]
pub struct Adam<D: Backend<E> = Cpu, E: Float = f32> {
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    decoupled: bool,
    states: Vec<Option<Moments<D, E>>>,
    steps: u64,
}

/// The running moments of one parameter.
#[derive(Clone, Debug)]
struct Moments<D: Backend<E>, E: Float> {
    m: RawTensor<D, E>,
    v: RawTensor<D, E>,
    t: i32,
}

impl<D: Backend<E>, E: Float> Adam<D, E> {
    /// Adam with learning rate `lr`, `β = (0.9, 0.999)`, `ε = 1e-8`, no weight decay.
    ///
    /// # Panics
    /// When `lr` is negative or not finite.
    pub fn new(lr: f64) -> Self {
        check("Adam: lr", lr, lr >= 0.0, "≥ 0");
        Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            states: Vec::new(),
            steps: 0,
        }
    }

    /// AdamW: Adam with decoupled weight decay `λ`.
    ///
    /// # Panics
    /// When `lr` or `weight_decay` is negative or not finite.
    pub fn adamw(lr: f64, weight_decay: f64) -> Self {
        let mut opt = Self::new(lr).with_weight_decay(weight_decay);
        opt.decoupled = true;
        opt
    }

    /// Sets `β₁, β₂ ∈ [0, 1)`.
    ///
    /// # Panics
    /// When either is outside `[0, 1)`.
    pub fn with_betas(mut self, beta1: f64, beta2: f64) -> Self {
        check(
            "Adam: beta1",
            beta1,
            (0.0..1.0).contains(&beta1),
            "in [0, 1)",
        );
        check(
            "Adam: beta2",
            beta2,
            (0.0..1.0).contains(&beta2),
            "in [0, 1)",
        );
        (self.beta1, self.beta2) = (beta1, beta2);
        self
    }

    /// Sets `ε > 0`, added to the denominator for stability.
    ///
    /// # Panics
    /// When `eps` is not positive and finite.
    pub fn with_eps(mut self, eps: f64) -> Self {
        check("Adam: eps", eps, eps > 0.0, "> 0");
        self.eps = eps;
        self
    }

    /// Sets the weight decay `λ ≥ 0` (L2 for Adam, decoupled for AdamW).
    ///
    /// # Panics
    /// When `weight_decay` is negative or not finite.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Self {
        check(
            "Adam: weight_decay",
            weight_decay,
            weight_decay >= 0.0,
            "≥ 0",
        );
        self.weight_decay = weight_decay;
        self
    }
}

/// Elements of the parameters one [`Backend::adam_steps`] call steps, about: the
/// memory a step holds beyond the model and its state (PyTorch updates in place).
const STEP_CHUNK: usize = 1 << 24;

/// A parameter's step before it runs: what it reads and the step count it makes.
struct Pending<D: Backend<E>, E: Float> {
    position: usize,
    p: RawTensor<D, E>,
    grad: RawTensor<D, E>,
    old: Option<Moments<D, E>>,
    hyper: AdamStep,
    t: i32,
}

impl<D: Backend<E>, E: Float> Adam<D, E> {
    /// [`Optimizer::step`], stepping about `chunk_elements` elements' worth of
    /// parameters at a time.
    fn step_in_chunks<M: Module<D, E> + ?Sized>(
        &mut self,
        model: &mut M,
        grads: &Gradients<D, E>,
        chunk_elements: usize,
    ) {
        // The count may come from a checkpoint: saturate rather than overflow.
        self.steps = self.steps.saturating_add(1);
        // Every parameter's inputs first, so that the backend steps them together.
        let mut inputs = Vec::new();
        for_each_grad(model, grads, |position, param, grad| {
            let p = param.value().clone();
            let state = slot(&mut self.states, position, p.dims(), |s| s.m.dims());
            let old = state.take();
            let t = old.as_ref().map_or(1, |s| s.t + 1);
            let hyper = AdamStep::at_step(
                self.lr,
                (self.beta1, self.beta2),
                self.eps,
                self.weight_decay,
                self.decoupled,
                t,
            );
            inputs.push(Pending {
                position,
                p,
                grad,
                old,
                hyper,
                t,
            });
        });
        // In chunks of about `chunk_elements` elements, each applied before the next
        // steps: the old values and moments of one chunk at most are held beside
        // the new ones (the whole state would double a large model's memory).
        let mut rest = inputs.into_iter().peekable();
        while rest.peek().is_some() {
            let mut chunk = Vec::new();
            let mut elements = 0;
            while let Some(next) = rest.next_if(|_| chunk.is_empty() || elements < chunk_elements) {
                elements += next.p.dims().iter().product::<usize>();
                chunk.push(next);
            }
            self.step_chunk(model, grads, chunk);
        }
    }

    /// Steps `chunk`'s parameters together and applies the results.
    fn step_chunk<M: Module<D, E> + ?Sized>(
        &mut self,
        model: &mut M,
        grads: &Gradients<D, E>,
        chunk: Vec<Pending<D, E>>,
    ) {
        let steps: Vec<AdamInput<'_, D, E>> = chunk
            .iter()
            .map(|s| AdamInput {
                p: s.p.view(),
                g: s.grad.view(),
                moments: s.old.as_ref().map(|m| (m.m.view(), m.v.view())),
                hyper: s.hyper,
            })
            .collect();
        let outputs = D::adam_steps(&steps);
        drop(steps);
        // The walk visits the chunk's parameters in the order they were gathered.
        let mut results = chunk.into_iter().zip(outputs).peekable();
        for_each_grad(model, grads, |position, param, _| {
            let Some((s, (p, m, v))) = results.next_if(|(s, _)| s.position == position) else {
                return;
            };
            let layout = Layout::contiguous(s.p.dims());
            self.states[position] = Some(Moments {
                m: RawTensor::leaf(m, layout),
                v: RawTensor::leaf(v, layout),
                t: s.t,
            });
            param
                .update(RawTensor::leaf(p, layout))
                .expect("an update keeps the parameter's dims");
            // Its old value and moments go now, before the next chunk allocates.
            drop(s);
        });
        assert!(
            results.next().is_none(),
            "a model visits the same parameters on every walk"
        );
    }
}

impl<D: Backend<E>, E: Float> Optimizer<D, E> for Adam<D, E> {
    fn step<M: Module<D, E> + ?Sized>(&mut self, model: &mut M, grads: &Gradients<D, E>) {
        self.step_in_chunks(model, grads, STEP_CHUNK);
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        check("Adam: lr", lr, lr >= 0.0, "≥ 0");
        self.lr = lr;
    }

    fn state(&self) -> OptimizerState<D, E> {
        let mut tensors = Vec::new();
        for (i, s) in self.states.iter().enumerate() {
            if let Some(s) = s {
                tensors.push((format!("{i}.exp_avg"), s.m.clone()));
                tensors.push((format!("{i}.exp_avg_sq"), s.v.clone()));
                let t = RawTensor::from_vec(vec![E::from_f64(s.t as f64)], &[1]);
                tensors.push((format!("{i}.step"), t));
            }
        }
        OptimizerState {
            kind: KIND.to_string(),
            step: self.steps,
            tensors,
        }
    }

    fn load_state(&mut self, state: OptimizerState<D, E>) -> Result<(), StateError> {
        check_kind(KIND, &state)?;
        let mut parts: Vec<Parts<D, E>> = Vec::new();
        for (name, t) in state.tensors {
            let (position, slot) = split_name(&name)?;
            if parts.len() <= position {
                parts.resize_with(position + 1, || (None, None, None));
            }
            match slot {
                "exp_avg" => parts[position].0 = Some(t),
                "exp_avg_sq" => parts[position].1 = Some(t),
                "step" if t.layout().numel() == 1 => {
                    // A count from a file: a whole number of steps taken, with room
                    // for the next (`t + 1` must not overflow). A negative count
                    // breaks the bias correction; a fraction or NaN is no count.
                    let step = t.to_vec()[0].to_f64();
                    if !(step.fract() == 0.0 && (0.0..i32::MAX as f64).contains(&step)) {
                        return Err(StateError::Step { name, found: step });
                    }
                    parts[position].2 = Some(step as i32)
                }
                _ => return Err(StateError::UnknownTensor(name)),
            }
        }
        let mut states = Vec::with_capacity(parts.len());
        for (i, part) in parts.into_iter().enumerate() {
            states.push(match part {
                (Some(m), Some(v), Some(t)) => Some(Moments { m, v, t }),
                (None, None, None) => None,
                _ => return Err(StateError::UnknownTensor(format!("{i}.(incomplete)"))),
            });
        }
        self.states = states;
        self.steps = state.step;
        Ok(())
    }
}

/// The kind name in saved states.
const KIND: &str = "adam";

/// One parameter's saved moments and step, gathered while loading.
type Parts<D, E> = (
    Option<RawTensor<D, E>>,
    Option<RawTensor<D, E>>,
    Option<i32>,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::Sgd;
    use crate::shape::Rank1;
    use crate::tensor::Tensor;

    /// A loss whose gradient with respect to `p` is `coef`.
    fn grads_of(p: &Tensor<Rank1<3>>, coef: [f32; 3]) -> Gradients<Cpu, f32> {
        p.mul(&Tensor::<Rank1<3>>::from_array(coef))
            .sum_all()
            .backward()
    }

    /// Reference Adam in f64, PyTorch's formulas.
    fn reference(
        p: &mut [f64; 3],
        grads: &[[f64; 3]],
        (lr, b1, b2, eps, wd, decoupled): (f64, f64, f64, f64, f64, bool),
    ) {
        let (mut m, mut v) = ([0.0; 3], [0.0; 3]);
        for (t, g) in grads.iter().enumerate() {
            let t = t as i32 + 1;
            for i in 0..3 {
                let mut gi = g[i];
                if decoupled {
                    p[i] *= 1.0 - lr * wd;
                } else {
                    gi += wd * p[i];
                }
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
                p[i] -= lr * mh / (vh.sqrt() + eps);
            }
        }
    }

    fn run(mut opt: Adam, steps: &[[f32; 3]]) -> Vec<f32> {
        let mut p = Tensor::<Rank1<3>>::from_array([1.0, -2.0, 0.5]).requires_grad();
        for coef in steps {
            let g = grads_of(&p, *coef);
            opt.step(&mut p, &g);
            assert!(p.is_tracked());
        }
        p.to_vec()
    }

    fn assert_close(got: &[f32], want: &[f64]) {
        for (a, b) in got.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn first_step_is_lr_times_sign_of_gradient() {
        // With bias correction, m̂ = g and v̂ = g² on step 1: p ← p − lr·g/(|g|+ε).
        let got = run(Adam::new(0.01), &[[0.3, -4.0, 1e-3]]);
        let want = [
            1.0 - 0.01 * 0.3 / (0.3 + 1e-8),
            -2.0 + 0.01,
            0.5 - 0.01 * 1e-3 / (1e-3 + 1e-8),
        ];
        assert_close(&got, &want);
    }

    #[test]
    fn several_steps_match_reference() {
        let steps = [[0.3f32, -4.0, 1e-3], [-0.1, -2.0, 0.5], [0.7, 1.0, -0.2]];
        let g64: Vec<[f64; 3]> = steps.iter().map(|s| s.map(f64::from)).collect();
        let hyper = (0.05, 0.8, 0.99, 1e-6, 0.1, false);
        let mut want = [1.0, -2.0, 0.5];
        reference(&mut want, &g64, hyper);
        let opt = Adam::new(0.05)
            .with_betas(0.8, 0.99)
            .with_eps(1e-6)
            .with_weight_decay(0.1);
        assert_close(&run(opt, &steps), &want);

        let mut want = [1.0, -2.0, 0.5];
        reference(&mut want, &g64, (0.05, 0.9, 0.999, 1e-8, 0.1, true));
        assert_close(&run(Adam::adamw(0.05, 0.1), &steps), &want);
    }

    #[test]
    fn a_loaded_state_continues_exactly() {
        let steps = [[0.3f32, -4.0, 1e-3], [-0.1, -2.0, 0.5], [0.7, 1.0, -0.2]];
        let straight = run(Adam::adamw(0.05, 0.1), &steps);

        let mut p = Tensor::<Rank1<3>>::from_array([1.0, -2.0, 0.5]).requires_grad();
        let mut first = Adam::adamw(0.05, 0.1);
        for coef in &steps[..2] {
            let g = grads_of(&p, *coef);
            first.step(&mut p, &g);
        }
        let state = first.state();
        assert_eq!((state.kind.as_str(), state.step), ("adam", 2));
        let mut resumed = Adam::adamw(0.05, 0.1);
        resumed
            .load_state(state)
            .expect("an Adam state loads into Adam");
        let g = grads_of(&p, steps[2]);
        resumed.step(&mut p, &g);
        assert_eq!(p.to_vec(), straight);

        let err = Sgd::<Cpu, f32>::new(0.1)
            .load_state(resumed.state())
            .unwrap_err();
        assert!(matches!(err, StateError::Kind { .. }), "{err}");
    }

    #[test]
    fn stepping_in_chunks_is_stepping_at_once() {
        // Three parameters of 3 elements: chunks of 1 element step each alone
        // (three backend calls), chunks of 100 all together (one).
        type Three = (Tensor<Rank1<3>>, Tensor<Rank1<3>>, Tensor<Rank1<3>>);
        let train = |chunk: usize| -> Vec<Vec<f32>> {
            let mut m: Three = (
                Tensor::from_array([1.0, -2.0, 0.5]).requires_grad(),
                Tensor::from_array([0.1, 0.2, 0.3]).requires_grad(),
                Tensor::from_array([-1.0, 4.0, 2.0]).requires_grad(),
            );
            let mut opt = Adam::adamw(0.05, 0.1);
            for s in 0..3 {
                let c = |k: f32| Tensor::<Rank1<3>>::from_array([k, -k, 2.0 * k + s as f32]);
                let g = (m.0.mul(&c(0.3)).sum_all())
                    .add(&m.1.mul(&c(-1.5)).sum_all())
                    .add(&m.2.mul(&m.2).mul(&c(0.7)).sum_all())
                    .backward();
                opt.step_in_chunks(&mut m, &g, chunk);
            }
            assert_eq!(opt.state().step, 3);
            vec![m.0.to_vec(), m.1.to_vec(), m.2.to_vec()]
        };
        assert_eq!(train(1), train(100));
        assert_eq!(train(4), train(100));
    }
}
