//! The backward pass: a topological walk of the graph and the rule of every op.
use super::{Gradients, Op, no_grad};
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::{Scalar, Shape};
use crate::tensor::{RawTensor, Tensor, TensorId};
use std::collections::{BinaryHeap, HashMap, HashSet};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

type T<D, E> = RawTensor<D, E>;

// `Tensor::backward` is defined here rather than beside the other tensor
// methods: the tensor layer stays below autograd, which walks its graph.
impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Computes the gradient of this scalar with respect to every tracked tensor it
    /// depends on. Consumes the loss: the graph is freed once no tensor needs it.
    ///
    /// Calling it on a non-scalar tensor is a compile error.
    pub fn backward(self) -> Gradients<D, E>
    where
        S: Scalar,
    {
        backward(self.into_raw(), Keep::Release, &mut |_, _| {})
    }

    /// [`backward`](Self::backward) that keeps the values the graph's ops saved,
    /// so that another backward pass may go through the same graph (PyTorch's
    /// `retain_graph=True`); its gradients add to this one's where the caller
    /// adds them. Costs the memory those values hold until the graph is dropped.
    pub fn backward_retain_graph(&self) -> Gradients<D, E>
    where
        S: Scalar,
    {
        backward(self.raw().clone(), Keep::Retain, &mut |_, _| {})
    }
}
impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// The gradient of this one-element tensor with respect to every tracked leaf it
    /// depends on: [`Tensor::backward`] for code that knows shapes only at run time.
    ///
    /// # Panics
    /// When the tensor has more than one element (check first: a typed tensor's
    /// `backward` makes that a compile error).
    pub fn backward(self) -> Gradients<D, E> {
        assert_eq!(
            self.layout().numel(),
            1,
            "backward() needs a one-element tensor, got dims {:?}",
            self.dims()
        );
        backward(self, Keep::Release, &mut |_, _| {})
    }

    /// [`backward`](Self::backward) keeping the values the graph's ops saved
    /// ([`Tensor::backward_retain_graph`]).
    ///
    /// # Panics
    /// As [`backward`](Self::backward).
    pub fn backward_retain_graph(&self) -> Gradients<D, E> {
        assert_eq!(
            self.layout().numel(),
            1,
            "backward_retain_graph() needs a one-element tensor, got dims {:?}",
            self.dims()
        );
        backward(self.clone(), Keep::Retain, &mut |_, _| {})
    }

    /// [`backward`](Self::backward), calling `on_leaf(id, grad)` as soon as the
    /// gradient of each tracked leaf is complete (every op that used the leaf has
    /// passed its gradient back), leaves closest to the loss first. On the GPU the
    /// gradient may still be computing: reading it there waits for it, while the
    /// walk goes on recording the gradients of earlier layers. Data-parallel
    /// training starts each bucket's all-reduce from here.
    pub fn backward_with(
        self,
        on_leaf: &mut dyn FnMut(TensorId, &RawTensor<D, E>),
    ) -> Gradients<D, E> {
        assert_eq!(
            self.layout().numel(),
            1,
            "backward_with() needs a one-element tensor, got dims {:?}",
            self.dims()
        );
        backward(self, Keep::Release, on_leaf)
    }
}

/// Each input of an op, with its gradient.
type InputGrads<'a, D, E> = Vec<(&'a T<D, E>, T<D, E>)>;

/// Gradients of the scalar `root` with respect to every tracked leaf.
/// How the panic of a backward pass that reaches an op an earlier pass released
/// begins (the Python bindings raise `RuntimeError` for it, as PyTorch does).
pub const GRAPH_RELEASED: &str =
    "backward: the graph reaches a tensor whose op an earlier backward pass has run and released";

/// What a backward pass does with the values the ops it runs saved.
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    /// Releases them (the default, as PyTorch's).
    Release,
    /// Keeps them for another pass (`retain_graph`).
    Retain,
}

fn backward<D: Backend<E>, E: Float>(
    root: T<D, E>,
    keep: Keep,
    on_leaf: &mut dyn FnMut(TensorId, &T<D, E>),
) -> Gradients<D, E> {
    let _guard = no_grad(); // the backward pass builds no graph of its own
    let _backward = super::anomaly::BackwardGuard::enter();
    let mut grads = Gradients::new();
    if !root.is_tracked() {
        return grads;
    }
    // How many ops still have to pass a gradient to each node: a node runs once
    // its last user has, and a leaf's gradient is then whole.
    let mut users: HashMap<TensorId, usize> = HashMap::new();
    for node in reachable(&root) {
        if let Some(op) = node.op() {
            for input in op.as_ref().expect("checked by `reachable`").inputs() {
                if input.is_tracked() {
                    *users.entry(input.id()).or_default() += 1;
                }
            }
        }
    }
    grads.add_raw(root.id(), T::full_like_dims(root.dims(), E::ONE));
    let mut leaf_grads = Gradients::new();
    // Of the nodes whose users have all run, the one created last goes first
    // (ids grow with creation), as PyTorch's engine orders its ready queue: the
    // walk retraces the forward pass backwards, and a layer's parameters (the
    // views of a weight included) are finished right after the layer, not when a
    // depth-first order happens to reach them. Data-parallel training starts
    // each bucket's all-reduce from `on_leaf`.
    let mut ready = BinaryHeap::from([Ready(root)]);
    let mut slices = Slices::default();
    // Leaves finished by the node before this one (`finished`) and the one
    // before that (`older`). Their gradients may still be deferred sums over
    // activation-sized operands (a bias's gradient summed from the layer's
    // output gradient, a weight's from split-K partials). They are computed two
    // nodes later, not when the optimiser first reads them, after the whole
    // pass has held those operands; not sooner either: a bias's broadcast runs
    // just before the layer's product, which then records the output gradient
    // that the bias's sum reads, rather than the sum computing it a second time.
    let mut finished: Vec<TensorId> = Vec::new();
    let mut older: Vec<TensorId> = Vec::new();
    while let Some(Ready(node)) = ready.pop() {
        compute_finished(&leaf_grads, &mut older);
        std::mem::swap(&mut older, &mut finished);
        let g = slices.take(&mut grads, node.id());
        // Taken: what the op saved for its rule goes once the rule has run.
        let Some(Some(taken)) = node.take_op() else {
            // Only the root is a leaf here; the others are finished below.
            if let Some(g) = g {
                on_leaf(node.id(), &g);
                leaf_grads.add_raw(node.id(), g);
            }
            continue;
        };
        let op = &taken;
        // A node no gradient reached still counts as run for its inputs.
        let passed = match (op, &g) {
            (Op::Narrow(x, axis, start), Some(g)) if x.is_tracked() => {
                check_anomaly(op, &node, 0, g);
                slices.add(x, *axis, *start, g.clone());
                Vec::new()
            }
            _ => g
                .as_ref()
                .map_or_else(Vec::new, |g| input_grads(op, &node, g)),
        };
        // Handed on whole to several inputs (a residual's add): computed once,
        // where the device defers it.
        if let Some(g) = &g {
            let same =
                |p: &T<D, E>| <D as crate::backend::Memory<E>>::same_memory(p.buffer(), g.buffer());
            if passed.iter().filter(|(_, p)| same(p)).count() > 1 {
                <D as crate::backend::Memory<E>>::settle_gradient(g.buffer());
            }
        }
        for (input, grad) in passed {
            // Rules skip untracked inputs: name the input by its place in the op.
            let k = op.inputs().iter().position(|i| i.id() == input.id());
            check_anomaly(op, &node, k.unwrap_or(0), &grad);
            if input.is_tracked() {
                grads.add_raw(input.id(), grad);
            }
        }
        for input in op.inputs() {
            if !input.is_tracked() {
                continue;
            }
            let left = users.get_mut(&input.id()).expect("counted above");
            *left -= 1;
            if *left > 0 {
                continue;
            }
            if input.op().is_some() {
                ready.push(Ready(input.clone()));
            } else if let Some(g) = slices.take(&mut grads, input.id()) {
                on_leaf(input.id(), &g);
                leaf_grads.add_raw(input.id(), g);
                finished.push(input.id());
            }
        }
        // An op that saved values drops them here (unless retained); one that
        // saved none stays.
        if keep == Keep::Retain || !taken.saves_values() {
            node.restore_op(taken);
        }
    }
    compute_finished(&leaf_grads, &mut older);
    compute_finished(&leaf_grads, &mut finished);
    leaf_grads
}

/// Computes the gradients of the leaves `finished` names if their device deferred
/// them (see `backward`), and empties the list.
fn compute_finished<D: Backend<E>, E: Float>(
    grads: &Gradients<D, E>,
    finished: &mut Vec<TensorId>,
) {
    for id in finished.drain(..) {
        if let Some(g) = grads.get_raw(id) {
            <D as crate::backend::Memory<E>>::compute_deferred(g.buffer());
        }
    }
}

/// With `detect_anomaly` on, panics at the first NaN or infinity in `grad`, the
/// gradient `op`'s backward produced for its input `k`.
fn check_anomaly<D: Backend<E>, E: Float>(op: &Op<D, E>, node: &T<D, E>, k: usize, grad: &T<D, E>) {
    if super::anomaly::enabled()
        && let Some((i, v)) = super::anomaly::first_bad(&grad.to_vec())
    {
        panic!(
            "detect_anomaly: the backward of `{}` (whose forward ran at {}) \
             produced {v:?} in the gradient of its input {k} (element {i}, \
             dims {:?})",
            op.name(),
            node.site(),
            grad.dims()
        );
    }
}

/// Gradients that arrive as slices of their tensor (the backward of `narrow`),
/// kept apart until the tensor's gradient is taken. Slices that tile one axis
/// are then concatenated: a fused projection's weight, sliced into queries, keys
/// and values, gets one copy per slice instead of each slice padded with zeros
/// to the whole weight and the three added. Other slices are padded and added.
struct Slices<D: Backend<E>, E: Float> {
    /// Per tensor: its slices' gradients.
    of: HashMap<TensorId, Sliced<D, E>>,
}

/// The slices' gradients of one tensor of `dims`.
type Sliced<D, E> = (Vec<usize>, Vec<Slice<D, E>>);

/// A slice's gradient: the axis, the slice's start along it, the gradient.
type Slice<D, E> = (usize, usize, T<D, E>);

impl<D: Backend<E>, E: Float> Default for Slices<D, E> {
    fn default() -> Self {
        Slices { of: HashMap::new() }
    }
}

impl<D: Backend<E>, E: Float> Slices<D, E> {
    /// `g`, the gradient of `x`'s slice from `start` along `axis`.
    fn add(&mut self, x: &T<D, E>, axis: usize, start: usize, g: T<D, E>) {
        let entry = self
            .of
            .entry(x.id())
            .or_insert_with(|| (x.dims().to_vec(), Vec::new()));
        entry.1.push((axis, start, g));
    }

    /// The whole gradient of tensor `id`: what `grads` holds plus its slices.
    fn take(&mut self, grads: &mut Gradients<D, E>, id: TensorId) -> Option<T<D, E>> {
        let whole = grads.take_raw(id);
        let Some((dims, mut parts)) = self.of.remove(&id) else {
            return whole;
        };
        parts.sort_by_key(|&(_, start, _)| start);
        let axis = parts[0].0;
        let mut end = 0;
        let tiles = parts.iter().all(|(a, start, g)| {
            let next = *a == axis && *start == end;
            end += g.dims()[axis];
            next
        }) && end == dims[axis];
        let sliced = if tiles {
            let parts: Vec<T<D, E>> = parts.into_iter().map(|(_, _, g)| g).collect();
            T::cat(&parts, axis)
        } else {
            parts
                .into_iter()
                .map(|(axis, start, g)| {
                    let after = dims[axis] - start - g.dims()[axis];
                    g.pad_axis(axis, start, after, E::ZERO)
                })
                .reduce(|a, b| a.binary(BinaryOp::Add, &b))
                .expect("at least one slice")
        };
        Some(match whole {
            Some(w) => w.binary(BinaryOp::Add, &sliced),
            None => sliced,
        })
    }
}

/// The tracked nodes reachable from `root` (iterative: deep graphs cannot
/// overflow the stack).
fn reachable<D: Backend<E>, E: Float>(root: &T<D, E>) -> Vec<T<D, E>> {
    let mut seen: HashSet<TensorId> = HashSet::from([root.id()]);
    let mut stack = vec![root.clone()];
    let mut nodes = Vec::new();
    while let Some(node) = stack.pop() {
        if let Some(op) = node.op() {
            let Some(op) = op.as_ref() else {
                panic!(
                    "{GRAPH_RELEASED} (dims {:?}, from {}): a graph carries gradients once, \
                     as in PyTorch without `retain_graph`. Add the losses and call backward \
                     once, call `backward_retain_graph` for all but the last, or compute the \
                     shared part again for each.",
                    node.dims(),
                    node.site()
                )
            };
            for input in op.inputs() {
                if input.is_tracked() && seen.insert(input.id()) {
                    stack.push(input.clone());
                }
            }
        }
        nodes.push(node);
    }
    nodes
}

/// A node whose users have all passed their gradients, ordered by creation.
struct Ready<D: Backend<E>, E: Float>(T<D, E>);

impl<D: Backend<E>, E: Float> PartialEq for Ready<D, E> {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}
impl<D: Backend<E>, E: Float> Eq for Ready<D, E> {}
impl<D: Backend<E>, E: Float> PartialOrd for Ready<D, E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<D: Backend<E>, E: Float> Ord for Ready<D, E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.id().cmp(&other.0.id())
    }
}

/// The backward rule of each op: gradients of its inputs given the output `out` and
/// the gradient `g` flowing into it.
fn input_grads<'a, D: Backend<E>, E: Float>(
    op: &'a Op<D, E>,
    out: &T<D, E>,
    g: &T<D, E>,
) -> InputGrads<'a, D, E> {
    let c = |v: f64| E::from_f64(v);
    match op {
        Op::Unary(x, u) => vec![(x, unary_grad(*u, x, out, g))],
        Op::Binary(a, b, op) => binary_grads(*op, a, b, out, g),
        Op::BinaryScalar(x, op, s) => {
            let s = *s;
            let gx = match op {
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mod => g.clone(),
                BinaryOp::Mul => g.scalar(BinaryOp::Mul, s),
                BinaryOp::Div => g.scalar(BinaryOp::Div, s),
                BinaryOp::Pow => g.binary(
                    BinaryOp::Mul,
                    &x.scalar(BinaryOp::Pow, s - E::ONE).scalar(BinaryOp::Mul, s),
                ),
                BinaryOp::Max | BinaryOp::Min => {
                    let (wins, tie) = (
                        if *op == BinaryOp::Max {
                            BinaryOp::Gt
                        } else {
                            BinaryOp::Lt
                        },
                        BinaryOp::Eq,
                    );
                    let mask = x.scalar(wins, s).binary(
                        BinaryOp::Add,
                        &x.scalar(tie, s).scalar(BinaryOp::Mul, c(0.5)),
                    );
                    g.binary(BinaryOp::Mul, &mask)
                }
                _ => unreachable!("comparisons record no op"),
            };
            vec![(x, gx)]
        }
        Op::Softmax(x, axis, log) => {
            let dims = x.dims();
            let gx = if *log {
                // y = x − lse(x): ∂x = g − softmax(x) · Σ g
                let sum = g.reduce(ReduceOp::Sum, *axis).expand(dims);
                g.binary(
                    BinaryOp::Sub,
                    &out.unary(UnaryOp::Exp).binary(BinaryOp::Mul, &sum),
                )
            } else {
                // ∂x = y · (g − Σ g·y)
                let dot = g
                    .binary(BinaryOp::Mul, out)
                    .reduce(ReduceOp::Sum, *axis)
                    .expand(dims);
                out.binary(BinaryOp::Mul, &g.binary(BinaryOp::Sub, &dot))
            };
            vec![(x, gx)]
        }
        Op::Reduce(x, op, axis) => {
            let ge = g.expand(x.dims());
            let gx = match op {
                ReduceOp::Sum => ge,
                ReduceOp::Max | ReduceOp::Min => {
                    // Share the gradient evenly among the elements equal to the extreme.
                    let mask = x.binary(BinaryOp::Eq, &out.expand(x.dims()));
                    let count = mask.reduce(ReduceOp::Sum, *axis).expand(x.dims());
                    ge.binary(BinaryOp::Mul, &mask)
                        .binary(BinaryOp::Div, &count)
                }
            };
            vec![(x, gx)]
        }
        Op::MatMul(a, b) => product_grads(a, b, g),
        Op::MatMulAdd(a, b, c) => {
            let mut grads = product_grads(a, b, g);
            grads.push((c, g.clone()));
            grads
        }
        Op::Permute(x, perm) => {
            let mut inverse = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                inverse[p] = i;
            }
            vec![(x, g.permute(&inverse))]
        }
        Op::Expand(x) => vec![(x, g.sum_to(x.dims()))],
        Op::Reshape(x) => vec![(x, g.reshape(x.dims()))],
        Op::Narrow(x, axis, start) => {
            let after = x.dims()[*axis] - start - g.dims()[*axis];
            vec![(x, g.pad_axis(*axis, *start, after, E::ZERO))]
        }
        Op::Step(x, axis, step) => {
            // Interleave zeros: (pre, n, post) → (pre, n, 1, post) → pad to step →
            // merge → trim. The axes around `axis` are merged first, so that the extra
            // axis fits a tensor of the maximum rank too.
            let (axis, step) = (*axis, *step);
            let n = g.dims()[axis];
            let pre: usize = g.dims()[..axis].iter().product();
            let post: usize = g.dims()[axis + 1..].iter().product();
            let spread = g
                .reshape(&[pre, n, 1, post])
                .pad_axis(2, 0, step - 1, E::ZERO);
            let trimmed = spread
                .reshape(&[pre, n * step, post])
                .narrow(1, 0, x.dims()[axis]);
            vec![(x, trimmed.reshape(x.dims()))]
        }
        Op::Pad(x, pads) => {
            let gx = pads
                .iter()
                .enumerate()
                .fold(g.clone(), |t, (axis, &(before, _))| {
                    t.narrow(axis, before, x.dims()[axis])
                });
            vec![(x, gx)]
        }
        Op::Cat(parts, axis) => {
            let mut start = 0;
            parts
                .iter()
                .map(|p| {
                    let len = p.dims()[*axis];
                    start += len;
                    (p, g.narrow(*axis, start - len, len))
                })
                .collect()
        }
        Op::Select(cond, a, b) => {
            let zero = T::full_like_dims(g.dims(), E::ZERO);
            vec![
                (a, T::select(cond, g, &zero)),
                (b, T::select(cond, &zero, g)),
            ]
        }
        Op::Gather(x, axis, idx) => vec![(x, g.scatter_add(x.dims(), *axis, idx))],
        // The two window ops are each other's adjoint; padding taps get no gradient.
        Op::Unfold2d(x, win) => {
            let hw = [x.dims()[2], x.dims()[3]];
            vec![(x, g.fold2d(*win, hw))]
        }
        Op::Fold2d(cols, win) => vec![(cols, g.unfold2d(*win, E::ZERO))],
        Op::Normalize(x, axis, center, eps) => {
            // One backend kernel: the statistics recomputed from x, the gradient's
            // two row means, then the row.
            let dx = D::normalize_grad(x.view(), g.view(), *axis, *center, *eps);
            vec![(x, T::leaf(dx, Layout::contiguous(x.dims())))]
        }
        Op::Attention { q, k, v, lse, spec } => {
            // Σ_c g·out per query row: the softmax backward's row term.
            let delta = g.binary(BinaryOp::Mul, out).reduce(ReduceOp::Sum, 3);
            // Laid out as the backend placed them: in one buffer where q, k and
            // v are the heads of one projection (their concatenation then costs
            // nothing, see `Tensor::cat`).
            let [dq, dk, dv] = D::attention_backward(
                q.view(),
                k.view(),
                v.view(),
                g.view(),
                lse.view(),
                delta.view(),
                spec,
            )
            .map(|(buf, layout)| T::leaf(buf, layout));
            vec![(q, dq), (k, dk), (v, dv)]
        }
        Op::Custom(inputs, rule) => inputs.iter().zip(rule(inputs, g)).collect(),
    }
}

/// The gradients of a product's tracked operands. Each is laid out like its
/// operand: a transposed operand (a linear layer's Wᵀ) gets (gᵀ·a)ᵀ rather than
/// aᵀ·g, the same product written in W's own order, so an optimiser reads it
/// without a copy. Only tracked operands get one (the other's values may be
/// gone: see `Op::release_unread`).
fn product_grads<'a, D: Backend<E>, E: Float>(
    a: &'a T<D, E>,
    b: &'a T<D, E>,
    g: &T<D, E>,
) -> InputGrads<'a, D, E> {
    let mut grads = Vec::new();
    if a.is_tracked() {
        let ga = if transposed(a.layout()) {
            b.bmm(&g.transpose_last()).transpose_last()
        } else {
            g.bmm(&b.transpose_last())
        };
        grads.push((a, ga));
    }
    if b.is_tracked() {
        let gb = if transposed(b.layout()) {
            g.transpose_last().bmm(a).transpose_last()
        } else {
            a.transpose_last().bmm(g)
        };
        grads.push((b, gb));
    }
    grads
}

/// Whether a `(batch, rows, cols)` operand is a transposed view: its rows are
/// adjacent in memory and its columns are not.
fn transposed(l: &Layout) -> bool {
    let r = l.dims.len();
    l.dims[r - 2] > 1 && l.dims[r - 1] > 1 && l.strides[r - 2] == 1 && l.strides[r - 1] != 1
}

fn unary_grad<D: Backend<E>, E: Float>(
    op: UnaryOp,
    x: &T<D, E>,
    y: &T<D, E>,
    g: &T<D, E>,
) -> T<D, E> {
    let c = |v: f64| E::from_f64(v);
    let mul = |a: &T<D, E>, b: &T<D, E>| a.binary(BinaryOp::Mul, b);
    let local = match op {
        UnaryOp::Neg => return g.unary(UnaryOp::Neg),
        UnaryOp::Exp => y.clone(),
        UnaryOp::Log => x.unary(UnaryOp::Recip),
        UnaryOp::Exp2 => y.scalar(BinaryOp::Mul, c(std::f64::consts::LN_2)),
        UnaryOp::Log2 => x
            .scalar(BinaryOp::Mul, c(std::f64::consts::LN_2))
            .unary(UnaryOp::Recip),
        UnaryOp::Sqrt => y.unary(UnaryOp::Recip).scalar(BinaryOp::Mul, c(0.5)),
        UnaryOp::Recip => mul(y, y).unary(UnaryOp::Neg),
        UnaryOp::Relu => x.scalar(BinaryOp::Gt, E::ZERO),
        UnaryOp::Sigmoid => mul(y, &y.unary(UnaryOp::Neg).scalar(BinaryOp::Add, E::ONE)),
        UnaryOp::Tanh => mul(y, y).unary(UnaryOp::Neg).scalar(BinaryOp::Add, E::ONE),
        UnaryOp::Sin => x.unary(UnaryOp::Cos),
        UnaryOp::Cos => x.unary(UnaryOp::Sin).unary(UnaryOp::Neg),
        UnaryOp::Abs => x
            .scalar(BinaryOp::Gt, E::ZERO)
            .binary(BinaryOp::Sub, &x.scalar(BinaryOp::Lt, E::ZERO)),
        // Φ(x) + x·φ(x), one op (one pass on the CPU)
        UnaryOp::Gelu => x.unary(UnaryOp::GeluGrad),
        UnaryOp::GeluGrad => {
            // φ(x)·(2 − x²)
            let xx = mul(x, x);
            let pdf = xx
                .scalar(BinaryOp::Mul, c(-0.5))
                .unary(UnaryOp::Exp)
                .scalar(BinaryOp::Mul, c(1.0 / (2.0 * std::f64::consts::PI).sqrt()));
            mul(&pdf, &xx.unary(UnaryOp::Neg).scalar(BinaryOp::Add, c(2.0)))
        }
        UnaryOp::Silu => {
            // σ(x)·(1 + x·(1 − σ(x)))
            let s = x.unary(UnaryOp::Sigmoid);
            let one_minus = s.unary(UnaryOp::Neg).scalar(BinaryOp::Add, E::ONE);
            mul(&s, &mul(x, &one_minus).scalar(BinaryOp::Add, E::ONE))
        }
        UnaryOp::Floor => T::full_like_dims(x.dims(), E::ZERO),
        UnaryOp::Erf => mul(x, x)
            .unary(UnaryOp::Neg)
            .unary(UnaryOp::Exp)
            .scalar(BinaryOp::Mul, c(2.0 / std::f64::consts::PI.sqrt())),
    };
    mul(g, &local)
}

fn binary_grads<'a, D: Backend<E>, E: Float>(
    op: BinaryOp,
    a: &'a T<D, E>,
    b: &'a T<D, E>,
    out: &T<D, E>,
    g: &T<D, E>,
) -> InputGrads<'a, D, E> {
    let mul = |x: &T<D, E>, y: &T<D, E>| x.binary(BinaryOp::Mul, y);
    let half = E::from_f64(0.5);
    match op {
        BinaryOp::Add => vec![(a, g.clone()), (b, g.clone())],
        BinaryOp::Sub => vec![(a, g.clone()), (b, g.unary(UnaryOp::Neg))],
        // Only tracked factors get one (the other's values may be gone).
        BinaryOp::Mul => [(a, b), (b, a)]
            .into_iter()
            .filter(|(x, _)| x.is_tracked())
            .map(|(x, other)| (x, mul(g, other)))
            .collect(),
        BinaryOp::Div => {
            let ga = g.binary(BinaryOp::Div, b);
            let gb = mul(&ga, out).unary(UnaryOp::Neg);
            vec![(a, ga), (b, gb)]
        }
        BinaryOp::Max | BinaryOp::Min => {
            let wins = if op == BinaryOp::Max {
                BinaryOp::Gt
            } else {
                BinaryOp::Lt
            };
            let tie = a.binary(BinaryOp::Eq, b).scalar(BinaryOp::Mul, half);
            let mask_a = a.binary(wins, b).binary(BinaryOp::Add, &tie);
            let mask_b = b.binary(wins, a).binary(BinaryOp::Add, &tie);
            vec![(a, mul(g, &mask_a)), (b, mul(g, &mask_b))]
        }
        BinaryOp::Mod => {
            let q = a.binary(BinaryOp::Div, b).unary(UnaryOp::Floor);
            vec![(a, g.clone()), (b, mul(g, &q).unary(UnaryOp::Neg))]
        }
        BinaryOp::Pow => {
            // d/da = b·a^(b−1); d/db = a^b·ln a
            let ga = mul(
                g,
                &mul(
                    b,
                    &a.binary(BinaryOp::Pow, &b.scalar(BinaryOp::Sub, E::ONE)),
                ),
            );
            let gb = mul(g, &mul(out, &a.unary(UnaryOp::Log)));
            vec![(a, ga), (b, gb)]
        }
        _ => unreachable!("comparisons record no op"),
    }
}
