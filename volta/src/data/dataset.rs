//! Datasets: the [`Dataset`] trait that loaders read, and [`Labelled`], an in-memory
//! classification dataset with the helpers a train/test split needs.
use super::error::DataError;
use crate::random::Rng;
use std::borrow::Cow;
use std::sync::Arc;

/// One sample: its features (row-major, [`Dataset::sample_dims`] of them) and its
/// class label.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample<'a> {
    /// Row-major features; borrowed from in-memory data, owned when computed.
    pub features: Cow<'a, [f32]>,
    /// The class, below the dataset's number of classes.
    pub label: u32,
}

/// Indexed labelled samples that a [`DataLoader`](super::DataLoader) batches.
///
/// `Send + Sync`: a loader reads it from its prefetch thread while the training
/// step runs.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// Whether there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The dims of one sample's features, e.g. `[1, 8, 8]` for 8×8 grey images.
    /// Every sample has them.
    fn sample_dims(&self) -> &[usize];

    /// Sample `index`. Panics when `index >= self.len()`.
    fn get(&self, index: usize) -> Sample<'_>;
}

impl<T: Dataset + ?Sized> Dataset for Arc<T> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn sample_dims(&self) -> &[usize] {
        (**self).sample_dims()
    }
    fn get(&self, index: usize) -> Sample<'_> {
        (**self).get(index)
    }
}

impl<T: Dataset + ?Sized> Dataset for Box<T> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn sample_dims(&self) -> &[usize] {
        (**self).sample_dims()
    }
    fn get(&self, index: usize) -> Sample<'_> {
        (**self).get(index)
    }
}

/// An in-memory classification dataset: `len` samples of row-major `f32` features
/// with the same dims, and one label below `classes` per sample.
///
/// ```
/// use volta::Rng;
/// use volta::data::{Dataset, Labelled};
///
/// // Six 2×2 "images", labels 0..3.
/// let features: Vec<f32> = (0..24).map(|i| i as f32).collect();
/// let data = Labelled::new(features, &[2, 2], vec![0, 1, 2, 0, 1, 2], 3)?;
/// let (train, test) = data.split(0.5, &mut Rng::seed(0));
/// assert_eq!((train.len(), test.len()), (3, 3));
/// assert_eq!(test.get(0).features.len(), 4);
/// # Ok::<(), volta::data::DataError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Labelled {
    features: Vec<f32>,
    dims: Vec<usize>,
    /// Elements per sample (the product of `dims`).
    numel: usize,
    labels: Vec<u32>,
    classes: usize,
}

impl Labelled {
    /// A dataset from row-major features (`labels.len()` samples of `dims`) and
    /// labels. Errors with [`DataError::Inconsistent`] when the feature count is not
    /// `labels.len() × dims.product()` or a label is not below `classes`.
    pub fn new(
        features: Vec<f32>,
        dims: &[usize],
        labels: Vec<u32>,
        classes: usize,
    ) -> Result<Self, DataError> {
        let numel: usize = dims.iter().product();
        if labels.len().checked_mul(numel) != Some(features.len()) {
            return Err(DataError::Inconsistent {
                reason: format!(
                    "{} features for {} samples of dims {dims:?}",
                    features.len(),
                    labels.len()
                ),
            });
        }
        if let Some((i, l)) = labels
            .iter()
            .enumerate()
            .find(|&(_, &l)| l as usize >= classes)
        {
            return Err(DataError::Inconsistent {
                reason: format!("label {l} of sample {i} is not below {classes} classes"),
            });
        }
        Ok(Self::new_unchecked(
            features,
            dims.to_vec(),
            labels,
            classes,
        ))
    }

    /// For readers and helpers that have checked the invariants.
    pub(crate) fn new_unchecked(
        features: Vec<f32>,
        dims: Vec<usize>,
        labels: Vec<u32>,
        classes: usize,
    ) -> Self {
        let numel = dims.iter().product();
        debug_assert_eq!(features.len(), labels.len() * numel);
        Labelled {
            features,
            dims,
            numel,
            labels,
            classes,
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// All features, row-major: sample `i` is `features()[i * n..(i + 1) * n]` with
    /// `n = sample_len()`.
    pub fn features(&self) -> &[f32] {
        &self.features
    }

    /// The labels, one per sample.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }

    /// The dims of one sample.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Elements per sample (the product of [`dims`](Self::dims)).
    pub fn sample_len(&self) -> usize {
        self.numel
    }

    /// Number of classes: every label is below it.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// The features of sample `index`. Panics when `index >= len()`.
    pub fn sample(&self, index: usize) -> &[f32] {
        &self.features[index * self.numel..(index + 1) * self.numel]
    }

    /// How many samples each class has.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.classes];
        for &l in &self.labels {
            counts[l as usize] += 1;
        }
        counts
    }

    /// The same samples with other per-sample dims of the same element count (e.g.
    /// `[64]` → `[1, 8, 8]`); [`DataError::Inconsistent`] otherwise.
    pub fn reshape(mut self, dims: &[usize]) -> Result<Self, DataError> {
        let numel: usize = dims.iter().product();
        if numel != self.numel {
            return Err(DataError::Inconsistent {
                reason: format!("cannot reshape samples of dims {:?} to {dims:?}", self.dims),
            });
        }
        self.dims = dims.to_vec();
        Ok(self)
    }

    /// The samples at `indices`, in that order (repeats allowed). Panics on an
    /// index `>= len()`.
    pub fn select(&self, indices: &[usize]) -> Labelled {
        let mut features = Vec::with_capacity(indices.len() * self.numel);
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            features.extend_from_slice(self.sample(i));
            labels.push(self.labels[i]);
        }
        Labelled::new_unchecked(features, self.dims.clone(), labels, self.classes)
    }

    /// Reorders the samples with `rng` (Fisher–Yates over the sample order): the
    /// same seed gives the same order.
    pub fn shuffle(&mut self, rng: &mut Rng) {
        let mut order: Vec<usize> = (0..self.len()).collect();
        rng.shuffle(&mut order);
        *self = self.select(&order);
    }

    /// The first `n` samples and the rest, in order. Panics when `n > len()`.
    pub fn split_at(&self, n: usize) -> (Labelled, Labelled) {
        assert!(
            n <= self.len(),
            "split_at({n}) of a dataset of {} samples",
            self.len()
        );
        let (fa, fb) = self.features.split_at(n * self.numel);
        let (la, lb) = self.labels.split_at(n);
        let part = |f: &[f32], l: &[u32]| {
            Labelled::new_unchecked(f.to_vec(), self.dims.clone(), l.to_vec(), self.classes)
        };
        (part(fa, la), part(fb, lb))
    }

    /// A seeded random train/test split: shuffles the sample order with `rng` and
    /// takes `round(len × test_fraction)` samples as the test set. Returns
    /// `(train, test)`; each keeps the shuffled order. Panics unless
    /// `0 ≤ test_fraction ≤ 1`.
    pub fn split(&self, test_fraction: f64, rng: &mut Rng) -> (Labelled, Labelled) {
        assert!(
            (0.0..=1.0).contains(&test_fraction),
            "split: test_fraction {test_fraction} is not in [0, 1]"
        );
        let mut order: Vec<usize> = (0..self.len()).collect();
        rng.shuffle(&mut order);
        let n_test = (self.len() as f64 * test_fraction).round() as usize;
        let (test, train) = order.split_at(n_test);
        (self.select(train), self.select(test))
    }

    /// Takes the parts back: `(features, dims, labels, classes)`.
    pub fn into_parts(self) -> (Vec<f32>, Vec<usize>, Vec<u32>, usize) {
        (self.features, self.dims, self.labels, self.classes)
    }
}

impl Dataset for Labelled {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn sample_dims(&self) -> &[usize] {
        &self.dims
    }
    fn get(&self, index: usize) -> Sample<'_> {
        Sample {
            features: Cow::Borrowed(self.sample(index)),
            label: self.labels[index],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten samples of two features `[i, i]`, label `i % 3`.
    fn ten() -> Labelled {
        let features = (0..10).flat_map(|i| [i as f32, i as f32]).collect();
        Labelled::new(features, &[2], (0..10).map(|i| i % 3).collect(), 3).unwrap()
    }

    #[test]
    fn new_checks_lengths_and_labels() {
        assert!(matches!(
            Labelled::new(vec![0.0; 5], &[2], vec![0, 1], 2),
            Err(DataError::Inconsistent { .. })
        ));
        let e = Labelled::new(vec![0.0; 4], &[2], vec![0, 2], 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "inconsistent dataset: label 2 of sample 1 is not below 2 classes"
        );
        let d = ten();
        assert_eq!((d.len(), d.sample_len(), d.classes()), (10, 2, 3));
        assert_eq!(d.class_counts(), vec![4, 3, 3]);
        assert_eq!(d.get(4).features.as_ref(), &[4.0, 4.0]);
        assert_eq!(d.get(4).label, 1);
    }

    #[test]
    fn split_is_a_seeded_partition_that_keeps_features_with_labels() {
        let d = ten();
        let (train, test) = d.split(0.2, &mut Rng::seed(7));
        assert_eq!((train.len(), test.len()), (8, 2));
        let mut seen: Vec<f32> = train
            .features()
            .iter()
            .chain(test.features())
            .step_by(2)
            .copied()
            .collect();
        seen.sort_by(f32::total_cmp);
        assert_eq!(seen, (0..10).map(|i| i as f32).collect::<Vec<_>>());
        for part in [&train, &test] {
            for i in 0..part.len() {
                assert_eq!(part.get(i).label, part.sample(i)[0] as u32 % 3);
            }
        }
        let (train2, test2) = d.split(0.2, &mut Rng::seed(7));
        assert_eq!((train2, test2), (train, test));
        let (_, other) = d.split(0.2, &mut Rng::seed(8));
        assert_ne!(other, d.split(0.2, &mut Rng::seed(7)).1);
    }

    #[test]
    fn select_shuffle_split_at_reshape() {
        let d = ten();
        let s = d.select(&[3, 3, 0]);
        assert_eq!(s.features(), &[3.0, 3.0, 3.0, 3.0, 0.0, 0.0]);
        assert_eq!(s.labels(), &[0, 0, 0]);
        let (a, b) = d.split_at(4);
        assert_eq!((a.len(), b.len()), (4, 6));
        assert_eq!(b.sample(0), &[4.0, 4.0]);
        let mut x = d.clone();
        x.shuffle(&mut Rng::seed(1));
        let mut y = d.clone();
        y.shuffle(&mut Rng::seed(1));
        assert_eq!(x, y);
        assert_ne!(x, d);
        let r = d.clone().reshape(&[1, 2]).unwrap();
        assert_eq!(r.sample_dims(), &[1, 2]);
        assert!(d.reshape(&[3]).is_err());
    }
}
