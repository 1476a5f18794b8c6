//! [`DataLoader`]: typed batches from a [`Dataset`], shuffled per epoch from a seed,
//! collated and uploaded on a prefetch thread while the training step runs.
use super::dataset::Dataset;
use super::error::DataError;
use crate::backend::cpu::Cpu;
use crate::backend::{Device, Memory};
use crate::random::Rng;
use crate::shape::{Dim, PrependDim, Shape};
use crate::tensor::Tensor;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// How a loader cuts an epoch into batches, as a type: it fixes the batch dim of
/// the [`Batch`]es it yields.
pub mod batching {
    use crate::shape::{Const, Dim};

    /// A batching kind (one of [`Dynamic`], [`UpTo`], [`Exact`]).
    pub trait Batching: Send + Sync + 'static {
        /// The batch dim of the tensors a loader yields.
        type Dim: Dim;
    }

    /// Batches of a run-time size ([`batch_size`](super::DataLoader::batch_size)): a
    /// `usize` batch dim; the last batch may be partial unless dropped.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Dynamic;

    /// Batches of `N` ([`batch`](super::DataLoader::batch)) whose last one may be
    /// partial, so the batch dim is a `usize`; `drop_last()` makes it [`Exact`].
    #[derive(Clone, Copy, Debug, Default)]
    pub struct UpTo<const N: usize>;

    /// Batches of exactly `N` (`batch::<N>().drop_last()`): a `Const<N>` batch dim.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct Exact<const N: usize>;

    impl Batching for Dynamic {
        type Dim = usize;
    }
    impl<const N: usize> Batching for UpTo<N> {
        type Dim = usize;
    }
    impl<const N: usize> Batching for Exact<N> {
        type Dim = Const<N>;
    }
}

use batching::{Batching, Dynamic, Exact, UpTo};

/// The batch dims of samples of shape `F` in batches of dim `B`.
type Inputs<F, B> = <F as PrependDim<B>>::Output;

/// One batch: `inputs` of shape `(B, …F)` and their class labels, on device `D`.
///
/// `B` is `Const<N>` for a loader built with `batch::<N>().drop_last()`, `usize`
/// otherwise.
pub struct Batch<F: PrependDim<B>, B: Dim, D: Device + Memory<f32> = Cpu> {
    /// The samples' features, stacked along a new first axis.
    pub inputs: Tensor<Inputs<F, B>, D>,
    /// The samples' labels.
    pub targets: Tensor<(B,), D, u32>,
    /// The dataset indices of the samples, in batch order.
    pub indices: Vec<usize>,
}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> Clone for Batch<F, B, D> {
    fn clone(&self) -> Self {
        Batch {
            inputs: self.inputs.clone(),
            targets: self.targets.clone(),
            indices: self.indices.clone(),
        }
    }
}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> Batch<F, B, D> {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether the batch holds no samples (never, for batches a loader yields).
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

/// Batches a [`Dataset`] into typed tensors on device `D`: `F` is the per-sample
/// shape, `K` the [batching](batching) kind (it fixes the batch dim).
///
/// Built from [`DataLoader::new`] (batches of 1, in order, flat `(usize,)` samples,
/// on the CPU, prefetch depth 2) and the builder methods:
///
/// - [`features::<F>()`](Self::features): the sample shape as a type, checked
///   against the dataset's sample dims;
/// - [`batch::<N>()`](Self::batch) then `drop_last()`:
///   every batch has exactly `N` samples, a `Const<N>` batch dim;
///   [`batch::<N>()`](Self::batch) alone or [`batch_size(n)`](Self::batch_size):
///   a `usize` batch dim, the last batch may be partial;
/// - [`shuffle(seed)`](Self::shuffle): epoch `e` visits the samples in an order
///   that depends only on `(seed, e)`;
/// - [`prefetch(depth)`](Self::prefetch): how many batches a background thread
///   prepares (collated and uploaded to `D`) ahead of the training step; 0 works
///   on the calling thread;
/// - [`device::<D>()`](Self::device): where batches are uploaded.
///
/// ```
/// use volta::data::{DataLoader, Labelled};
/// use volta::prelude::*;
///
/// // 100 samples of 1×8×8 features, labels 0..10.
/// let data = Labelled::new(vec![0.5; 100 * 64], &[1, 8, 8], (0..100).map(|i| i % 10).collect(), 10)?;
///
/// // Full batches only: the batch dim is in the type.
/// let loader = DataLoader::new(data.clone())
///     .features::<Rank3<1, 8, 8>>()?
///     .batch::<32>()
///     .drop_last()
///     .shuffle(7);
/// assert_eq!(loader.len(), 3); // 96 samples, the last 4 dropped
/// for batch in loader.epoch(0) {
///     let x: &Tensor<Rank4<32, 1, 8, 8>> = &batch.inputs;
///     let y: &Tensor<Rank1<32>, Cpu, u32> = &batch.targets;
///     # let _ = (x, y);
/// }
///
/// // Every sample: a run-time batch dim, the last batch holds 4.
/// let loader = DataLoader::new(data)
///     .features::<Rank3<1, 8, 8>>()?
///     .batch_size(32);
/// let sizes: Vec<usize> = loader
///     .epoch(0)
///     .map(|b| {
///         let x: Tensor<(usize, Const<1>, Const<8>, Const<8>)> = b.inputs;
///         x.dims()[0]
///     })
///     .collect();
/// assert_eq!(sizes, [32, 32, 32, 4]);
/// # Ok::<(), volta::data::DataError>(())
/// ```
///
/// **Devices and errors.** Uploads cannot fail when they are recorded: on the GPU an
/// upload is recorded in the current command batch, and a device error (out of
/// memory, device lost) is reported at the next sync point (a read-back or
/// [`Gpu::sync`](crate::Gpu::sync)), as for every other op. Recording from the
/// prefetch thread is safe: the GPU context's recorder and buffer pool are locked,
/// and an upload is recorded before its batch is handed over, so the kernels that
/// read it are recorded after it.
///
/// **Panics.** A dataset whose `get` panics, or returns a sample of another size
/// than its `sample_dims`, panics the prefetch thread, as does a GPU context that
/// cannot be created (as for any `Gpu` op; call [`Gpu::init`](crate::Gpu::init)
/// first to handle that error); the panic resumes on the thread that iterates the
/// epoch.
pub struct DataLoader<F: Shape = (usize,), K: Batching = Dynamic, D: Device + Memory<f32> = Cpu> {
    dataset: Arc<dyn Dataset>,
    /// The run-time value of the sample shape.
    sample: F,
    batch_size: usize,
    drop_last: bool,
    seed: Option<u64>,
    prefetch: usize,
    /// This process's share of each epoch: `(rank, world size)`.
    shard: (usize, usize),
    _kind: PhantomData<fn() -> (K, D)>,
}

impl<F: Shape, K: Batching, D: Device + Memory<f32>> Clone for DataLoader<F, K, D> {
    fn clone(&self) -> Self {
        DataLoader {
            dataset: self.dataset.clone(),
            ..*self
        }
    }
}

impl<F: Shape, K: Batching, D: Device + Memory<f32>> std::fmt::Debug for DataLoader<F, K, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataLoader")
            .field("samples", &self.dataset.len())
            .field("sample", &self.sample)
            .field("batch_size", &self.batch_size)
            .field("drop_last", &self.drop_last)
            .field("seed", &self.seed)
            .field("prefetch", &self.prefetch)
            .field("shard", &self.shard)
            .field("device", &D::NAME)
            .finish()
    }
}

/// Default number of batches prepared ahead.
pub const DEFAULT_PREFETCH: usize = 2;

impl DataLoader {
    /// A loader over `dataset`: batches of one sample, in order, of flat
    /// `(usize,)` samples (the product of the dataset's sample dims), on the CPU,
    /// prefetching [`DEFAULT_PREFETCH`] batches. Pass an `Arc` to keep using the
    /// dataset elsewhere.
    pub fn new(dataset: impl Dataset + 'static) -> Self {
        let numel = dataset.sample_dims().iter().product();
        DataLoader {
            dataset: Arc::new(dataset),
            sample: (numel,),
            batch_size: 1,
            drop_last: false,
            seed: None,
            prefetch: DEFAULT_PREFETCH,
            shard: (0, 1),
            _kind: PhantomData,
        }
    }
}

impl<F: Shape, K: Batching, D: Device + Memory<f32>> DataLoader<F, K, D> {
    fn with<F2: Shape, K2: Batching, D2: Device + Memory<f32>>(
        self,
        sample: F2,
    ) -> DataLoader<F2, K2, D2> {
        DataLoader {
            dataset: self.dataset,
            sample,
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            seed: self.seed,
            prefetch: self.prefetch,
            shard: self.shard,
            _kind: PhantomData,
        }
    }

    /// Names the per-sample shape `F2`, e.g. `Rank3<1, 8, 8>` or
    /// `(Const<3>, usize, usize)`. It must fit the dataset's sample dims (static
    /// dims equal, run-time dims take the dataset's sizes), or be one flat axis of
    /// the same element count (`Rank1<64>` for 1×8×8 samples); otherwise
    /// [`DataError::FeatureShape`].
    pub fn features<F2: Shape>(self) -> Result<DataLoader<F2, K, D>, DataError> {
        let dims = self.dataset.sample_dims();
        let numel: usize = dims.iter().product();
        let sample = F2::from_dims(dims)
            .or_else(|_| {
                if F2::RANK == 1 {
                    F2::from_dims(&[numel])
                } else {
                    Err(crate::shape::ShapeError::DataLength {
                        expected: 0,
                        found: 0,
                    })
                }
            })
            .map_err(|_| DataError::FeatureShape {
                expected: describe::<F2>(),
                found: dims.to_vec(),
            })?;
        Ok(self.with(sample))
    }

    /// Batches of `n` samples with a run-time (`usize`) batch dim; the last batch
    /// holds the rest unless `drop_last()`
    /// is called. Panics when `n == 0`.
    pub fn batch_size(self, n: usize) -> DataLoader<F, Dynamic, D> {
        assert!(
            n > 0,
            "DataLoader::batch_size: the batch size must not be 0"
        );
        let sample = self.sample;
        let mut out = self.with(sample);
        out.batch_size = n;
        out.drop_last = false;
        out
    }

    /// Batches of `N` samples. The last batch may be partial, so the batch dim is
    /// `usize` until `drop_last()` makes it
    /// `Const<N>`. `N == 0` is a compile error.
    pub fn batch<const N: usize>(self) -> DataLoader<F, UpTo<N>, D> {
        const { assert!(N > 0, "DataLoader::batch: the batch size must not be 0") };
        let sample = self.sample;
        let mut out = self.with(sample);
        out.batch_size = N;
        out.drop_last = false;
        out
    }

    /// Shuffles the samples every epoch: epoch `e`'s order is a permutation that
    /// depends only on `(seed, e)`. Without it, every epoch is in dataset order.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Takes rank `rank`'s share of every epoch out of `world` processes
    /// (data-parallel training, as PyTorch's `DistributedSampler`): the epoch's
    /// order (shuffled from the seed, the same on every rank) is dealt out in turn,
    /// so rank `r` gets positions `r, r + world, r + 2·world, …`. The shares are
    /// disjoint, and step `i` of the `world` ranks covers what step `i` of one
    /// process with `world` times the batch would. With
    /// [`drop_last`](DataLoader::drop_last) every rank gets `len / world` samples
    /// (the last `len mod world` of each epoch's order sit out that epoch) and so
    /// takes as many steps as the others, which a collective per step needs;
    /// without it, every sample is visited once per epoch and the first
    /// `len mod world` ranks get one sample more.
    ///
    /// # Panics
    /// When `world` is 0 or `rank` is not below it.
    pub fn shard(mut self, rank: usize, world: usize) -> Self {
        assert!(
            world > 0 && rank < world,
            "DataLoader::shard: rank {rank} is not one of the {world} ranks"
        );
        self.shard = (rank, world);
        self
    }

    /// How many batches the background thread prepares ahead (collated and
    /// uploaded to the device) while the caller works on the current one; the
    /// default is [`DEFAULT_PREFETCH`]. `0` prepares each batch on the calling
    /// thread when it is asked for, with no thread.
    pub fn prefetch(mut self, depth: usize) -> Self {
        self.prefetch = depth;
        self
    }

    /// Uploads batches to device `D2` (`Cpu` or `Gpu`).
    pub fn device<D2: Device + Memory<f32>>(self) -> DataLoader<F, K, D2> {
        let sample = self.sample;
        self.with(sample)
    }

    /// The dataset.
    pub fn dataset(&self) -> &Arc<dyn Dataset> {
        &self.dataset
    }

    /// The run-time value of the sample shape.
    pub fn sample_shape(&self) -> F {
        self.sample
    }

    /// Samples per (full) batch.
    pub fn batch_len(&self) -> usize {
        self.batch_size
    }

    /// Number of batches per epoch (of this rank's [`shard`](Self::shard)).
    pub fn len(&self) -> usize {
        let n = self.shard_len();
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Whether an epoch yields no batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Samples per epoch in this rank's share.
    fn shard_len(&self) -> usize {
        let (rank, world) = self.shard;
        let n = self.dataset.len();
        if self.drop_last {
            n / world
        } else {
            n / world + usize::from(rank < n % world)
        }
    }

    /// The order in which epoch `epoch` visits the dataset (before cutting it into
    /// batches): `0..len` without [`shuffle`](Self::shuffle), else a permutation
    /// that depends only on the seed and `epoch`; of a [`shard`](Self::shard),
    /// this rank's share of that order.
    pub fn sample_order(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.dataset.len()).collect();
        if let Some(seed) = self.seed {
            Rng::seed(epoch_seed(seed, epoch)).shuffle(&mut order);
        }
        let (rank, world) = self.shard;
        if world > 1 {
            order = order
                .into_iter()
                .skip(rank)
                .step_by(world)
                .take(self.shard_len())
                .collect();
        }
        order
    }

    /// The batches of epoch `epoch`, in order. With a prefetch depth above 0, a
    /// thread collates and uploads up to that many batches ahead; dropping the
    /// iterator early stops and joins it. In the browser (wasm32, no threads)
    /// batches are collated as they are asked for.
    pub fn epoch(&self, epoch: u64) -> Epoch<F, K::Dim, D>
    where
        F: PrependDim<K::Dim>,
    {
        let collate = Collate {
            dataset: self.dataset.clone(),
            sample: self.sample,
            numel: self.sample.numel(),
            order: self.sample_order(epoch),
            batch_size: self.batch_size,
            _out: PhantomData,
        };
        let batches = self.len();
        if self.prefetch == 0 || batches == 0 || cfg!(target_arch = "wasm32") {
            return Epoch {
                remaining: batches,
                source: Source::Inline { collate, next: 0 },
            };
        }
        let (tx, rx) = mpsc::sync_channel(self.prefetch);
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let handle = std::thread::Builder::new()
            .name("volta-loader".into())
            .spawn(move || {
                for i in 0..batches {
                    if halt.load(Ordering::Relaxed) {
                        break;
                    }
                    // A dropped receiver (the epoch iterator went away) ends the thread.
                    if tx.send(collate.batch(i)).is_err() {
                        break;
                    }
                }
            })
            .expect("DataLoader: the OS could not start the prefetch thread");
        Epoch {
            remaining: batches,
            source: Source::Thread {
                rx: Some(rx),
                stop,
                handle: Some(handle),
            },
        }
    }
}

impl<F: Shape, D: Device + Memory<f32>> DataLoader<F, Dynamic, D> {
    /// Drops the last batch when it is partial, so every batch holds
    /// [`batch_len`](Self::batch_len) samples (the batch dim stays `usize`).
    pub fn drop_last(mut self) -> Self {
        self.drop_last = true;
        self
    }
}

impl<F: Shape, D: Device + Memory<f32>, const N: usize> DataLoader<F, UpTo<N>, D> {
    /// Drops the last batch when it is partial: every batch then holds exactly `N`
    /// samples, and the batch dim is `Const<N>`.
    pub fn drop_last(self) -> DataLoader<F, Exact<N>, D> {
        let sample = self.sample;
        let mut out = self.with(sample);
        out.drop_last = true;
        out
    }
}

/// `[1, ?, 8]`: a shape type's static dims, `?` for run-time ones.
fn describe<S: Shape>() -> String {
    let parts: Vec<String> = S::STATIC_DIMS
        .iter()
        .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The seed of an epoch's shuffle: SplitMix64's finaliser over the seed and the
/// epoch, so neighbouring epochs get unrelated generators.
fn epoch_seed(seed: u64, epoch: u64) -> u64 {
    let mut z = seed ^ epoch.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Builds batch `i` of an epoch.
struct Collate<F, B, D> {
    dataset: Arc<dyn Dataset>,
    sample: F,
    numel: usize,
    order: Vec<usize>,
    batch_size: usize,
    _out: PhantomData<fn() -> (B, D)>,
}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> Collate<F, B, D> {
    fn batch(&self, i: usize) -> Batch<F, B, D> {
        let start = i * self.batch_size;
        let end = (start + self.batch_size).min(self.order.len());
        let indices = self.order[start..end].to_vec();
        let n = indices.len();
        let mut features = Vec::with_capacity(n * self.numel);
        let mut labels = Vec::with_capacity(n);
        for &index in &indices {
            let s = self.dataset.get(index);
            assert_eq!(
                s.features.len(),
                self.numel,
                "DataLoader: dataset sample {index} has {} features, its sample dims {:?} \
                 say {}",
                s.features.len(),
                self.dataset.sample_dims(),
                self.numel
            );
            features.extend_from_slice(&s.features);
            labels.push(s.label);
        }
        let b = B::from_size(n).expect("a partial batch only when the batch dim is dynamic");
        let inputs = Tensor::from_vec_shaped(features, self.sample.prepend(b))
            .expect("n samples of the sample shape");
        let targets = Tensor::from_vec_shaped(labels, (b,)).expect("n labels");
        Batch {
            inputs,
            targets,
            indices,
        }
    }
}

enum Source<F, B, D: Device + Memory<f32>>
where
    F: PrependDim<B>,
    B: Dim,
{
    /// No prefetch: each batch is built when asked for.
    Inline {
        collate: Collate<F, B, D>,
        next: usize,
    },
    /// A prefetch thread sends batches through a bounded channel.
    Thread {
        rx: Option<mpsc::Receiver<Batch<F, B, D>>>,
        stop: Arc<AtomicBool>,
        handle: Option<JoinHandle<()>>,
    },
}

/// The batches of one epoch, from [`DataLoader::epoch`]. Dropping it early stops
/// the prefetch thread and waits for it (at most the batch it is building).
pub struct Epoch<F: PrependDim<B>, B: Dim, D: Device + Memory<f32> = Cpu> {
    remaining: usize,
    source: Source<F, B, D>,
}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> Iterator for Epoch<F, B, D> {
    type Item = Batch<F, B, D>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let batch = match &mut self.source {
            Source::Inline { collate, next } => {
                *next += 1;
                collate.batch(*next - 1)
            }
            Source::Thread { rx, handle, .. } => {
                match rx.as_ref().expect("present until drop").recv() {
                    Ok(batch) => batch,
                    Err(mpsc::RecvError) => {
                        // The thread ended before the epoch did: it panicked.
                        self.remaining = 0;
                        if let Some(Err(panic)) = handle.take().map(JoinHandle::join) {
                            std::panic::resume_unwind(panic);
                        }
                        unreachable!("the prefetch thread ended early without panicking");
                    }
                }
            }
        };
        self.remaining -= 1;
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> ExactSizeIterator for Epoch<F, B, D> {}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> Epoch<F, B, D> {
    /// Whether a prefetch thread of this epoch is still running (`false` once it
    /// has built every batch or been stopped, and without prefetch).
    pub fn prefetching(&self) -> bool {
        match &self.source {
            Source::Inline { .. } => false,
            Source::Thread { handle, .. } => handle.as_ref().is_some_and(|h| !h.is_finished()),
        }
    }
}

impl<F: PrependDim<B>, B: Dim, D: Device + Memory<f32>> Drop for Epoch<F, B, D> {
    fn drop(&mut self) {
        if let Source::Thread { rx, stop, handle } = &mut self.source {
            stop.store(true, Ordering::Relaxed);
            // Unblocks a thread waiting to send; it stops before building another batch.
            drop(rx.take());
            if let Some(h) = handle.take() {
                // A panic there was not asked for (the epoch was dropped): ignore it.
                let _ = h.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Labelled;
    use crate::shape::{Const, Rank1, Rank2};

    /// `n` samples `[i, -i]`, label `i % 5`.
    fn data(n: usize) -> Labelled {
        let features = (0..n).flat_map(|i| [i as f32, -(i as f32)]).collect();
        Labelled::new(features, &[2], (0..n as u32).map(|i| i % 5).collect(), 5).unwrap()
    }

    #[test]
    fn feature_shapes_are_checked() {
        let l = DataLoader::new(data(4).reshape(&[1, 2]).unwrap());
        assert!(l.clone().features::<Rank2<1, 2>>().is_ok());
        assert!(l.clone().features::<(Const<1>, usize)>().is_ok());
        // Flattened.
        assert!(l.clone().features::<Rank1<2>>().is_ok());
        let e = l.features::<Rank2<2, 1>>().unwrap_err();
        assert!(matches!(e, DataError::FeatureShape { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "the loader's sample shape [2, 1] does not fit the dataset's samples [1, 2] \
             (give the same dims, or one flat dim of the same size)"
        );
    }

    #[test]
    fn epoch_seeds_differ() {
        let seeds: std::collections::HashSet<u64> = (0..1000).map(|e| epoch_seed(5, e)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_ne!(epoch_seed(5, 0), epoch_seed(6, 0));
    }

    #[test]
    fn inline_and_prefetched_batches_agree() {
        let l = DataLoader::new(data(23))
            .features::<Rank1<2>>()
            .unwrap()
            .batch::<5>()
            .shuffle(3);
        let a: Vec<(Vec<f32>, Vec<u32>)> = l
            .epoch(1)
            .map(|b| (b.inputs.to_vec(), b.targets.to_vec()))
            .collect();
        let b: Vec<(Vec<f32>, Vec<u32>)> = l
            .clone()
            .prefetch(0)
            .epoch(1)
            .map(|b| (b.inputs.to_vec(), b.targets.to_vec()))
            .collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 5);
        assert_eq!(a[4].1.len(), 3);
    }

    /// Shards are disjoint and seeded, and step `i` of two ranks at batch `b`
    /// covers step `i` of one process at batch `2b`.
    #[test]
    fn shards_split_each_global_batch() {
        let one = DataLoader::new(data(23))
            .features::<Rank1<2>>()
            .unwrap()
            .batch::<6>()
            .drop_last()
            .shuffle(9);
        let half = || {
            DataLoader::new(data(23))
                .features::<Rank1<2>>()
                .unwrap()
                .batch::<3>()
                .drop_last()
                .shuffle(9)
        };
        let (r0, r1) = (half().shard(0, 2), half().shard(1, 2));
        assert_eq!((one.len(), r0.len(), r1.len()), (3, 3, 3));
        let global = one.sample_order(4);
        let (a, b) = (r0.sample_order(4), r1.sample_order(4));
        assert_eq!(a.len(), 11);
        assert!(a.iter().all(|i| !b.contains(i)), "shards overlap");
        for step in 0..3 {
            let mut both: Vec<usize> = a[3 * step..3 * step + 3].to_vec();
            both.extend_from_slice(&b[3 * step..3 * step + 3]);
            both.sort_unstable();
            let mut want = global[6 * step..6 * step + 6].to_vec();
            want.sort_unstable();
            assert_eq!(both, want, "step {step}");
        }
        // Without drop_last every sample is visited once per epoch.
        let all = |rank| {
            DataLoader::new(data(23))
                .batch_size(4)
                .shuffle(9)
                .shard(rank, 3)
                .sample_order(2)
        };
        let mut seen: Vec<usize> = (0..3).flat_map(all).collect();
        assert_eq!((all(0).len(), all(2).len()), (8, 7));
        seen.sort_unstable();
        assert_eq!(seen, (0..23).collect::<Vec<_>>());
    }
}
