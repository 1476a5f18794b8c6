//! Training the digits CNN a few steps at a time, so that the page can draw the
//! curve and hand the tab back to the browser between calls. The recipe is the
//! main job's (`train/run.rs`): AdamW at 3e-3 with weight decay 1e-4, a cosine
//! schedule after one epoch of warm-up, label smoothing 0.05, gradients clipped
//! to norm 5, batches of 32, a fifth of the images held out.
use crate::DigitsCnn;
use volta::data::Labelled;
use volta::nn::loss::cross_entropy_smoothed;
use volta::optim::{CosineWarmup, LrSchedule, clip_grad_norm};
use volta::prelude::*;

/// Images per training step.
pub const BATCH: usize = 32;
/// Share of the images held out for testing.
pub const TEST_FRACTION: f64 = 0.2;
const LR: f64 = 3e-3;
const WEIGHT_DECAY: f64 = 1e-4;
const SMOOTHING: f64 = 0.05;
const MAX_GRAD_NORM: f64 = 5.0;

/// A run-time number of 1×8×8 images.
pub type Images<D> = Tensor<(usize, Const<1>, Const<8>, Const<8>), D>;

/// The figures of one step, still on the device (reading them waits for it).
pub struct Step<D: Backend<f32>> {
    /// The batch's training loss.
    pub loss: Tensor<(), D>,
    /// The batch's logits.
    pub logits: Tensor<Rank2<BATCH, 10>, D>,
    /// The batch's labels.
    pub labels: Vec<u32>,
}

/// A training run in progress on device `D`.
pub struct Trainer<D: Backend<f32>> {
    /// The model being trained (fresh random weights at the start).
    pub model: DigitsCnn<D>,
    opt: Adam<D>,
    schedule: CosineWarmup,
    train: Labelled,
    test: Labelled,
    order: Vec<usize>,
    next: usize,
    step: u64,
    steps_per_epoch: u64,
    total: u64,
    rng: Rng,
}

impl<D: Backend<f32>> Trainer<D> {
    /// A run of `epochs` over `data`'s training split, from weights drawn with `seed`.
    pub fn new(data: &Labelled, epochs: u32, seed: u64) -> Self {
        let mut rng = Rng::seed(seed);
        let (train, test) = data.split(TEST_FRACTION, &mut rng);
        let mut model = DigitsCnn::<D>::new(&mut rng);
        model.train();
        let steps_per_epoch = (train.len() / BATCH) as u64;
        let total = steps_per_epoch * u64::from(epochs.max(1));
        Trainer {
            model,
            opt: Adam::<D>::adamw(LR, WEIGHT_DECAY),
            schedule: CosineWarmup::new(LR, steps_per_epoch, total),
            order: Vec::new(),
            next: 0,
            step: 0,
            steps_per_epoch,
            total,
            train,
            test,
            rng,
        }
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Steps in the whole run.
    pub fn total_steps(&self) -> u64 {
        self.total
    }

    /// Steps per epoch (full batches of the training split).
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }

    /// Whether every step of the run has been taken.
    pub fn done(&self) -> bool {
        self.step >= self.total
    }

    /// The next batch of the shuffled training split (reshuffled every epoch).
    fn batch(&mut self) -> (Vec<f32>, Vec<u32>) {
        if self.next + BATCH > self.order.len() {
            self.order = (0..self.train.len()).collect();
            for i in (1..self.order.len()).rev() {
                let j = self.rng.below(i + 1);
                self.order.swap(i, j);
            }
            self.next = 0;
        }
        let picked = &self.order[self.next..self.next + BATCH];
        self.next += BATCH;
        let mut pixels = Vec::with_capacity(BATCH * 64);
        let mut labels = Vec::with_capacity(BATCH);
        for &i in picked {
            pixels.extend_from_slice(self.train.sample(i));
            labels.push(self.train.labels()[i]);
        }
        (pixels, labels)
    }

    /// Records one optimiser step (nothing waits for the device).
    pub fn step(&mut self) -> Step<D> {
        let (pixels, labels) = self.batch();
        let x = Tensor::<Rank4<BATCH, 1, 8, 8>, D>::from_vec(pixels)
            .expect("a batch holds BATCH images of 64 pixels");
        let y = Tensor::<Rank1<BATCH>, D, u32>::from_vec(labels.clone())
            .expect("a batch holds BATCH labels");
        self.opt.set_lr(self.schedule.lr(self.step));
        let logits = self.model.forward(&x);
        let loss = cross_entropy_smoothed(&logits, &y, SMOOTHING);
        let value = loss.detach();
        let mut grads = loss.backward();
        clip_grad_norm(&mut grads, MAX_GRAD_NORM);
        self.opt.step(&mut self.model, &grads);
        self.step += 1;
        Step {
            loss: value,
            logits: logits.detach(),
            labels,
        }
    }

    /// The held-out images as one batch: pixels and labels.
    pub fn test_set(&self) -> (Images<D>, Vec<u32>) {
        let n = self.test.len();
        let x = Tensor::from_vec_dims(self.test.features().to_vec(), &[n, 1, 8, 8])
            .expect("the test split holds n images of 1×8×8");
        (x, self.test.labels().to_vec())
    }

    /// The trained model, in evaluation mode.
    pub fn into_model(mut self) -> DigitsCnn<D> {
        self.model.eval();
        self.model
    }
}

/// The share of rows of `logits` (rows of 10) whose largest entry is at `labels`.
pub fn accuracy(logits: &[f32], labels: &[u32]) -> f64 {
    let right = logits
        .chunks_exact(10)
        .zip(labels)
        .filter(|(row, label)| argmax(row) == **label as usize)
        .count();
    right as f64 / labels.len().max(1) as f64
}

/// The index of the largest value.
pub fn argmax(row: &[f32]) -> usize {
    (0..row.len())
        .max_by(|&a, &b| row[a].total_cmp(&row[b]))
        .unwrap_or(0)
}
