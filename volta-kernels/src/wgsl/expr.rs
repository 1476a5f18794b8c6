//! The expression tree of an elementwise kernel: what fusion splices and what
//! pipelines are cached by. It lowers to WGSL through the kernel IR ([`Graph`]).
use super::call::{KernelRef, kernel_modules};
use crate::ir::emit::{self, Lang, Names};
use crate::ir::{Graph, Node, NodeId};
use crate::{ArgKind, BinaryOp, KernelDef, UnaryOp};

/// The value an elementwise kernel computes at one position, as a tree over its
/// inputs and run-time scalars.
///
/// ```
/// use volta_kernels::wgsl::Expr;
/// use volta_kernels::{BinaryOp, UnaryOp};
/// // relu(a * b + c)
/// let e = Expr::input(0)
///     .binary(BinaryOp::Mul, Expr::input(1))
///     .binary(BinaryOp::Add, Expr::input(2))
///     .unary(UnaryOp::Relu);
/// assert_eq!(e.inputs(), 3);
/// assert_eq!(e.to_string(), "relu(((x0 * x1) + x2))");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The element of input `i` at the current position.
    Input(usize),
    /// Run-time scalar `i`: a kernel parameter, so a new value reuses the pipeline.
    Scalar(usize),
    /// A constant, stored as the bits of an `f32` so that trees can be hashed.
    Const(u32),
    /// A unary op.
    Unary(UnaryOp, Box<Expr>),
    /// A binary op.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `cond != 0 ? a : b`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A user kernel's value (`partial: None`) or its partial derivative with respect
    /// to argument `k`, with one expression per argument in declaration order.
    Call {
        /// The kernel (its WGSL functions are emitted into the module).
        kernel: KernelRef,
        /// `None` for the value, `Some(k)` for ∂/∂argument `k`.
        partial: Option<usize>,
        /// The arguments, in declaration order.
        args: Vec<Expr>,
    },
}

impl Expr {
    /// Input `i`.
    pub fn input(i: usize) -> Self {
        Expr::Input(i)
    }
    /// Run-time scalar `i`.
    pub fn scalar(i: usize) -> Self {
        Expr::Scalar(i)
    }
    /// The constant `v`.
    pub fn constant(v: f32) -> Self {
        Expr::Const(v.to_bits())
    }
    /// `op(self)`.
    pub fn unary(self, op: UnaryOp) -> Self {
        Expr::Unary(op, Box::new(self))
    }
    /// `op(self, rhs)`.
    pub fn binary(self, op: BinaryOp, rhs: Expr) -> Self {
        Expr::Binary(op, Box::new(self), Box::new(rhs))
    }
    /// `self != 0 ? a : b`.
    pub fn select(self, a: Expr, b: Expr) -> Self {
        Expr::Select(Box::new(self), Box::new(a), Box::new(b))
    }

    /// `def(args…)` (`partial = None`) or its partial derivative with respect to
    /// argument `k`. Panics if the argument count or `k` does not fit the kernel.
    pub fn call(def: &'static KernelDef, partial: Option<usize>, args: Vec<Expr>) -> Self {
        assert_eq!(
            args.len(),
            def.args.len(),
            "kernel `{}` takes {} arguments",
            def.name,
            def.args.len()
        );
        assert!(
            partial.is_none_or(|k| k < def.args.len()),
            "kernel `{}` has no argument {partial:?}",
            def.name
        );
        Expr::Call {
            kernel: KernelRef(def),
            partial,
            args,
        }
    }

    /// A call of `def` whose tensor arguments are inputs `0, 1, …` and whose scalar
    /// arguments are scalars `0, 1, …`, each in declaration order.
    pub fn call_on_inputs(def: &'static KernelDef, partial: Option<usize>) -> Self {
        let (mut tensors, mut scalars) = (0, 0);
        let args = def
            .args
            .iter()
            .map(|kind| match kind {
                ArgKind::Tensor => {
                    tensors += 1;
                    Expr::input(tensors - 1)
                }
                ArgKind::Scalar => {
                    scalars += 1;
                    Expr::scalar(scalars - 1)
                }
            })
            .collect();
        Expr::call(def, partial, args)
    }

    /// Number of nodes of the tree (a shared sub-tree counts once per use).
    pub fn nodes(&self) -> usize {
        self.fold(0, &|n, _| n + 1)
    }

    /// The tree with every `Input(i)` replaced by `input(i)` and every `Scalar(i)`
    /// by `scalar(i)`: how fusion splices an operand's tree into its consumer.
    pub fn substitute(
        &self,
        input: &dyn Fn(usize) -> Expr,
        scalar: &dyn Fn(usize) -> Expr,
    ) -> Expr {
        let sub = |e: &Expr| Box::new(e.substitute(input, scalar));
        match self {
            Expr::Input(i) => input(*i),
            Expr::Scalar(i) => scalar(*i),
            Expr::Const(bits) => Expr::Const(*bits),
            Expr::Unary(op, x) => Expr::Unary(*op, sub(x)),
            Expr::Binary(op, a, b) => Expr::Binary(*op, sub(a), sub(b)),
            Expr::Select(c, a, b) => Expr::Select(sub(c), sub(a), sub(b)),
            Expr::Call {
                kernel,
                partial,
                args,
            } => Expr::Call {
                kernel: *kernel,
                partial: *partial,
                args: args.iter().map(|a| a.substitute(input, scalar)).collect(),
            },
        }
    }

    /// The user kernels the tree calls, each once.
    pub fn kernels(&self) -> Vec<KernelRef> {
        self.fold(Vec::new(), &|mut ks, e| {
            if let Expr::Call { kernel, .. } = e
                && !ks.contains(kernel)
            {
                ks.push(*kernel);
            }
            ks
        })
    }

    /// Number of inputs the tree reads (one more than the largest input index).
    pub fn inputs(&self) -> usize {
        self.fold(0, &|n, e| match e {
            Expr::Input(i) => n.max(i + 1),
            _ => n,
        })
    }
    /// Number of run-time scalars the tree reads.
    pub fn scalars(&self) -> usize {
        self.fold(0, &|n, e| match e {
            Expr::Scalar(i) => n.max(i + 1),
            _ => n,
        })
    }
    /// Whether the tree calls `volta_erf`, directly or inside a user kernel's WGSL
    /// (so the helper must be emitted).
    pub fn uses_erf(&self) -> bool {
        self.fold(false, &|u, e| {
            u || match e {
                Expr::Unary(UnaryOp::Erf | UnaryOp::Gelu | UnaryOp::GeluGrad, _) => true,
                Expr::Call { kernel, .. } => kernel_modules(&[*kernel]).contains("volta_erf("),
                _ => false,
            }
        })
    }
    /// The WGSL a kernel computing this tree needs before its own code: the
    /// `volta_erf` helper when used, and the functions of the user kernels called.
    pub fn preamble(&self) -> String {
        let mut w = String::new();
        if self.uses_erf() {
            w.push_str(super::VOLTA_ERF);
        }
        w.push_str(&kernel_modules(&self.kernels()));
        w
    }

    /// Whether the tree is only a load or a scalar (no arithmetic), so it is valid
    /// for any element type.
    pub fn is_plain(&self) -> bool {
        matches!(self, Expr::Input(_) | Expr::Scalar(_))
    }

    /// Whether the tree reads some `Input(i)` with `pred(i)`.
    pub fn any_input(&self, pred: impl Fn(usize) -> bool) -> bool {
        self.fold(false, &|any, e| {
            any || matches!(e, Expr::Input(i) if pred(*i))
        })
    }

    fn fold<T>(&self, acc: T, f: &impl Fn(T, &Expr) -> T) -> T {
        let acc = f(acc, self);
        match self {
            Expr::Input(_) | Expr::Scalar(_) | Expr::Const(_) => acc,
            Expr::Unary(_, x) => x.fold(acc, f),
            Expr::Binary(_, a, b) => b.fold(a.fold(acc, f), f),
            Expr::Select(c, a, b) => b.fold(a.fold(c.fold(acc, f), f), f),
            Expr::Call { args, .. } => args.iter().fold(acc, |acc, a| a.fold(acc, f)),
        }
    }

    /// Adds the tree to `g` (an [`exact`](Graph::exact) graph, for generated
    /// kernels) and returns its root; equal sub-trees (a fused operand used twice, as
    /// in `x * x`) become one node. A call's callee is its index in `callees`, where
    /// kernels not seen before are appended.
    pub fn to_graph(&self, g: &mut Graph, callees: &mut Vec<KernelRef>) -> NodeId {
        let index = |i: usize| u16::try_from(i).expect("an elementwise kernel has < 65536 inputs");
        match self {
            Expr::Input(i) => g.input(index(*i)),
            Expr::Scalar(i) => g.param(index(*i)),
            Expr::Const(bits) => g.lit(f32::from_bits(*bits)),
            Expr::Unary(op, x) => {
                let x = x.to_graph(g, callees);
                g.unary(*op, x)
            }
            Expr::Binary(op, a, b) => {
                let a = a.to_graph(g, callees);
                let b = b.to_graph(g, callees);
                g.binary(*op, a, b)
            }
            Expr::Select(c, a, b) => {
                let c = c.to_graph(g, callees);
                let a = a.to_graph(g, callees);
                let b = b.to_graph(g, callees);
                g.select(c, a, b)
            }
            Expr::Call {
                kernel,
                partial,
                args,
            } => {
                let args = args.iter().map(|a| a.to_graph(g, callees)).collect();
                let callee = match callees.iter().position(|k| k == kernel) {
                    Some(c) => c,
                    None => {
                        callees.push(*kernel);
                        callees.len() - 1
                    }
                };
                let call = g.call(index(callee), args);
                let Node::Call(site) = g.node(call) else {
                    unreachable!("Graph::call returns a call node")
                };
                match partial {
                    None => call,
                    Some(k) => g.call_partial(site, index(*k)),
                }
            }
        }
    }
}

/// An expression turned into an exact [`Graph`] once, then printed as WGSL once per
/// place it is needed (each unit and lane of an elementwise kernel, each pass of a
/// row kernel) with that place's names for the inputs.
pub(crate) struct Printer {
    graph: Graph,
    root: NodeId,
    callees: Vec<KernelRef>,
}

impl Printer {
    pub fn new(expr: &Expr) -> Self {
        let mut graph = Graph::exact();
        let mut callees = Vec::new();
        let root = expr.to_graph(&mut graph, &mut callees);
        Printer {
            graph,
            root,
            callees,
        }
    }

    /// Appends one `let` per needed node to `w` (each line after `indent`, names
    /// after `prefix`) and returns the expression of the value.
    pub fn print(
        &self,
        w: &mut String,
        indent: &str,
        prefix: &str,
        input: &dyn Fn(u16) -> String,
        param: &dyn Fn(u16) -> String,
    ) -> String {
        let callee = |c: u16, partial: Option<u16>| {
            self.callees[c as usize].0.wgsl_fn(partial.map(usize::from))
        };
        let names = Names {
            input,
            param,
            callee: &callee,
        };
        let body = emit::body(&self.graph, &[self.root], Lang::Wgsl, prefix, &names);
        for line in body.code.lines() {
            w.push_str(indent);
            w.push_str(line);
            w.push('\n');
        }
        body.outputs.into_iter().next().expect("one output")
    }
}

impl Expr {
    /// [`Display`](std::fmt::Display)'s form with input `i` named `input(i)`
    /// (a profile names drawn inputs `u{i}`).
    pub fn display_with(&self, input: &dyn Fn(usize) -> String) -> String {
        let sub = |e: &Expr| e.display_with(input);
        match self {
            Expr::Input(i) => input(*i),
            Expr::Scalar(j) => format!("s{j}"),
            Expr::Const(bits) => format!("{}", f32::from_bits(*bits)),
            Expr::Unary(op, x) => format!("{}({})", format!("{op:?}").to_lowercase(), sub(x)),
            Expr::Binary(op, a, b) => {
                let sym = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    BinaryOp::Div => "/",
                    _ => {
                        let name = format!("{op:?}").to_lowercase();
                        return format!("{name}({}, {})", sub(a), sub(b));
                    }
                };
                format!("({} {sym} {})", sub(a), sub(b))
            }
            Expr::Select(c, a, b) => format!("select({}, {}, {})", sub(c), sub(a), sub(b)),
            Expr::Call {
                kernel,
                partial,
                args,
            } => {
                let args: Vec<String> = args.iter().map(sub).collect();
                match partial {
                    None => format!("{}({})", kernel.0.name, args.join(", ")),
                    Some(k) => format!("d{}/d{k}({})", kernel.0.name, args.join(", ")),
                }
            }
        }
    }
}

/// A compact, readable form for profiles and logs: `relu(x0 * x1 + x2)`, inputs as
/// `x{i}`, run-time scalars as `s{j}`, user kernels by name.
impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.display_with(&|i| format!("x{i}")))
    }
}
