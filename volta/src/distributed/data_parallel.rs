//! [`DataParallel`]: one model replica per rank, gradients averaged in buckets
//! while the backward pass is still running.
use super::group::sum_into;
use super::{DistributedError, Pending, ProcessGroup};
use crate::autograd::{Gradients, no_grad};
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Entry, Module, Param, Visitor};
use crate::shape::Scalar;
use crate::tensor::{RawTensor, Tensor, TensorId};
use mpi::datatype::Equivalence;
use mpi::traits::{Communicator, CommunicatorCollectives};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// The default bucket size. Gradients travel through host memory, so each
/// bucket's all-reduce takes a while; small buckets keep the last one, which
/// cannot overlap the backward pass, short. On two H100s (2026-11-27) the GPT
/// step's 43 MB of gradients scaled 1.39× in PyTorch's 25 MB buckets, 1.83× in
/// 5 MB and 1.86× in 2 MB. At 2 MiB, a bucket's bandwidth time is still far above
/// a collective's latency (tens of µs over TCP).
pub const DEFAULT_BUCKET_BYTES: usize = 2 << 20;

/// Data-parallel training of a [`Module`], as PyTorch's
/// `DistributedDataParallel`: every rank holds the same model, runs the forward
/// and backward pass on its own share of the batch, and
/// [`backward`](Self::backward) returns the gradients averaged over all ranks,
/// so that every rank's optimiser takes the same step.
///
/// - [`new`](Self::new) checks that the ranks hold the same model (names, kinds
///   and dims of every parameter and buffer; a typed error names the first that
///   differs) and copies rank 0's values to every rank.
/// - The gradients travel in buckets of about
///   [`DEFAULT_BUCKET_BYTES`], filled from the layers nearest the loss. As soon as
///   the backward pass has finished a bucket's gradients, its copy to the host is
///   recorded and the MPI thread takes over (waiting for the copy, then the
///   all-reduce), while the pass goes on to earlier layers.
/// - Buffers (batch norm's running statistics) are broadcast from rank 0 after
///   each backward pass, as DDP does before each forward.
/// - Each rank's gradient is the mean over its own batch; the average over ranks
///   is then the mean over the whole batch, so `N` ranks at batch `b` train as one
///   process at batch `N·b` (see [`DataLoader::shard`](crate::data::DataLoader::shard)).
///
/// It dereferences to the model, and is a [`Module`] with the model's entry names,
/// so forward passes, optimisers and checkpoints use it as the model.
///
/// ```no_run
/// # use volta::prelude::*;
/// # use volta::distributed::DataParallel;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let group = volta::distributed::init()?;
/// let model = Linear::<4, 2>::new(&mut Rng::seed(0));
/// let mut model = DataParallel::new(&group, model)?;
/// let mut opt = Sgd::new(0.1);
/// let x = Tensor::<Rank2<8, 4>>::ones();
/// let loss = model.forward(&x).square().mean_all();
/// let grads = model.backward(loss)?; // averaged over the ranks
/// opt.step(&mut model, &grads);
/// # Ok(()) }
/// ```
pub struct DataParallel<M, D: Backend<E>, E: Float = f32> {
    model: M,
    group: ProcessGroup,
    bucket_bytes: usize,
    overlap: bool,
    profile: StepProfile,
    /// Each bucket's host buffers (its gradients as read back, and their
    /// average), kept from step to step: fresh pages cost more than the copy.
    host: Vec<(Vec<E>, Vec<E>)>,
    _device: PhantomData<fn() -> (D, E)>,
}

/// Where the time of the last [`DataParallel::backward`] went.
#[derive(Debug, Clone, Default)]
pub struct StepProfile {
    /// Recording (CPU) or computing (CPU device) the backward pass.
    pub backward: Duration,
    /// Waiting for the buckets after the backward pass: the communication the
    /// pass did not hide.
    pub wait: Duration,
    /// Each bucket, in the order it was reduced.
    pub buckets: Vec<BucketTiming>,
}

/// One bucket of a [`StepProfile`].
#[derive(Debug, Clone, Default)]
pub struct BucketTiming {
    /// Gradient elements in the bucket.
    pub elements: usize,
    /// When it was handed to the MPI thread, from the start of the step.
    pub started: Duration,
    /// Its read-back from the device (waiting for its gradients included).
    pub read: Duration,
    /// Its all-reduce.
    pub reduce: Duration,
}

/// One trainable parameter as the buckets see it.
#[derive(Clone)]
struct Slot {
    dims: Vec<usize>,
    numel: usize,
}

impl<M: Module<D, E>, D: Backend<E>, E: Float + Equivalence> DataParallel<M, D, E> {
    /// Wraps `model` for training on every rank of `group`: checks that every rank
    /// built the same model and gives each rank rank 0's values.
    pub fn new(group: &ProcessGroup, mut model: M) -> Result<Self, DistributedError> {
        check_same_model(group, &mut model)?;
        broadcast_state(group, &mut model)?;
        Ok(DataParallel {
            model,
            group: group.clone(),
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            overlap: true,
            profile: StepProfile::default(),
            host: Vec::new(),
            _device: PhantomData,
        })
    }

    /// Sets the bucket size in bytes (at least one parameter per bucket).
    pub fn bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes.max(1);
        self
    }

    /// With `false`, every bucket waits for the end of the backward pass before
    /// its all-reduce starts: the baseline that measures what overlap saves.
    pub fn overlap(mut self, overlap: bool) -> Self {
        self.overlap = overlap;
        self
    }

    /// The process group.
    pub fn group(&self) -> &ProcessGroup {
        &self.group
    }

    /// The model.
    pub fn module(&self) -> &M {
        &self.model
    }

    /// The model, mutably.
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.model
    }

    /// The model, unwrapped.
    pub fn into_inner(self) -> M {
        self.model
    }

    /// Where the time of the last [`backward`](Self::backward) went.
    pub fn profile(&self) -> &StepProfile {
        &self.profile
    }

    /// The backward pass of `loss` (this rank's mean over its batch), with the
    /// gradients of the model's parameters averaged over all ranks; every rank
    /// gets the same bits. Parameters no rank's loss depended on get no gradient.
    pub fn backward<S: Scalar>(
        &mut self,
        loss: Tensor<S, D, E>,
    ) -> Result<Gradients<D, E>, DistributedError> {
        self.backward_raw(loss.into_raw())
    }

    /// [`backward`](Self::backward) of a run-time-shaped one-element loss.
    pub fn backward_raw(
        &mut self,
        loss: RawTensor<D, E>,
    ) -> Result<Gradients<D, E>, DistributedError> {
        let start = Instant::now();
        if self.group.world_size() == 1 {
            let grads = loss.backward();
            self.profile = StepProfile {
                backward: start.elapsed(),
                ..StepProfile::default()
            };
            return Ok(grads);
        }
        let (ids, slots) = params(&mut self.model);
        let buckets = plan_buckets(&slots, self.bucket_bytes / size_of::<E>());
        let position: HashMap<TensorId, (usize, usize)> = buckets
            .iter()
            .enumerate()
            .flat_map(|(b, members)| members.iter().enumerate().map(move |(k, &p)| (p, (b, k))))
            .map(|(p, at)| (ids[p], at))
            .collect();
        let mut filling: Vec<Vec<Option<RawTensor<D, E>>>> =
            buckets.iter().map(|m| vec![None; m.len()]).collect();
        let mut missing: Vec<usize> = buckets.iter().map(Vec::len).collect();
        let mut launched: Vec<Launched<E>> = Vec::with_capacity(buckets.len());
        let mut failure = None;
        let overlap = self.overlap;
        let mut host = std::mem::take(&mut self.host);
        host.resize_with(buckets.len(), Default::default);

        let launch = |b: usize,
                      grads: Vec<Option<RawTensor<D, E>>>,
                      launched: &mut Vec<Launched<E>>,
                      out: (Vec<E>, Vec<E>)|
         -> Result<(), DistributedError> {
            let pending = self.launch(b, &buckets[b], &slots, grads, out, start)?;
            launched.push(pending);
            Ok(())
        };

        let grads = {
            let mut on_leaf = |id: TensorId, g: &RawTensor<D, E>| {
                let Some(&(b, k)) = position.get(&id) else {
                    return;
                };
                filling[b][k] = Some(g.clone());
                missing[b] -= 1;
                // Buckets start in order on every rank, whatever order the
                // gradients finish in: the ranks' collectives must line up.
                while overlap && failure.is_none() && launched.len() < buckets.len() {
                    let next = launched.len();
                    if missing[next] > 0 {
                        break;
                    }
                    let grads = std::mem::take(&mut filling[next]);
                    let out = std::mem::take(&mut host[next]);
                    if let Err(e) = launch(next, grads, &mut launched, out) {
                        failure = Some(e);
                    }
                }
            };
            loss.backward_with(&mut on_leaf)
        };
        if let Some(e) = failure {
            return Err(e);
        }
        // Buckets with a parameter the loss did not reach, or all of them when
        // overlap is off: their missing gradients go as zeros.
        while launched.len() < buckets.len() {
            let next = launched.len();
            let grads = std::mem::take(&mut filling[next]);
            let out = std::mem::take(&mut host[next]);
            launch(next, grads, &mut launched, out)?;
        }
        let backward = start.elapsed();
        let buffers = self.start_buffer_broadcast()?;

        let mut averaged = Gradients::new();
        let mut timings = Vec::with_capacity(launched.len());
        let _no_grad = no_grad();
        for (b, job) in launched.into_iter().enumerate() {
            let (read, mean, present, timing) = job.pending.wait()??;
            let members = &buckets[b];
            let total: usize = members.iter().map(|&p| slots[p].numel).sum();
            // One upload per bucket; each gradient is a view of it.
            let device = RawTensor::<D, E>::from_slice(&mean[..total], &[total]);
            host[b] = (read, mean);
            let mut offset = 0;
            for (k, &p) in members.iter().enumerate() {
                let n = slots[p].numel;
                // Some rank had a gradient for it.
                if present[k] > E::ZERO {
                    let g = device.narrow(0, offset, n).reshape(&slots[p].dims);
                    averaged.add_raw(ids[p], g);
                }
                offset += n;
            }
            timings.push(timing);
        }
        if let Some(buffers) = buffers {
            let values = buffers.wait()??;
            set_buffers(&mut self.model, values);
        }
        let _ = grads; // this rank's own gradients: superseded by the averages
        self.host = host;
        self.profile = StepProfile {
            backward,
            wait: start.elapsed() - backward,
            buckets: timings,
        };
        Ok(averaged)
    }

    /// Hands bucket `b` to the MPI thread: its gradients as one device tensor
    /// (zeros for those missing) and a presence flag per parameter.
    fn launch(
        &self,
        b: usize,
        members: &[usize],
        slots: &[Slot],
        grads: Vec<Option<RawTensor<D, E>>>,
        (mut data, mut out): (Vec<E>, Vec<E>),
        step_start: Instant,
    ) -> Result<Launched<E>, DistributedError> {
        let _no_grad = no_grad();
        let mut flags = Vec::with_capacity(members.len());
        let parts: Vec<RawTensor<D, E>> = members
            .iter()
            .zip(grads)
            .map(|(&p, g)| {
                flags.push(if g.is_some() { E::ONE } else { E::ZERO });
                match g {
                    Some(g) => g.reshape(&[slots[p].numel]),
                    None => RawTensor::from_vec(vec![E::ZERO; slots[p].numel], &[slots[p].numel]),
                }
            })
            .collect();
        // Recorded here, in the backward pass's order; read on the MPI thread.
        let flat = if parts.len() == 1 {
            parts.into_iter().next().expect("one part")
        } else {
            RawTensor::cat(&parts, 0)
        };
        let elements = flat.layout().numel();
        // The copy is recorded here, right after the bucket's gradients; had the
        // MPI thread recorded it, the training thread (which holds the recorder
        // most of the time) could have recorded the rest of the backward pass
        // first, and the read would wait for all of it.
        let read = flat.read_into_later(std::mem::take(&mut data));
        let started = step_start.elapsed();
        let pending = self.group.start(
            format!("all-reduce of gradient bucket {b}"),
            move |comm| -> Result<Bucket<E>, DistributedError> {
                let t = Instant::now();
                let data = pollster::block_on(read)
                    .map_err(|e| DistributedError::Device(e.to_string()))?;
                let read = t.elapsed();
                sum_into(comm, &data, &mut out);
                let mut present = Vec::new();
                sum_into(comm, &flags, &mut present);
                let ranks = E::from_f64(comm.size() as f64);
                for x in &mut out {
                    *x = *x / ranks;
                }
                Ok((
                    data,
                    out,
                    present,
                    BucketTiming {
                        elements,
                        started,
                        read,
                        reduce: t.elapsed() - read,
                    },
                ))
            },
        )?;
        Ok(Launched { pending })
    }

    /// Starts copying rank 0's buffers to every rank; `None` for a model without
    /// buffers.
    #[allow(clippy::type_complexity)]
    fn start_buffer_broadcast(
        &mut self,
    ) -> Result<Option<Pending<Result<Vec<E>, DistributedError>>>, DistributedError> {
        let mut buffers = Vec::new();
        self.model.visit(&mut Visitor::new(&mut |_, entry| {
            if let Entry::Buffer(b) = entry {
                buffers.push(b.value().clone());
            }
        }));
        if buffers.is_empty() {
            return Ok(None);
        }
        let main = self.group.is_main();
        Ok(Some(self.group.start(
            "broadcast of buffers from rank 0",
            move |comm| -> Result<Vec<E>, DistributedError> {
                let mut values = Vec::new();
                for b in &buffers {
                    if main {
                        values.extend(
                            b.try_to_vec()
                                .map_err(|e| DistributedError::Device(e.to_string()))?,
                        );
                    } else {
                        values.resize(values.len() + b.layout().numel(), E::ZERO);
                    }
                }
                mpi::traits::Root::broadcast_into(&comm.process_at_rank(0), &mut values[..]);
                Ok(values)
            },
        )?))
    }
}

/// A bucket on its way through the MPI thread.
struct Launched<E> {
    pending: Pending<Result<Bucket<E>, DistributedError>>,
}

/// A reduced bucket: its gradients as this rank read them back, their average
/// over the ranks, the presence flags summed, and its timing.
type Bucket<E> = (Vec<E>, Vec<E>, Vec<E>, BucketTiming);

/// The ids and dims of the model's trainable parameters, in visit order.
fn params<M: Module<D, E>, D: Backend<E>, E: Float>(model: &mut M) -> (Vec<TensorId>, Vec<Slot>) {
    let mut ids = Vec::new();
    let mut slots = Vec::new();
    model.visit(&mut Visitor::new(&mut |_, entry| {
        if let Entry::Param(p) = entry {
            let v = p.value();
            ids.push(v.id());
            slots.push(Slot {
                dims: v.dims().to_vec(),
                numel: v.layout().numel(),
            });
        }
    }));
    (ids, slots)
}

/// Buckets of parameter indices, last parameters first (the backward pass
/// finishes them first), each up to `cap` elements or one parameter.
fn plan_buckets(slots: &[Slot], cap: usize) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let mut size = 0;
    for p in (0..slots.len()).rev() {
        let n = slots[p].numel;
        match buckets.last_mut() {
            Some(b) if size + n <= cap => {
                b.push(p);
                size += n;
            }
            _ => {
                buckets.push(vec![p]);
                size = n;
            }
        }
    }
    buckets
}

/// One line per parameter, buffer and counter: what the ranks must agree on.
fn describe<M: Module<D, E>, D: Backend<E>, E: Float>(model: &mut M) -> Vec<String> {
    let mut lines = Vec::new();
    model.visit(&mut Visitor::new(&mut |name, entry| match entry {
        Entry::Param(p) => lines.push(format!("parameter `{name}` {:?}", p.value().dims())),
        Entry::Buffer(b) => lines.push(format!("buffer `{name}` {:?}", b.value().dims())),
        Entry::Counter(_) => lines.push(format!("counter `{name}`")),
        Entry::Training(_) => {}
    }));
    lines
}

/// The longest description exchanged in a mismatch report.
const LINE: usize = 256;

fn check_same_model<M: Module<D, E>, D: Backend<E>, E: Float>(
    group: &ProcessGroup,
    model: &mut M,
) -> Result<(), DistributedError> {
    if group.world_size() == 1 {
        return Ok(());
    }
    let mine = describe(model);
    let text = mine.join("\n").into_bytes();
    let theirs = String::from_utf8_lossy(&group.broadcast(text)?).into_owned();
    let on_rank0: Vec<&str> = if theirs.is_empty() {
        Vec::new()
    } else {
        theirs.split('\n').collect()
    };
    let first_difference = (0..mine.len().max(on_rank0.len()))
        .find(|&i| mine.get(i).map(String::as_str) != on_rank0.get(i).copied())
        .map_or(u64::MAX, |i| i as u64);
    // Every rank learns the first difference any rank saw, and each rank's entry
    // there, so that all of them report the same error.
    let at = group.run("model check", move |comm| {
        let mut at = 0u64;
        comm.all_reduce_into(
            &first_difference,
            &mut at,
            mpi::collective::SystemOperation::min(),
        );
        at
    })?;
    if at == u64::MAX {
        return Ok(());
    }
    let entry = |lines: &[&str]| {
        lines
            .get(at as usize)
            .map_or("nothing".to_string(), |s| s.to_string())
    };
    let mine_refs: Vec<&str> = mine.iter().map(String::as_str).collect();
    let mut line = entry(&mine_refs).into_bytes();
    line.truncate(LINE);
    line.resize(LINE, b' ');
    let world = group.world_size();
    let all = group.run("model check", move |comm| {
        let mut all = vec![0u8; LINE * world];
        comm.all_gather_into(&line[..], &mut all[..]);
        all
    })?;
    let rank0 = entry(&on_rank0);
    let lines: Vec<String> = all
        .chunks(LINE)
        .map(|c| String::from_utf8_lossy(c).trim_end().to_string())
        .collect();
    let (rank, here) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| **l != rank0)
        .map_or((0, rank0.clone()), |(r, l)| (r, l.clone()));
    let name_of = |s: &str| s.split('`').nth(1).map(str::to_string);
    Err(DistributedError::ModelMismatch {
        rank,
        name: name_of(&rank0)
            .or_else(|| name_of(&here))
            .unwrap_or_default(),
        on_rank0: rank0,
        here,
    })
}

/// Gives every rank rank 0's parameters, buffers and counters.
fn broadcast_state<M: Module<D, E>, D: Backend<E>, E: Float + Equivalence>(
    group: &ProcessGroup,
    model: &mut M,
) -> Result<(), DistributedError> {
    if group.world_size() == 1 {
        return Ok(());
    }
    let main = group.is_main();
    let mut values: Vec<E> = Vec::new();
    let mut counters: Vec<u64> = Vec::new();
    let mut read_error = None;
    model.visit(&mut Visitor::new(&mut |_, entry| match entry {
        Entry::Param(p) | Entry::Buffer(p) => {
            if main {
                match p.value().try_to_vec() {
                    Ok(v) => values.extend(v),
                    Err(e) => read_error = Some(DistributedError::Device(e.to_string())),
                }
            }
        }
        Entry::Counter(c) => counters.push(*c),
        Entry::Training(_) => {}
    }));
    if let Some(e) = read_error {
        return Err(e);
    }
    let values = group.broadcast(values)?;
    let counters = group.broadcast(counters)?;
    let (mut at, mut counter) = (0, 0);
    // The next tensor of `values`, with the dims of `p`.
    let mut next = |p: &dyn Param<D, E>| {
        let n = p.value().layout().numel();
        at += n;
        RawTensor::from_vec(values[at - n..at].to_vec(), p.value().dims())
    };
    let matched = "the ranks' models were checked to match";
    model.visit(&mut Visitor::new(&mut |_, entry| match entry {
        Entry::Param(p) => p.update(next(&*p)).expect(matched),
        Entry::Buffer(b) => b.set(next(&*b)).expect(matched),
        Entry::Counter(c) => {
            *c = counters[counter];
            counter += 1;
        }
        Entry::Training(_) => {}
    }));
    Ok(())
}

/// Sets the model's buffers, in visit order, from `values`.
fn set_buffers<M: Module<D, E>, D: Backend<E>, E: Float>(model: &mut M, values: Vec<E>) {
    let mut at = 0;
    model.visit(&mut Visitor::new(&mut |_, entry| {
        if let Entry::Buffer(b) = entry {
            let n = b.value().layout().numel();
            let dims = b.value().dims().to_vec();
            b.set(RawTensor::from_vec(values[at..at + n].to_vec(), &dims))
                .expect("a buffer keeps its dims");
            at += n;
        }
    }));
}

impl<M, D: Backend<E>, E: Float> std::ops::Deref for DataParallel<M, D, E> {
    type Target = M;
    fn deref(&self) -> &M {
        &self.model
    }
}

impl<M, D: Backend<E>, E: Float> std::ops::DerefMut for DataParallel<M, D, E> {
    fn deref_mut(&mut self) -> &mut M {
        &mut self.model
    }
}

impl<M: Module<D, E>, D: Backend<E>, E: Float> Module<D, E> for DataParallel<M, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        self.model.visit(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_fill_from_the_last_parameter() {
        let slots: Vec<Slot> = [4, 10, 3, 3, 20]
            .iter()
            .map(|&n| Slot {
                dims: vec![n],
                numel: n,
            })
            .collect();
        assert_eq!(
            plan_buckets(&slots, 8),
            vec![vec![4], vec![3, 2], vec![1], vec![0]]
        );
        assert_eq!(plan_buckets(&slots, 100), vec![vec![4, 3, 2, 1, 0]]);
    }
}
