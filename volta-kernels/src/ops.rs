//! The elementwise and reduction ops, each with its scalar meaning and WGSL form.
use crate::Float;

/// An op on one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// -x
    Neg,
    /// e^x
    Exp,
    /// ln x
    Log,
    /// 2^x
    Exp2,
    /// log2 x
    Log2,
    /// √x
    Sqrt,
    /// 1/x
    Recip,
    /// max(x, 0)
    Relu,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// tanh x
    Tanh,
    /// sin x
    Sin,
    /// cos x
    Cos,
    /// |x|
    Abs,
    /// x·Φ(x), the exact (erf) GELU
    Gelu,
    /// x·sigmoid(x)
    Silu,
    /// ⌊x⌋
    Floor,
    /// the error function erf x
    Erf,
    /// Φ(x) + x·φ(x): GELU's derivative, so that its backward is one op
    GeluGrad,
}

impl UnaryOp {
    /// Every unary op, for tests and code generators.
    pub const ALL: [UnaryOp; 18] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Exp2,
        UnaryOp::Log2,
        UnaryOp::Sqrt,
        UnaryOp::Recip,
        UnaryOp::Relu,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Abs,
        UnaryOp::Gelu,
        UnaryOp::Silu,
        UnaryOp::Floor,
        UnaryOp::Erf,
        UnaryOp::GeluGrad,
    ];

    /// Applies the op to one value.
    #[inline(always)]
    pub fn eval<T: Float>(self, x: T) -> T {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Recip => T::ONE / x,
            UnaryOp::Relu => {
                if x > T::ZERO {
                    x
                } else {
                    T::ZERO
                }
            }
            UnaryOp::Sigmoid => T::ONE / (T::ONE + (-x).exp()),
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Sin => x.sin(),
            UnaryOp::Cos => x.cos(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Gelu => {
                let half = T::from_f64(0.5);
                half * x * (T::ONE + (x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf())
            }
            UnaryOp::Silu => x / (T::ONE + (-x).exp()),
            UnaryOp::Floor => x.floor(),
            UnaryOp::Erf => x.erf(),
            UnaryOp::GeluGrad => {
                let half = T::from_f64(0.5);
                let cdf =
                    half * (T::ONE + (x * T::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf());
                let pdf = (-half * x * x).exp() * T::from_f64(0.398_942_280_401_432_7);
                cdf + x * pdf
            }
        }
    }

    /// The WGSL expression computing the op on the expression `x` (of type f32).
    pub fn wgsl(self, x: &str) -> String {
        match self {
            UnaryOp::Neg => format!("(-{x})"),
            UnaryOp::Exp => format!("exp({x})"),
            UnaryOp::Log => format!("log({x})"),
            UnaryOp::Exp2 => format!("exp2({x})"),
            UnaryOp::Log2 => format!("log2({x})"),
            UnaryOp::Sqrt => format!("sqrt({x})"),
            UnaryOp::Recip => format!("(1.0 / {x})"),
            UnaryOp::Relu => format!("max({x}, 0.0)"),
            UnaryOp::Sigmoid => format!("(1.0 / (1.0 + exp(-{x})))"),
            UnaryOp::Tanh => format!("tanh({x})"),
            UnaryOp::Sin => format!("sin({x})"),
            UnaryOp::Cos => format!("cos({x})"),
            UnaryOp::Abs => format!("abs({x})"),
            UnaryOp::Gelu => format!("(0.5 * {x} * (1.0 + volta_erf({x} * 0.70710678118654752)))"),
            UnaryOp::Silu => format!("({x} / (1.0 + exp(-{x})))"),
            UnaryOp::Floor => format!("floor({x})"),
            UnaryOp::Erf => format!("volta_erf({x})"),
            UnaryOp::GeluGrad => format!(
                "(0.5 * (1.0 + volta_erf({x} * 0.70710678118654752)) \
                 + {x} * exp(-0.5 * {x} * {x}) * 0.39894228040143268)"
            ),
        }
    }
}

/// An op on two elements (or an element and a scalar).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a − b
    Sub,
    /// a · b
    Mul,
    /// a / b
    Div,
    /// max(a, b)
    Max,
    /// min(a, b)
    Min,
    /// a mod b with the sign of b (Python's `%`, `torch.remainder`)
    Mod,
    /// a^b
    Pow,
    /// 1 if a < b else 0
    Lt,
    /// 1 if a ≤ b else 0
    Le,
    /// 1 if a > b else 0
    Gt,
    /// 1 if a ≥ b else 0
    Ge,
    /// 1 if a = b else 0
    Eq,
    /// 1 if a ≠ b else 0
    Ne,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 14] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Mod,
        BinaryOp::Pow,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::Eq,
        BinaryOp::Ne,
    ];

    /// Whether the op is a comparison (output 0 or 1, zero gradient).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne
        )
    }

    /// Applies the op.
    #[inline(always)]
    pub fn eval<T: Float>(self, a: T, b: T) -> T {
        let flag = |c: bool| if c { T::ONE } else { T::ZERO };
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Max => {
                if a >= b {
                    a
                } else {
                    b
                }
            }
            BinaryOp::Min => {
                if a <= b {
                    a
                } else {
                    b
                }
            }
            BinaryOp::Mod => a - b * (a / b).floor(),
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Lt => flag(a < b),
            BinaryOp::Le => flag(a <= b),
            BinaryOp::Gt => flag(a > b),
            BinaryOp::Ge => flag(a >= b),
            BinaryOp::Eq => flag(a == b),
            BinaryOp::Ne => flag(a != b),
        }
    }

    /// The WGSL expression computing the op on `a` and `b` (f32).
    pub fn wgsl(self, a: &str, b: &str) -> String {
        let cmp = |op: &str| format!("select(0.0, 1.0, {a} {op} {b})");
        match self {
            BinaryOp::Add => format!("({a} + {b})"),
            BinaryOp::Sub => format!("({a} - {b})"),
            BinaryOp::Mul => format!("({a} * {b})"),
            BinaryOp::Div => format!("({a} / {b})"),
            BinaryOp::Max => format!("max({a}, {b})"),
            BinaryOp::Min => format!("min({a}, {b})"),
            BinaryOp::Mod => format!("({a} - {b} * floor({a} / {b}))"),
            // WGSL's `pow` is undefined (NaN) for a < 0, where the CPU's `powf` is
            // real for an integer b: ±|a|^b by b's parity. Match it, so that
            // `x ** y` (and the gradients built from it) agree across devices; a
            // non-integer b of a negative a stays NaN. `a`, `b` are SSA names.
            BinaryOp::Pow => format!(
                "select(pow({a}, {b}), select(1.0, -1.0, {b} - 2.0 * floor(0.5 * {b}) == 1.0) * pow(abs({a}), {b}), {a} < 0.0 && {b} == floor({b}))"
            ),
            BinaryOp::Lt => cmp("<"),
            BinaryOp::Le => cmp("<="),
            BinaryOp::Gt => cmp(">"),
            BinaryOp::Ge => cmp(">="),
            BinaryOp::Eq => cmp("=="),
            BinaryOp::Ne => cmp("!="),
        }
    }
}

/// A reduction along an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Σ
    Sum,
    /// max
    Max,
    /// min
    Min,
}

impl ReduceOp {
    /// The identity element.
    pub fn identity<T: Float>(self) -> T {
        match self {
            ReduceOp::Sum => T::ZERO,
            ReduceOp::Max => T::NEG_INFINITY,
            ReduceOp::Min => T::INFINITY,
        }
    }
    /// Combines an accumulator with a value.
    #[inline(always)]
    pub fn combine<T: Float>(self, acc: T, x: T) -> T {
        match self {
            ReduceOp::Sum => acc + x,
            ReduceOp::Max => {
                if x > acc {
                    x
                } else {
                    acc
                }
            }
            ReduceOp::Min => {
                if x < acc {
                    x
                } else {
                    acc
                }
            }
        }
    }
}
