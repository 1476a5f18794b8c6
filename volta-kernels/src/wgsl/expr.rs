//! The expression tree of an elementwise kernel and its lowering to WGSL statements.
use crate::{BinaryOp, UnaryOp};
use std::fmt::Write;

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
    /// Whether the tree calls `volta_erf` (so the helper must be emitted).
    pub fn uses_erf(&self) -> bool {
        self.fold(false, &|u, e| {
            u || matches!(e, Expr::Unary(UnaryOp::Erf | UnaryOp::Gelu, _))
        })
    }
    /// Whether the tree is only a load or a scalar (no arithmetic), so it is valid
    /// for any element type.
    pub fn is_plain(&self) -> bool {
        matches!(self, Expr::Input(_) | Expr::Scalar(_))
    }

    fn fold<T>(&self, acc: T, f: &impl Fn(T, &Expr) -> T) -> T {
        let acc = f(acc, self);
        match self {
            Expr::Input(_) | Expr::Scalar(_) | Expr::Const(_) => acc,
            Expr::Unary(_, x) => x.fold(acc, f),
            Expr::Binary(_, a, b) => b.fold(a.fold(acc, f), f),
            Expr::Select(c, a, b) => b.fold(a.fold(c.fold(acc, f), f), f),
        }
    }

    /// Appends one `let` statement per node to `body` and returns the name of the
    /// value; `input(i)` and `scalar(i)` name the leaves.
    pub fn lower(
        &self,
        body: &mut String,
        next: &mut usize,
        input: &dyn Fn(usize) -> String,
        scalar: &dyn Fn(usize) -> String,
    ) -> String {
        let value = match self {
            Expr::Input(i) => return input(*i),
            Expr::Scalar(i) => return scalar(*i),
            Expr::Const(bits) => return wgsl_f32(f32::from_bits(*bits)),
            Expr::Unary(op, x) => {
                let x = x.lower(body, next, input, scalar);
                op.wgsl(&x)
            }
            Expr::Binary(op, a, b) => {
                let a = a.lower(body, next, input, scalar);
                let b = b.lower(body, next, input, scalar);
                op.wgsl(&a, &b)
            }
            Expr::Select(c, a, b) => {
                let c = c.lower(body, next, input, scalar);
                let a = a.lower(body, next, input, scalar);
                let b = b.lower(body, next, input, scalar);
                format!("select({b}, {a}, {c} != 0.0)")
            }
        };
        let name = format!("t{next}");
        *next += 1;
        writeln!(body, "    let {name} = {value};").expect("writing to a String");
        name
    }
}

/// An `f32` literal WGSL accepts (finite values only; infinities are built from bits).
fn wgsl_f32(v: f32) -> String {
    if v.is_finite() {
        format!("f32({v:?})")
    } else {
        format!("bitcast<f32>({}u)", v.to_bits())
    }
}
