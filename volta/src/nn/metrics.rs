//! Classification metrics: [`accuracy`] of one batch, and a [`ConfusionMatrix`]
//! accumulated over batches with accuracy, per-class precision and recall.
//!
//! Metrics are bookkeeping, not part of the graph: each call reads the logits and
//! the targets back to the host once (two transfers whatever the batch size; on the
//! GPU this waits for the logits to be computed) and records nothing for autograd.
//! The prediction of a row is its argmax; ties go to the lowest class index, and a
//! NaN counts as the largest value (PyTorch's `argmax`).
use std::fmt;

use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::Dim;
use crate::tensor::Tensor;

/// Predicted and true class of every row, read back in one transfer each; panics on
/// a target count that differs from the rows or a target `≥ C`.
#[track_caller]
fn predictions<B: Dim, C: Dim, D: Backend<E>, E: Float>(
    what: &str,
    logits: &Tensor<(B, C), D, E>,
    targets: &Tensor<(B,), D, u32>,
) -> (Vec<usize>, Vec<usize>) {
    let (b, c) = logits.shape();
    let (rows, classes) = (b.size(), c.size());
    assert_eq!(
        targets.dims()[0],
        rows,
        "{what}: {} targets for {rows} rows of logits",
        targets.dims()[0]
    );
    let truth: Vec<usize> = targets
        .to_vec()
        .into_iter()
        .enumerate()
        .map(|(row, t)| {
            let t = t as usize;
            assert!(
                t < classes,
                "{what}: target {t} of row {row} is out of range for {classes} classes"
            );
            t
        })
        .collect();
    if classes == 0 {
        // Only reachable with no rows (a row's target would be out of range).
        return (Vec::new(), truth);
    }
    let values = logits.to_vec();
    let predicted = values
        .chunks_exact(classes)
        .map(|row| argmax(row.iter().map(|v| v.to_f64())))
        .collect();
    (predicted, truth)
}

/// Index of the first maximum; a NaN beats every number (the first NaN wins).
fn argmax(row: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::NEG_INFINITY);
    for (i, v) in row.enumerate() {
        if best.1.is_nan() {
            break;
        }
        if i == 0 || v > best.1 || v.is_nan() {
            best = (i, v);
        }
    }
    best.0
}

/// The fraction of rows whose argmax equals the target, in `[0, 1]` (NaN for an
/// empty batch).
///
/// Shapes: `logits` is `(B, C)` (any dims, static or dynamic), `targets` is `(B,)`
/// with values in `0..C`. Reads both back to the host once.
///
/// # Panics
///
/// If a target is `≥ C`, or (dynamic batch dims) the counts of targets and rows
/// differ.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::metrics::accuracy;
/// let logits = Tensor::<Rank2<3, 2>>::from_array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]);
/// let targets = Tensor::<Rank1<3>, Cpu, u32>::from_array([0, 1, 1]);
/// assert_eq!(accuracy(&logits, &targets), 2.0 / 3.0);
/// ```
#[track_caller]
pub fn accuracy<B: Dim, C: Dim, D: Backend<E>, E: Float>(
    logits: &Tensor<(B, C), D, E>,
    targets: &Tensor<(B,), D, u32>,
) -> f64 {
    let (predicted, truth) = predictions("accuracy", logits, targets);
    let hits = predicted.iter().zip(&truth).filter(|(p, t)| p == t).count();
    hits as f64 / truth.len() as f64
}

/// Counts of (true class, predicted class) pairs over any number of batches, with
/// the accuracy and per-class precision and recall they imply.
///
/// Rows of the matrix are true classes, columns predicted ones (as in
/// scikit-learn). [`Display`](fmt::Display) prints it as a table with recall per
/// row and precision per column.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::metrics::ConfusionMatrix;
/// let mut cm = ConfusionMatrix::new(2);
/// let logits = Tensor::<Rank2<3, 2>>::from_array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]);
/// let targets = Tensor::<Rank1<3>, Cpu, u32>::from_array([0, 1, 1]);
/// cm.update(&logits, &targets);
/// assert_eq!(cm.counts(), vec![vec![1, 0], vec![1, 1]]);
/// assert_eq!(cm.accuracy(), 2.0 / 3.0);
/// assert_eq!(cm.precision(0), Some(0.5));
/// assert_eq!(cm.recall(1), Some(0.5));
/// assert_eq!(
///     cm.to_string(),
///     "\
/// true\\pred     0     1 | recall
///         0     1     0 |  1.000
///         1     1     1 |  0.500
/// precision 0.500 1.000 |
/// accuracy 0.667 over 3 samples"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfusionMatrix {
    classes: usize,
    /// Row-major `classes × classes`: `counts[truth * classes + predicted]`.
    counts: Vec<u64>,
}

impl ConfusionMatrix {
    /// An empty matrix for `classes` classes.
    ///
    /// # Panics
    ///
    /// If `classes` is 0.
    #[track_caller]
    pub fn new(classes: usize) -> Self {
        assert!(classes > 0, "ConfusionMatrix: needs at least one class");
        Self {
            classes,
            counts: vec![0; classes * classes],
        }
    }

    /// The number of classes.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// Adds one batch: the argmax of each row of `logits` against its target.
    /// Reads both tensors back to the host once.
    ///
    /// # Panics
    ///
    /// If `C` is not the matrix's class count, a target is `≥ C`, or (dynamic batch
    /// dims) the counts of targets and rows differ.
    #[track_caller]
    pub fn update<B: Dim, C: Dim, D: Backend<E>, E: Float>(
        &mut self,
        logits: &Tensor<(B, C), D, E>,
        targets: &Tensor<(B,), D, u32>,
    ) {
        let c = logits.shape().1.size();
        assert_eq!(
            c, self.classes,
            "ConfusionMatrix::update: logits have {c} classes, the matrix {}",
            self.classes
        );
        let (predicted, truth) = predictions("ConfusionMatrix::update", logits, targets);
        for (p, t) in predicted.into_iter().zip(truth) {
            self.counts[t * self.classes + p] += 1;
        }
    }

    /// Forgets every count (e.g. at the start of an epoch).
    pub fn reset(&mut self) {
        self.counts.fill(0);
    }

    /// A matrix over `classes` classes holding `cells`, row-major
    /// (`cells[truth * classes + predicted]`): counts summed elsewhere, such as
    /// over the ranks of a data-parallel job.
    ///
    /// # Panics
    /// When `cells` does not hold `classes²` counts.
    pub fn from_counts(classes: usize, cells: &[u64]) -> Self {
        assert_eq!(
            cells.len(),
            classes * classes,
            "ConfusionMatrix::from_counts: {classes} classes need {} cells, got {}",
            classes * classes,
            cells.len()
        );
        let mut m = Self::new(classes);
        m.counts.copy_from_slice(cells);
        m
    }

    /// The counts, `counts()[truth][predicted]`.
    pub fn counts(&self) -> Vec<Vec<u64>> {
        self.counts
            .chunks_exact(self.classes)
            .map(<[u64]>::to_vec)
            .collect()
    }

    /// How many samples of class `truth` were predicted as `predicted`.
    ///
    /// # Panics
    ///
    /// If either class is out of range.
    #[track_caller]
    pub fn count(&self, truth: usize, predicted: usize) -> u64 {
        self.check_class("count", truth);
        self.check_class("count", predicted);
        self.counts[truth * self.classes + predicted]
    }

    /// The number of samples counted so far.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Correct predictions over all samples (NaN before any sample).
    pub fn accuracy(&self) -> f64 {
        let correct: u64 = (0..self.classes).map(|k| self.diagonal(k)).sum();
        correct as f64 / self.total() as f64
    }

    /// Of the samples predicted as `class`, the fraction that are: `TP / (TP + FP)`.
    /// `None` when nothing was predicted as `class`.
    ///
    /// # Panics
    ///
    /// If `class` is out of range.
    #[track_caller]
    pub fn precision(&self, class: usize) -> Option<f64> {
        self.check_class("precision", class);
        let predicted: u64 = (0..self.classes)
            .map(|t| self.counts[t * self.classes + class])
            .sum();
        (predicted > 0).then(|| self.diagonal(class) as f64 / predicted as f64)
    }

    /// Of the samples of `class`, the fraction predicted as `class`:
    /// `TP / (TP + FN)`. `None` when no sample of `class` was seen.
    ///
    /// # Panics
    ///
    /// If `class` is out of range.
    #[track_caller]
    pub fn recall(&self, class: usize) -> Option<f64> {
        self.check_class("recall", class);
        let row = &self.counts[class * self.classes..(class + 1) * self.classes];
        let actual: u64 = row.iter().sum();
        (actual > 0).then(|| self.diagonal(class) as f64 / actual as f64)
    }

    fn diagonal(&self, class: usize) -> u64 {
        self.counts[class * self.classes + class]
    }

    #[track_caller]
    fn check_class(&self, what: &str, class: usize) {
        assert!(
            class < self.classes,
            "ConfusionMatrix::{what}: class {class} is out of range for {} classes",
            self.classes
        );
    }
}

/// A table: one row per true class with its counts and recall, then the precision
/// of each predicted class and the overall accuracy. Undefined ratios print as `-`.
///
/// ```text
/// true\pred     0     1 | recall
///         0     1     0 |  1.000
///         1     1     1 |  0.500
/// precision 0.500 1.000 |
/// accuracy 0.667 over 3 samples
/// ```
impl fmt::Display for ConfusionMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_string(), |r| format!("{r:.3}"));
        // Wide enough for the largest count, a ratio ("0.000") and a class index.
        let widest = self.counts.iter().max().copied().unwrap_or(0);
        let w = [
            widest.to_string().len(),
            5,
            (self.classes - 1).to_string().len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(5);
        let label = "precision".len();
        write!(f, "{:>label$}", "true\\pred")?;
        for k in 0..self.classes {
            write!(f, " {k:>w$}")?;
        }
        writeln!(f, " | recall")?;
        for t in 0..self.classes {
            write!(f, "{t:>label$}")?;
            for p in 0..self.classes {
                write!(f, " {:>w$}", self.counts[t * self.classes + p])?;
            }
            writeln!(f, " | {:>6}", ratio(self.recall(t)))?;
        }
        write!(f, "{:>label$}", "precision")?;
        for k in 0..self.classes {
            write!(f, " {:>w$}", ratio(self.precision(k)))?;
        }
        writeln!(f, " |")?;
        let total = self.total();
        let accuracy = (total > 0).then(|| self.accuracy());
        write!(f, "accuracy {} over {total} samples", ratio(accuracy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Cpu;
    use crate::shape::{Const, Rank1, Rank2};

    #[test]
    fn accuracy_counts_argmax_hits_with_ties_to_the_first_class() {
        let logits = Tensor::<Rank2<4, 3>>::from_array([
            [0.1, 2.0, -1.0],
            [5.0, 5.0, 1.0], // tie: class 0
            [-3.0, -2.0, -1.0],
            [0.0, 0.0, 0.0], // all equal: class 0
        ]);
        let targets = Tensor::<Rank1<4>, Cpu, u32>::from_array([1, 1, 2, 0]);
        assert_eq!(accuracy(&logits, &targets), 0.75);
        let all = Tensor::<Rank1<4>, Cpu, u32>::from_array([1, 0, 2, 0]);
        assert_eq!(accuracy(&logits, &all), 1.0);
    }

    #[test]
    fn argmax_treats_nan_as_the_largest() {
        assert_eq!(argmax([1.0, f64::NAN, 3.0].into_iter()), 1);
        assert_eq!(argmax([f64::NAN, 9.0].into_iter()), 0);
        assert_eq!(argmax([-1.0, 4.0, f64::NAN, f64::NAN].into_iter()), 2);
        assert_eq!(
            argmax([f64::NEG_INFINITY, f64::NEG_INFINITY].into_iter()),
            0
        );
        assert_eq!(argmax([f64::NEG_INFINITY, -1e300].into_iter()), 1);
    }

    #[test]
    fn accuracy_with_a_dynamic_batch_in_f64() {
        let logits = Tensor::<(usize, Const<2>), Cpu, f64>::from_vec_shaped(
            vec![1.0, 0.0, 0.0, 1.0],
            (2, Const),
        )
        .unwrap();
        let targets = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![0, 0], (2,)).unwrap();
        assert_eq!(accuracy(&logits, &targets), 0.5);
        let empty = Tensor::<(usize, Const<2>)>::zeros_shaped((0, Const));
        let none = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![], (0,)).unwrap();
        assert!(accuracy(&empty, &none).is_nan());
    }

    #[test]
    #[should_panic(expected = "accuracy: target 3 of row 1 is out of range for 3 classes")]
    fn accuracy_rejects_an_out_of_range_target() {
        let logits = Tensor::<Rank2<2, 3>>::zeros();
        let targets = Tensor::<Rank1<2>, Cpu, u32>::from_array([0, 3]);
        let _ = accuracy(&logits, &targets);
    }

    #[test]
    #[should_panic(expected = "accuracy: 3 targets for 2 rows of logits")]
    fn accuracy_rejects_a_target_count_that_differs_from_the_rows() {
        let logits = Tensor::<(usize, Const<2>)>::zeros_shaped((2, Const));
        let targets = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![0, 1, 1], (3,)).unwrap();
        let _ = accuracy(&logits, &targets);
    }

    /// Logits whose argmax is `class`, for `classes` classes.
    fn one_hot_rows(predicted: &[usize], classes: usize) -> Vec<f32> {
        predicted
            .iter()
            .flat_map(|&p| (0..classes).map(move |k| if k == p { 1.0 } else { 0.0 }))
            .collect()
    }

    #[test]
    fn confusion_matrix_accumulates_dynamic_batches() {
        let mut cm = ConfusionMatrix::new(3);
        // (truth, predicted) over two batches of different sizes.
        let batches: [&[(u32, usize)]; 2] = [
            &[(0, 0), (0, 1), (1, 1), (2, 1), (2, 2)],
            &[(0, 0), (1, 1), (2, 0)],
        ];
        for batch in batches {
            let n = batch.len();
            let predicted: Vec<usize> = batch.iter().map(|b| b.1).collect();
            let logits = Tensor::<(usize, Const<3>)>::from_vec_shaped(
                one_hot_rows(&predicted, 3),
                (n, Const),
            )
            .unwrap();
            let targets = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(
                batch.iter().map(|b| b.0).collect(),
                (n,),
            )
            .unwrap();
            cm.update(&logits, &targets);
        }
        assert_eq!(
            cm.counts(),
            vec![vec![2, 1, 0], vec![0, 2, 0], vec![1, 1, 1]]
        );
        assert_eq!(cm.total(), 8);
        assert_eq!(cm.count(2, 0), 1);
        assert_eq!(cm.accuracy(), 5.0 / 8.0);
        assert_eq!(cm.precision(0), Some(2.0 / 3.0));
        assert_eq!(cm.precision(1), Some(2.0 / 4.0));
        assert_eq!(cm.precision(2), Some(1.0));
        assert_eq!(cm.recall(0), Some(2.0 / 3.0));
        assert_eq!(cm.recall(1), Some(1.0));
        assert_eq!(cm.recall(2), Some(1.0 / 3.0));

        let table = cm.to_string();
        let expected = "\
true\\pred     0     1     2 | recall
        0     2     1     0 |  0.667
        1     0     2     0 |  1.000
        2     1     1     1 |  0.333
precision 0.667 0.500 1.000 |
accuracy 0.625 over 8 samples";
        assert_eq!(table, expected, "\n{table}");

        cm.reset();
        assert_eq!(cm.total(), 0);
        assert!(cm.accuracy().is_nan());
    }

    #[test]
    fn confusion_matrix_undefined_ratios_are_none_and_print_as_dashes() {
        let mut cm = ConfusionMatrix::new(2);
        let logits = Tensor::<Rank2<2, 2>>::from_array([[1.0, 0.0], [2.0, 1.0]]);
        let targets = Tensor::<Rank1<2>, Cpu, u32>::from_array([0, 0]);
        cm.update(&logits, &targets);
        assert_eq!(cm.precision(1), None); // never predicted
        assert_eq!(cm.recall(1), None); // never seen
        assert_eq!(cm.precision(0), Some(1.0));
        let table = cm.to_string();
        assert!(
            table.contains("        1     0     0 |      -"),
            "\n{table}"
        );
        assert!(table.contains("precision 1.000     - |"), "\n{table}");
    }

    #[test]
    #[should_panic(
        expected = "ConfusionMatrix::update: target 2 of row 0 is out of range for 2 classes"
    )]
    fn confusion_matrix_rejects_an_out_of_range_target() {
        let mut cm = ConfusionMatrix::new(2);
        let logits = Tensor::<Rank2<1, 2>>::zeros();
        let targets = Tensor::<Rank1<1>, Cpu, u32>::from_array([2]);
        cm.update(&logits, &targets);
    }

    #[test]
    #[should_panic(expected = "ConfusionMatrix::update: logits have 3 classes, the matrix 2")]
    fn confusion_matrix_rejects_another_class_count() {
        let mut cm = ConfusionMatrix::new(2);
        let logits = Tensor::<Rank2<1, 3>>::zeros();
        let targets = Tensor::<Rank1<1>, Cpu, u32>::from_array([0]);
        cm.update(&logits, &targets);
    }

    #[test]
    #[should_panic(expected = "ConfusionMatrix::precision: class 5 is out of range for 2 classes")]
    fn confusion_matrix_rejects_an_out_of_range_class_query() {
        let _ = ConfusionMatrix::new(2).precision(5);
    }
}
