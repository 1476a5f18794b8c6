//! Random-shape GPU parity (issue 13): `proptest` draws shapes, views, values and an
//! op, runs the op and its gradient on `Gpu` and on `Cpu`, and compares them. A
//! failing case shrinks to a minimal one (fewer and smaller dims, plainer views,
//! simpler values), which the failure message prints with the op, the dims, the
//! views and the first mismatching element.
//!
//! - **Shapes**: rank 0–4 (1–4 where an op needs an axis), each dim one of
//!   {1, 2, 3, 5, 7, 13, 31, 64, 97} or a small random one, the element count capped
//!   (dims halved until it fits) so that lavapipe stays fast. Matmul draws M, K, N
//!   from the same set, K also from {256, 264, 512, 520} (split-K), with 0–2 batch
//!   dims.
//! - **Views**: each input is stored contiguously and then viewed through any mix of
//!   a slice along one axis (narrow, then every 1st–3rd element), a broadcast of
//!   size-1 axes (`expand`, stride 0) and a permutation; gradients flow back through
//!   the view to the stored leaf.
//! - **Values**: uniform in (−3, 3) with exact zeros and small integers (ties for
//!   max/min, comparisons and the gradients' tie rules), positive where the op needs
//!   it (log, log2, sqrt, pow bases), away from zero for divisors and reciprocals,
//!   and multiples of 1/16 modulo ±{0.5, 1, 2} for `Mod`, whose quotient is then
//!   exact on any GPU's division (a quotient one rounding below an integer would
//!   floor one lower: the op's true discontinuity, not a Volta bug).
//! - **Gradients**: of `Σ out · w` with `w` a fixed random tensor, with respect to
//!   every stored input.
//! - **Fusion**: each case runs with the GPU's elementwise fusion on or off (drawn).
//!
//! Families and cases per CI run (in the dev profile on lavapipe with 2 cores, about
//! 20 s in all, 770 cases): elementwise (every unary op, every binary op with broadcasting and
//! with a scalar, select) [`ELEMENTWISE_CASES`]; reductions (sum, max, min, mean
//! along a random axis, and over all) [`REDUCE_CASES`]; softmax, log-softmax and
//! normalisation along a random axis [`ROW_CASES`]; matmul (batched, shared weight,
//! vector operands) [`MATMUL_CASES`]; gather and index-select [`INDEX_CASES`].
//!
//! The cases are the same each run (a fixed seed). To explore others, set
//! `PROPTEST_RNG_SEED=<u64>` and `PROPTEST_CASES=<n>`; a failure prints its shrunk
//! input, which belongs in a deterministic regression test (see the end of this file).
#![cfg(feature = "gpu")]

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{RngSeed, TestRunner};
use std::fmt;
use volta::backend::Backend;
use volta::prelude::*;
use volta::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

/// Cases per family and CI run.
const ELEMENTWISE_CASES: u32 = 150;
/// See [`ELEMENTWISE_CASES`].
const REDUCE_CASES: u32 = 100;
/// See [`ELEMENTWISE_CASES`].
const ROW_CASES: u32 = 100;
/// See [`ELEMENTWISE_CASES`].
const MATMUL_CASES: u32 = 100;
/// See [`ELEMENTWISE_CASES`].
const INDEX_CASES: u32 = 100;
/// See [`ELEMENTWISE_CASES`].
const MOVEMENT_CASES: u32 = 80;
/// See [`ELEMENTWISE_CASES`].
const WINDOW_CASES: u32 = 100;
/// See [`ELEMENTWISE_CASES`].
const CHAIN_CASES: u32 = 40;

/// The seed of every family's case stream unless `PROPTEST_RNG_SEED` is set.
const SEED: u64 = 13;

/// Most elements a drawn shape may have (a sliced view stores up to ~4× more).
const MAX_ELEMENTS: usize = 2048;
/// Most elements of a large shape: rows enough for the reductions' thread-per-row
/// kernel on strided axes (4096 rows and more), several workgroups per row kernel.
const MAX_LARGE_ELEMENTS: usize = 65_536;
/// Most elements of a matmul's two operands together.
const MAX_MATMUL_ELEMENTS: usize = 12_288;

/// The interesting sizes: 1 (broadcast-like), primes (ragged tiles and rows), 64
/// (vec4 rows, whole tiles).
const DIMS: [usize; 9] = [1, 2, 3, 5, 7, 13, 31, 64, 97];
/// Inner dims that make matmul split K into slices.
const SPLIT_K: [usize; 4] = [256, 264, 512, 520];
/// Outer dims that make matmul take its medium tiles (both M and N ≥ 256).
const MEDIUM_TILES: [usize; 2] = [256, 300];

/// Inputs of a chain (some steps may leave one unread).
const CHAIN_INPUTS: usize = 3;

// ---------------------------------------------------------------------------
// Cases

/// How an input's values are drawn (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Domain {
    Any,
    Positive,
    NonZero,
    /// Multiples of 1/16 in [−4, 4].
    Sixteenths,
    /// ±{0.5, 1, 2}.
    PowerOfTwo,
    /// Uniform in (−1.5, 1.5), no exact zeros or integers: see [`chains`].
    Continuous,
}

/// A slice of the stored tensor along `axis`: from `start`, every `step`-th element.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slice {
    axis: usize,
    start: usize,
    step: usize,
}

/// How the op sees a stored input: sliced, then broadcast, then permuted.
#[derive(Clone, PartialEq)]
struct View {
    /// Axis `i` of the view is axis `perm[i]` of the (sliced, broadcast) tensor.
    perm: Vec<usize>,
    /// Axes (before the permutation) stored with size 1 and expanded.
    bcast: Vec<bool>,
    slice: Option<Slice>,
}

impl View {
    fn is_permuted(&self) -> bool {
        self.perm.iter().enumerate().any(|(i, &p)| i != p)
    }

    /// The view's dims before the permutation.
    fn unpermuted(&self, dims: &[usize]) -> Vec<usize> {
        let mut q = vec![0; dims.len()];
        for (i, &p) in self.perm.iter().enumerate() {
            q[p] = dims[i];
        }
        q
    }

    fn slice(&self) -> Option<Slice> {
        self.slice.filter(|s| !self.bcast[s.axis])
    }

    /// The dims of the stored tensor behind a view with `dims`.
    fn stored(&self, dims: &[usize]) -> Vec<usize> {
        let mut s = self.unpermuted(dims);
        for (d, &b) in s.iter_mut().zip(&self.bcast) {
            if b {
                *d = 1;
            }
        }
        if let Some(sl) = self.slice() {
            // One element past the last one read: the view never ends the buffer.
            s[sl.axis] = sl.start + (s[sl.axis] - 1) * sl.step + 2;
        }
        s
    }

    fn apply<D: Backend<f32>>(&self, x: RawTensor<D, f32>, dims: &[usize]) -> RawTensor<D, f32> {
        let q = self.unpermuted(dims);
        let mut x = x;
        if let Some(sl) = self.slice() {
            let len = (q[sl.axis] - 1) * sl.step + 1;
            x = x.narrow(sl.axis, sl.start, len).step(sl.axis, sl.step);
        }
        if self.bcast.iter().any(|&b| b) {
            x = x.expand(&q);
        }
        if self.is_permuted() {
            x = x.permute(&self.perm);
        }
        x
    }
}

impl fmt::Debug for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(s) = self.slice() {
            parts.push(format!(
                "slice axis {} from {} step {}",
                s.axis, s.start, s.step
            ));
        }
        let b: Vec<usize> = (0..self.bcast.len()).filter(|&a| self.bcast[a]).collect();
        if !b.is_empty() {
            parts.push(format!("broadcast axes {b:?}"));
        }
        if self.is_permuted() {
            parts.push(format!("permute {:?}", self.perm));
        }
        if parts.is_empty() {
            write!(f, "contiguous")
        } else {
            write!(f, "{}", parts.join(", "))
        }
    }
}

/// One input: the op sees dims `dims` through `view` of a stored tensor of `values`.
#[derive(Clone)]
struct Input {
    dims: Vec<usize>,
    view: View,
    values: Vec<f32>,
}

impl Input {
    fn build<D: Backend<f32>>(&self, leaf: &Tensor<(usize,), D>) -> RawTensor<D, f32> {
        let stored = leaf.raw().reshape(&self.view.stored(&self.dims));
        self.view.apply(stored, &self.dims)
    }
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} ({:?}; stored {:?}: {})",
            self.dims,
            self.view,
            self.view.stored(&self.dims),
            short(&self.values)
        )
    }
}

/// A list in full when short, else its start and length.
fn short<T: fmt::Debug>(v: &[T]) -> String {
    if v.len() <= 24 {
        format!("{v:?}")
    } else {
        format!("{:?} … ({} in all)", &v[..12], v.len())
    }
}

/// The op under test.
#[derive(Clone)]
enum Op {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Scalar(BinaryOp, f32),
    /// `select(x[2] > 0, x[0], x[1])`.
    Select,
    Reduce(ReduceOp, usize),
    Mean(usize),
    ReduceAll(ReduceOp),
    Softmax(usize),
    LogSoftmax(usize),
    /// Layer norm (`center`) or RMS norm along the axis, eps 1e-5.
    Normalize(usize, bool),
    MatMul,
    Gather {
        axis: usize,
        idx_dims: Vec<usize>,
        idx: Vec<u32>,
    },
    IndexSelect(Vec<u32>),
    /// A contiguous copy of the view.
    Copy,
    Pad(Vec<(usize, usize)>, f32),
    /// Every input, concatenated along the axis.
    Cat(usize),
    Unfold2d(Window2d, f32),
    /// Columns folded into an image of this height and width.
    Fold2d(Window2d, [usize; 2]),
    /// A program of elementwise steps over [`CHAIN_INPUTS`] inputs, then perhaps a row
    /// op on its result.
    Chain(Vec<Step>, Option<RowStep>),
}

/// One step of a chain: a new value from the last one (and another earlier value).
#[derive(Clone, Copy, Debug)]
enum Step {
    Unary(UnaryOp),
    /// With the value at this position of the history (the inputs, then each step's).
    Binary(BinaryOp, usize),
    Scalar(BinaryOp, f32),
}

/// What reads a chain's result: a reduction, softmax or normalisation along an axis.
#[derive(Clone, Copy, Debug)]
enum RowStep {
    Reduce(ReduceOp, usize),
    Softmax(usize),
    LogSoftmax(usize),
    /// eps 0.1: the chain may leave a row constant (see `rows`).
    Normalize(usize, bool),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Unary(op) => write!(f, "{op:?}"),
            Op::Binary(op) => write!(f, "{op:?}"),
            Op::Scalar(op, c) => write!(f, "{op:?} scalar {c}"),
            Op::Select => write!(f, "select(x2 > 0, x0, x1)"),
            Op::Reduce(op, axis) => write!(f, "{op:?} along axis {axis}"),
            Op::Mean(axis) => write!(f, "mean along axis {axis}"),
            Op::ReduceAll(op) => write!(f, "{op:?} over all"),
            Op::Softmax(axis) => write!(f, "softmax along axis {axis}"),
            Op::LogSoftmax(axis) => write!(f, "log_softmax along axis {axis}"),
            Op::Normalize(axis, c) => write!(f, "normalize along axis {axis}, center {c}"),
            Op::MatMul => write!(f, "matmul"),
            Op::Gather {
                axis,
                idx_dims,
                idx,
            } => write!(f, "gather axis {axis}, idx {idx_dims:?} {}", short(idx)),
            Op::IndexSelect(ids) => write!(f, "index_select {}", short(ids)),
            Op::Copy => write!(f, "contiguous copy"),
            Op::Pad(pads, v) => write!(f, "pad {pads:?} with {v}"),
            Op::Cat(axis) => write!(f, "cat along axis {axis}"),
            Op::Unfold2d(w, v) => write!(f, "unfold2d {w:?}, pad value {v}"),
            Op::Fold2d(w, hw) => write!(f, "fold2d {w:?} into {hw:?}"),
            Op::Chain(steps, row) => {
                let mut names: Vec<String> = (0..CHAIN_INPUTS).map(|i| format!("x{i}")).collect();
                for (i, step) in steps.iter().enumerate() {
                    let last = names.last().unwrap().clone();
                    let line = match step {
                        Step::Unary(u) => format!("{u:?}({last})"),
                        Step::Binary(b, j) => format!("{b:?}({last}, {})", names[*j]),
                        Step::Scalar(b, c) => format!("{b:?}({last}, {c})"),
                    };
                    write!(f, "v{i} = {line}; ")?;
                    names.push(format!("v{i}"));
                }
                write!(f, "then {row:?}")
            }
        }
    }
}

impl Op {
    fn run<D: Backend<f32>>(&self, x: &[RawTensor<D, f32>]) -> RawTensor<D, f32> {
        match self {
            Op::Unary(op) => x[0].unary(*op),
            Op::Binary(op) => x[0].binary(*op, &x[1]),
            Op::Scalar(op, c) => x[0].scalar(*op, *c),
            Op::Select => {
                let cond = x[2].scalar(BinaryOp::Gt, 0.0);
                RawTensor::select(&cond, &x[0], &x[1])
            }
            Op::Reduce(op, axis) => x[0].reduce(*op, *axis),
            Op::Mean(axis) => x[0].mean_axis(*axis),
            Op::ReduceAll(op) => x[0].reduce_all(*op),
            Op::Softmax(axis) => x[0].softmax(*axis),
            Op::LogSoftmax(axis) => x[0].log_softmax(*axis),
            Op::Normalize(axis, center) => x[0].normalize(*axis, *center, 1e-5),
            Op::MatMul => x[0].matmul(&x[1]),
            Op::Gather {
                axis,
                idx_dims,
                idx,
            } => x[0].gather(*axis, &RawTensor::from_vec(idx.clone(), idx_dims)),
            Op::Copy => x[0].contiguous(),
            Op::Pad(pads, v) => x[0].pad(pads, *v),
            Op::Cat(axis) => RawTensor::cat(x, *axis),
            Op::Unfold2d(w, v) => x[0].unfold2d(*w, *v),
            Op::Fold2d(w, hw) => x[0].fold2d(*w, *hw),
            Op::Chain(steps, row) => {
                let mut hist = x.to_vec();
                for step in steps {
                    let last = hist.last().unwrap();
                    let v = match *step {
                        Step::Unary(u) => last.unary(u),
                        Step::Binary(b, j) => last.binary(b, &hist[j]),
                        Step::Scalar(b, c) => last.scalar(b, c),
                    };
                    hist.push(v);
                }
                let v = hist.last().unwrap();
                match *row {
                    None => v.clone(),
                    Some(RowStep::Reduce(op, axis)) => v.reduce(op, axis),
                    Some(RowStep::Softmax(axis)) => v.softmax(axis),
                    Some(RowStep::LogSoftmax(axis)) => v.log_softmax(axis),
                    Some(RowStep::Normalize(axis, center)) => v.normalize(axis, center, 0.1),
                }
            }
            Op::IndexSelect(ids) => {
                x[0].index_select(&RawTensor::from_vec(ids.clone(), &[ids.len()]))
            }
        }
    }
}

/// A drawn case: the op, its inputs, the fusion switch and the seed of the output
/// weights.
#[derive(Clone)]
struct Case {
    op: Op,
    inputs: Vec<Input>,
    fusion: bool,
    seed: u64,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:?}, fusion {}, weights seed {}",
            self.op, self.fusion, self.seed
        )?;
        for (i, x) in self.inputs.iter().enumerate() {
            writeln!(f, "  x{i}: {x:?}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Running and comparing

/// What a case computed on one device.
struct Outcome {
    dims: Vec<usize>,
    value: Vec<f32>,
    grads: Vec<Option<Vec<f32>>>,
}

fn eval<D: Backend<f32>>(case: &Case) -> Outcome {
    let leaves: Vec<Tensor<(usize,), D>> = case
        .inputs
        .iter()
        .map(|x| {
            Tensor::from_vec_shaped(x.values.clone(), (x.values.len(),))
                .unwrap()
                .requires_grad()
        })
        .collect();
    let views: Vec<RawTensor<D, f32>> = case
        .inputs
        .iter()
        .zip(&leaves)
        .map(|(x, l)| x.build(l))
        .collect();
    let out = case.op.run(&views);
    let dims = out.dims().to_vec();
    let value = out.to_vec();
    let mut rng = volta::Rng::seed(case.seed);
    let w: Vec<f32> = (0..value.len()).map(|_| rng.normal() as f32).collect();
    let w = RawTensor::<D, f32>::from_vec(w, &dims);
    let loss = out.binary(BinaryOp::Mul, &w).reduce_all(ReduceOp::Sum);
    let grads = Tensor::<(), D>::try_from_raw(loss).unwrap().backward();
    let grads = leaves
        .iter()
        .map(|l| grads.get(l).map(|g| g.to_vec()))
        .collect();
    Outcome { dims, value, grads }
}

/// `flat` as an index into `dims`.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        idx[a] = flat % dims[a];
        flat /= dims[a];
    }
    idx
}

/// The first element where `gpu` is not within the tolerance of `cpu`.
fn mismatch(cpu: &[f32], gpu: &[f32], dims: &[usize]) -> Option<String> {
    if cpu.len() != gpu.len() {
        return Some(format!(
            "{} elements on the CPU, {} on the GPU",
            cpu.len(),
            gpu.len()
        ));
    }
    let (i, c, g) = cpu
        .iter()
        .zip(gpu)
        .enumerate()
        .map(|(i, (&c, &g))| (i, c, g))
        .find(|&(_, c, g)| {
            !(c == g || (c.is_nan() && g.is_nan()) || (c - g).abs() <= 2e-4 + 2e-4 * c.abs())
        })?;
    Some(format!(
        "element {i} (index {:?} of {dims:?}): cpu {c} vs gpu {g}",
        unravel(i, dims)
    ))
}

/// Runs `case` on both devices and panics, naming the op, the inputs and the first
/// mismatching element, where they differ.
fn check(case: &Case) {
    let t0 = std::time::Instant::now();
    let p0 = Gpu::pipelines_compiled();
    struct Dbg<'a>(&'a Case, std::time::Instant, usize);
    impl Drop for Dbg<'_> {
        fn drop(&mut self) {
            if std::env::var_os("DEBUG_CASES").is_some() {
                eprintln!(
                    "CASE {:?} ms, {} pipelines: {:?}",
                    self.1.elapsed().as_millis(),
                    Gpu::pipelines_compiled() - self.2,
                    self.0
                );
            }
        }
    }
    let _dbg = Dbg(case, t0, p0);
    let cpu = eval::<Cpu>(case);
    let gpu = if case.fusion {
        let _shared = crate::support::gpu_shared();
        eval::<Gpu>(case)
    } else {
        let _alone = crate::support::gpu_alone();
        Gpu::set_fusion(false);
        let gpu = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| eval::<Gpu>(case)));
        Gpu::set_fusion(true);
        gpu.unwrap_or_else(|e| std::panic::resume_unwind(e))
    };
    let what = || {
        let inputs: Vec<String> = case
            .inputs
            .iter()
            .enumerate()
            .map(|(i, x)| format!("x{i} {:?} ({:?})", x.dims, x.view))
            .collect();
        format!(
            "{:?} of {} (fusion {})",
            case.op,
            inputs.join(", "),
            case.fusion
        )
    };
    assert_eq!(cpu.dims, gpu.dims, "{}: output dims differ", what());
    if let Some(m) = mismatch(&cpu.value, &gpu.value, &cpu.dims) {
        panic!("{}: forward {m}", what());
    }
    for (i, (c, g)) in cpu.grads.iter().zip(&gpu.grads).enumerate() {
        match (c, g) {
            (Some(c), Some(g)) => {
                let stored = case.inputs[i].view.stored(&case.inputs[i].dims);
                if let Some(m) = mismatch(c, g, &stored) {
                    panic!("{}: gradient of x{i} (stored {stored:?}) {m}", what());
                }
            }
            (None, None) => {}
            _ => panic!("{}: the gradient of x{i} exists on one device only", what()),
        }
    }
}

/// Environment settings win (`PROPTEST_CASES`, `PROPTEST_RNG_SEED`, ...); otherwise
/// `cases` cases from [`SEED`], shrinking for at most 2000 steps.
fn config(cases: u32) -> ProptestConfig {
    let set = |name: &str| std::env::var_os(name).is_some();
    let mut c = ProptestConfig::default();
    if !set("PROPTEST_CASES") {
        c.cases = cases;
    }
    if !set("PROPTEST_RNG_SEED") {
        c.rng_seed = RngSeed::Fixed(SEED);
    }
    if !set("PROPTEST_MAX_SHRINK_ITERS") {
        c.max_shrink_iters = 2000;
    }
    c.failure_persistence = None;
    c
}

fn run_family(name: &str, cases: u32, strategy: impl Strategy<Value = Case>) {
    Gpu::init().expect("a GPU adapter (install mesa-vulkan-drivers for lavapipe)");
    let config = config(cases);
    let n = config.cases;
    let start = std::time::Instant::now();
    let mut runner = TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, |case| {
        check(&case);
        Ok(())
    }) {
        panic!("{name}: {e}");
    }
    // Counts of every family running at the time: a rough sign of the work done (a
    // new pipeline costs lavapipe ~0.1 s of LLVM unless Mesa's shader cache has it).
    println!(
        "{name}: {n} cases in {:.1?} ({} GPU dispatches, {} pipelines so far)",
        start.elapsed(),
        Gpu::dispatches_recorded(),
        Gpu::pipelines_compiled()
    );
}

// ---------------------------------------------------------------------------
// Strategies

/// One value of `domain`.
fn draw(domain: Domain, rng: &mut volta::Rng) -> f32 {
    let u = rng.uniform() as f32;
    let int = |rng: &mut volta::Rng, lo: i32, hi: i32| {
        (lo + rng.below((hi - lo + 1) as usize) as i32) as f32
    };
    match domain {
        Domain::Any => match rng.below(9) {
            0 => 0.0,
            1 | 2 => int(rng, -3, 3),
            _ => 6.0 * u - 3.0,
        },
        Domain::Positive => match rng.below(5) {
            0 => int(rng, 1, 3),
            _ => 0.25 + 3.75 * u,
        },
        Domain::NonZero => (0.5 + 2.0 * u) * if rng.below(2) == 0 { -1.0 } else { 1.0 },
        Domain::Sixteenths => int(rng, -64, 64) / 16.0,
        Domain::PowerOfTwo => [0.5, 1.0, 2.0, -0.5, -1.0, -2.0][rng.below(6)],
        Domain::Continuous => 3.0 * u - 1.5,
    }
}

/// One value of `domain`, as a strategy that shrinks (for scalar operands).
fn value(domain: Domain) -> BoxedStrategy<f32> {
    let ints = |lo: i8, hi: i8| (lo..=hi).prop_map(f32::from);
    match domain {
        Domain::Any => prop_oneof![
            2 => ints(-3, 3),
            1 => Just(0.0f32),
            6 => -3.0f32..3.0,
        ]
        .boxed(),
        Domain::Positive => prop_oneof![1 => ints(1, 3), 4 => 0.25f32..4.0].boxed(),
        Domain::NonZero => (any::<bool>(), 0.5f32..2.5)
            .prop_map(|(neg, m)| if neg { -m } else { m })
            .boxed(),
        Domain::Sixteenths => (-64i32..=64).prop_map(|i| i as f32 / 16.0).boxed(),
        Domain::PowerOfTwo => select(vec![0.5f32, 1.0, 2.0, -0.5, -1.0, -2.0]).boxed(),
        Domain::Continuous => (-1.5f32..1.5).boxed(),
    }
}

fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![3 => select(DIMS.to_vec()), 1 => 1usize..=12]
}

/// Halves the largest dims until at most `cap` elements remain.
fn capped(mut d: Vec<usize>, cap: usize) -> Vec<usize> {
    while d.iter().product::<usize>() > cap {
        let i = (0..d.len()).max_by_key(|&i| d[i]).unwrap();
        d[i] = d[i].div_ceil(2);
    }
    d
}

/// Dims of a rank in `ranks`: at most [`MAX_ELEMENTS`] elements, or one time in ten
/// at most [`MAX_LARGE_ELEMENTS`].
fn dims(ranks: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<usize>> {
    let cap = prop_oneof![9 => Just(MAX_ELEMENTS), 1 => Just(MAX_LARGE_ELEMENTS)];
    (prop::collection::vec(dim(), ranks), cap).prop_map(|(d, cap)| capped(d, cap))
}

/// A view of rank `rank`, broadcasting each axis with probability `p_bcast`.
fn view(rank: usize, p_bcast: f64) -> BoxedStrategy<View> {
    if rank == 0 {
        return Just(View {
            perm: vec![],
            bcast: vec![],
            slice: None,
        })
        .boxed();
    }
    let identity: Vec<usize> = (0..rank).collect();
    let perm = prop_oneof![Just(identity.clone()), Just(identity).prop_shuffle()];
    let bcast = prop::collection::vec(prop::bool::weighted(p_bcast), rank);
    let slice = prop::option::weighted(
        0.35,
        (0..rank, 0usize..=2, 1usize..=3).prop_map(|(axis, start, step)| Slice {
            axis,
            start,
            step,
        }),
    );
    (perm, bcast, slice)
        .prop_map(|(perm, bcast, slice)| View { perm, bcast, slice })
        .boxed()
}

/// An input with dims `dims`, its view and values of `domain` (drawn from a seed:
/// shrinking then spends its steps on the dims and views, not on each value).
fn input(dims: Vec<usize>, domain: Domain, p_bcast: f64) -> BoxedStrategy<Input> {
    (view(dims.len(), p_bcast), any::<u64>())
        .prop_map(move |(view, seed)| {
            let n: usize = view.stored(&dims).iter().product();
            let mut rng = volta::Rng::seed(seed);
            Input {
                dims: dims.clone(),
                view,
                values: (0..n).map(|_| draw(domain, &mut rng)).collect(),
            }
        })
        .boxed()
}

/// A case of `op` over inputs with these dims and domains; the first input is rarely
/// broadcast, later ones often.
fn case(op: Op, inputs: Vec<(Vec<usize>, Domain)>) -> impl Strategy<Value = Case> {
    let inputs: Vec<_> = inputs
        .into_iter()
        .enumerate()
        .map(|(i, (d, dom))| input(d, dom, if i == 0 { 0.1 } else { 0.4 }))
        .collect();
    (inputs, any::<bool>(), any::<u64>()).prop_map(move |(inputs, fusion, seed)| Case {
        op: op.clone(),
        inputs,
        fusion,
        seed,
    })
}

fn unary_domain(op: UnaryOp) -> Domain {
    match op {
        UnaryOp::Log | UnaryOp::Log2 | UnaryOp::Sqrt => Domain::Positive,
        UnaryOp::Recip => Domain::NonZero,
        _ => Domain::Any,
    }
}

fn binary_domains(op: BinaryOp) -> (Domain, Domain) {
    match op {
        BinaryOp::Div => (Domain::Any, Domain::NonZero),
        BinaryOp::Mod => (Domain::Sixteenths, Domain::PowerOfTwo),
        BinaryOp::Pow => (Domain::Positive, Domain::Any),
        _ => (Domain::Any, Domain::Any),
    }
}

fn elementwise() -> impl Strategy<Value = Case> {
    let scalar = select(BinaryOp::ALL.to_vec())
        .prop_flat_map(|op| value(binary_domains(op).1).prop_map(move |c| Op::Scalar(op, c)));
    let op = prop_oneof![
        4 => select(UnaryOp::ALL.to_vec()).prop_map(Op::Unary),
        4 => select(BinaryOp::ALL.to_vec()).prop_map(Op::Binary),
        2 => scalar,
        1 => Just(Op::Select),
    ];
    (op, dims(0..=6)).prop_flat_map(|(op, d)| {
        let doms = match &op {
            Op::Unary(u) => vec![unary_domain(*u)],
            Op::Binary(b) => {
                let (x, y) = binary_domains(*b);
                vec![x, y]
            }
            Op::Scalar(b, _) => vec![binary_domains(*b).0],
            _ => vec![Domain::Any; 3],
        };
        case(op, doms.into_iter().map(|dom| (d.clone(), dom)).collect())
    })
}

fn reductions() -> impl Strategy<Value = Case> {
    let reduce = select(vec![ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
    (dims(1..=6), reduce, 0usize..6, 0usize..6).prop_flat_map(|(d, op, axis, kind)| {
        let axis = axis % d.len();
        let op = match kind {
            0..=2 => Op::Reduce(op, axis),
            3 => Op::Mean(axis),
            _ => Op::ReduceAll(op),
        };
        case(op, vec![(d, Domain::Any)])
    })
}

fn rows() -> impl Strategy<Value = Case> {
    (dims(1..=6), 0usize..6, 0usize..6)
        .prop_flat_map(|(d, axis, kind)| {
            let axis = axis % d.len();
            let op = match kind {
                0 => Op::Softmax(axis),
                1 => Op::LogSoftmax(axis),
                k => Op::Normalize(axis, k == 2),
            };
            case(op, vec![(d, Domain::Any)])
        })
        // A row that is one broadcast value has variance 0: its exact gradient is 0, and
        // both devices return rounding noise of about n·|g|/√eps·2⁻²⁴ (~1e-3 for a row
        // of 97), which no fixed tolerance tells from a bug. Broadcasts along other axes,
        // and rows whose values merely tie, stay.
        .prop_filter("normalize of a broadcast row", |c| match c.op {
            Op::Normalize(axis, _) => {
                let v = &c.inputs[0].view;
                !v.bcast[v.perm[axis]] || c.inputs[0].dims[axis] == 1
            }
            _ => true,
        })
}

/// The operand layouts `matmul` accepts.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// `(.., m, k) × (.., k, n)`.
    Batched,
    /// `(.., m, k) × (k, n)`.
    Shared,
    /// `(k) × (k, n)`.
    VectorLhs,
    /// `(.., m, k) × (k)`.
    VectorRhs,
}

fn matmul() -> impl Strategy<Value = Case> {
    let k = prop_oneof![6 => dim(), 1 => select(SPLIT_K.to_vec())];
    let form = prop_oneof![
        4 => Just(Form::Batched),
        2 => Just(Form::Shared),
        1 => Just(Form::VectorLhs),
        1 => Just(Form::VectorRhs),
    ];
    let batch = prop::collection::vec(select(vec![1usize, 2, 3, 5]), 0..=4);
    let mn = || prop_oneof![8 => dim(), 1 => select(MEDIUM_TILES.to_vec())];
    (form, batch, mn(), k, mn()).prop_flat_map(|(form, mut batch, mut m, k, mut n)| {
        // Shrink the batch, then m and n, until the operands fit.
        let size = |b: &[usize], m: usize, n: usize| b.iter().product::<usize>() * (m + n) * k;
        while size(&batch, m, n) > MAX_MATMUL_ELEMENTS {
            if let Some(i) = (0..batch.len()).find(|&i| batch[i] > 1) {
                batch[i] = 1;
            } else if m >= n {
                m = m.div_ceil(2);
            } else {
                n = n.div_ceil(2);
            }
        }
        let with = |tail: &[usize]| [&batch[..], tail].concat();
        let (a, b) = match form {
            Form::Batched => (with(&[m, k]), with(&[k, n])),
            Form::Shared => (with(&[m, k]), vec![k, n]),
            Form::VectorLhs => (vec![k], vec![k, n]),
            Form::VectorRhs => (with(&[m, k]), vec![k]),
        };
        case(Op::MatMul, vec![(a, Domain::Any), (b, Domain::Any)])
    })
}

fn indexing() -> impl Strategy<Value = Case> {
    let gather = (dims(1..=6), 0usize..6, select(vec![1usize, 2, 3, 5, 7, 13])).prop_flat_map(
        |(d, axis, len)| {
            let axis = axis % d.len();
            let mut idx_dims = d.clone();
            // At most MAX_ELEMENTS indices.
            let rest = d.iter().product::<usize>() / d[axis];
            idx_dims[axis] = len.min(MAX_ELEMENTS / rest).max(1);
            let n: usize = idx_dims.iter().product();
            let idx = prop::collection::vec(0..d[axis] as u32, n);
            (Just(d), Just(axis), Just(idx_dims), idx)
        },
    );
    let gather = gather.prop_flat_map(|(d, axis, idx_dims, idx)| {
        let op = Op::Gather {
            axis,
            idx_dims,
            idx,
        };
        case(op, vec![(d, Domain::Any)])
    });
    let select_rows = dims(1..=6).prop_flat_map(|d| {
        let ids = prop::collection::vec(0..d[0] as u32, 1..=13);
        (Just(d), ids).prop_flat_map(|(d, ids)| case(Op::IndexSelect(ids), vec![(d, Domain::Any)]))
    });
    prop_oneof![3 => gather, 1 => select_rows]
}

fn movement() -> impl Strategy<Value = Case> {
    let copy = dims(1..=6).prop_flat_map(|d| case(Op::Copy, vec![(d, Domain::Any)]));
    let pad = dims(1..=6).prop_flat_map(|d| {
        let pads = prop::collection::vec((0usize..=3, 0usize..=3), d.len());
        (Just(d), pads, value(Domain::Any))
            .prop_flat_map(|(d, pads, v)| case(Op::Pad(pads, v), vec![(d, Domain::Any)]))
    });
    let cat = (dims(1..=6), 0usize..6, prop::collection::vec(dim(), 1..=3)).prop_flat_map(
        |(d, axis, lens)| {
            let axis = axis % d.len();
            let rest = d.iter().product::<usize>() / d[axis];
            let parts = lens
                .iter()
                .map(|&len| {
                    let mut p = d.clone();
                    p[axis] = len.min(MAX_ELEMENTS / rest).max(1);
                    (p, Domain::Any)
                })
                .collect();
            case(Op::Cat(axis), parts)
        },
    );
    prop_oneof![copy, pad, cat]
}

fn windows() -> impl Strategy<Value = Case> {
    let pair = |lo: usize, hi: usize| [lo..=hi, lo..=hi];
    let win = (pair(1, 4), pair(1, 3), pair(0, 2), pair(1, 2)).prop_map(
        |(kernel, stride, padding, dilation)| Window2d {
            kernel,
            stride,
            padding,
            dilation,
        },
    );
    let side = prop_oneof![select(vec![1usize, 2, 3, 5, 7]), 1usize..=9];
    let image = (1usize..=2, 1usize..=3, side.clone(), side);
    (win, image, any::<bool>(), select(vec![0.0f32, 0.5, -3.0]))
        .prop_filter("the window fits", |(w, (_, _, h, wd), _, _)| {
            w.output([*h, *wd]).is_ok()
        })
        .prop_flat_map(|(win, (n, c, h, w), fold, pad_value)| {
            let [oh, ow] = win.output([h, w]).unwrap();
            let [kh, kw] = win.kernel;
            if fold {
                let cols = vec![n, oh, ow, c, kh, kw];
                case(Op::Fold2d(win, [h, w]), vec![(cols, Domain::Any)]).boxed()
            } else {
                let image = vec![n, c, h, w];
                case(Op::Unfold2d(win, pad_value), vec![(image, Domain::Any)]).boxed()
            }
        })
}

/// Chains of elementwise steps, fused on the GPU (when the case has fusion on) into
/// one kernel and into the loads of the row op that reads them. A last-bit
/// difference between the devices' tanh, erf or sigmoid is within tolerance, but it
/// flips whatever reads the value discontinuously, so: no floor, comparison or mod
/// steps; values [`Domain::Continuous`] (small, no exact zeros or integers), so that
/// a `max`/`min` step or `abs` meets no tie a saturated or computed value might break
/// on one device only (tanh(9) is 1.0 in f32 on the CPU, 0.99999994 on lavapipe);
/// and the normalisation uses eps 0.1, since a chain may leave a row constant.
fn chains() -> impl Strategy<Value = Case> {
    let unary = select(vec![
        UnaryOp::Neg,
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Abs,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Erf,
    ]);
    let binary = select(vec![
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Max,
        BinaryOp::Min,
    ]);
    let scalar = select(vec![BinaryOp::Add, BinaryOp::Mul, BinaryOp::Max]);
    let step = prop_oneof![
        unary.prop_map(Step::Unary),
        (binary, any::<prop::sample::Index>())
            .prop_map(|(b, j)| Step::Binary(b, j.index(usize::MAX))),
        (scalar, value(Domain::Continuous)).prop_map(|(b, c)| Step::Scalar(b, c)),
    ];
    let steps = prop::collection::vec(step, 1..=5).prop_map(|mut steps| {
        // Step i may read the inputs and the steps before it.
        for (i, s) in steps.iter_mut().enumerate() {
            if let Step::Binary(_, j) = s {
                *j %= CHAIN_INPUTS + i;
            }
        }
        steps
    });
    let row = (
        0usize..5,
        0usize..6,
        select(vec![ReduceOp::Sum, ReduceOp::Max]),
    );
    (dims(1..=6), steps, prop::option::weighted(0.6, row)).prop_flat_map(|(d, steps, row)| {
        let row = row.map(|(kind, axis, op)| {
            let axis = axis % d.len();
            match kind {
                0 => RowStep::Reduce(op, axis),
                1 => RowStep::Softmax(axis),
                2 => RowStep::LogSoftmax(axis),
                k => RowStep::Normalize(axis, k == 3),
            }
        });
        let inputs = vec![(d, Domain::Continuous); CHAIN_INPUTS];
        case(Op::Chain(steps, row), inputs)
    })
}

// ---------------------------------------------------------------------------
// The families

#[test]
fn elementwise_ops_on_random_shapes_and_views() {
    run_family("elementwise", ELEMENTWISE_CASES, elementwise());
}

#[test]
fn reductions_on_random_shapes_and_views() {
    run_family("reductions", REDUCE_CASES, reductions());
}

#[test]
fn softmax_and_normalize_on_random_shapes_and_views() {
    run_family("softmax and normalize", ROW_CASES, rows());
}

#[test]
fn matmul_on_random_shapes_and_views() {
    run_family("matmul", MATMUL_CASES, matmul());
}

#[test]
fn gather_and_index_select_on_random_shapes_and_views() {
    run_family("gather and index_select", INDEX_CASES, indexing());
}

#[test]
fn fused_chains_on_random_shapes_and_views() {
    run_family("fused chains", CHAIN_CASES, chains());
}

#[test]
fn copy_pad_and_cat_on_random_shapes_and_views() {
    run_family("copy, pad and cat", MOVEMENT_CASES, movement());
}

#[test]
fn unfold2d_and_fold2d_on_random_windows_and_views() {
    run_family("unfold2d and fold2d", WINDOW_CASES, windows());
}

// ---------------------------------------------------------------------------
// Regressions: shrunk failing cases, run as they were found

fn plain(rank: usize) -> View {
    View {
        perm: (0..rank).collect(),
        bcast: vec![false; rank],
        slice: None,
    }
}

/// Fold of a rank-6 view sliced with step 2 (shrunk from the window family): the
/// backward of `step` unsqueezed an axis and panicked with "rank 7 exceeds Volta's
/// maximum rank 6" on both devices.
#[test]
fn regression_step_backward_at_the_maximum_rank() {
    let sliced = View {
        slice: Some(Slice {
            axis: 0,
            start: 0,
            step: 2,
        }),
        ..plain(6)
    };
    check(&Case {
        op: Op::Fold2d(Window2d::square(1), [2, 4]),
        inputs: vec![Input {
            dims: vec![1, 2, 4, 1, 1, 1],
            view: sliced,
            values: (0..16).map(|v| v as f32).collect(),
        }],
        fusion: true,
        seed: 0,
    });
    // Σ of every 3rd element along the middle axis of a rank-6 tensor: the gradient
    // is 1 at the elements read and 0 between them.
    let x = Tensor::<(usize,), Cpu>::from_vec_shaped(vec![1.0; 2 * 7 * 2], (28,))
        .unwrap()
        .requires_grad();
    let y = x.raw().reshape(&[1, 2, 1, 7, 2, 1]).step(3, 3);
    let loss = Tensor::<(), Cpu>::try_from_raw(y.reduce_all(ReduceOp::Sum)).unwrap();
    let g = loss.backward().get(&x).unwrap().to_vec();
    let expect: Vec<f32> = (0..28)
        .map(|i| if (i / 2) % 7 % 3 == 0 { 1.0 } else { 0.0 })
        .collect();
    assert_eq!(g, expect);
}

/// `|max(max(erf(x), c1), c2)|` under a log-softmax at x = 0 (shrunk from the chain
/// family): the CPU's erf fit gave erf(0) = −3e-8, the GPU's 0, so `abs` took
/// different sides of its kink and the gradients differed (−0.397 vs 0).
#[test]
fn regression_erf_of_zero_is_zero_on_both_devices() {
    let input = |values: Vec<f32>| Input {
        dims: vec![2],
        view: plain(1),
        values,
    };
    let steps = vec![
        Step::Unary(UnaryOp::Erf),
        Step::Scalar(BinaryOp::Max, -1.338_628_6),
        Step::Scalar(BinaryOp::Max, -1.899_325_8),
        Step::Unary(UnaryOp::Abs),
    ];
    for fusion in [true, false] {
        check(&Case {
            op: Op::Chain(steps.clone(), Some(RowStep::LogSoftmax(0))),
            inputs: vec![
                input(vec![0.607_577_8, -2.38188]),
                input(vec![0.607_577_8, -2.38188]),
                input(vec![0.0, -2.131_489_8]),
            ],
            fusion,
            seed: 0,
        });
    }
    // erf is odd and exact near 0 on both devices: erf(±0) = ±0, erf(x) ≈ 2x/√π
    // (|x| < 1e-3, the series' range; past it the fit's error is ~2e-7 on the GPU,
    // whose f32 arithmetic cancels in 1 − t·exp(…)).
    let xs = vec![0.0, -0.0, 1e-30, -1e-12, 1e-6, -5e-4, 9e-4];
    let cpu = RawTensor::<Cpu, f32>::from_vec(xs.clone(), &[7]).unary(UnaryOp::Erf);
    let gpu = RawTensor::<Gpu, f32>::from_vec(xs.clone(), &[7]).unary(UnaryOp::Erf);
    for (x, (c, g)) in xs.iter().zip(cpu.to_vec().iter().zip(gpu.to_vec())) {
        let expect = 2.0 / std::f64::consts::PI.sqrt() * *x as f64;
        for (device, v) in [("cpu", *c), ("gpu", g)] {
            assert_eq!(
                v.is_sign_negative(),
                x.is_sign_negative(),
                "{device} erf({x}) = {v}"
            );
            let err = (v as f64 - expect).abs();
            assert!(
                err <= 1e-6 * x.abs() as f64,
                "{device} erf({x}) = {v}, expected ≈ {expect}"
            );
        }
    }
}
