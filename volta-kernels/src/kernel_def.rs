//! What `#[kernel]` generates for the runtime: a user kernel's scalar functions,
//! its WGSL, and its partial derivatives.

/// How an argument of a user kernel is passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    /// A tensor, read elementwise.
    Tensor,
    /// A scalar shared by every element (a uniform on the GPU).
    Scalar,
}

/// A scalar function of a kernel's arguments (in declaration order).
pub type ScalarFn = fn(&[f32]) -> f32;

/// A user kernel defined with `#[kernel]` (a `static` the macro emits).
#[derive(Debug)]
pub struct KernelDef {
    /// The Rust name of the kernel.
    pub name: &'static str,
    /// Each argument, in declaration order.
    pub args: &'static [ArgKind],
    /// WGSL defining `volta_k_{name}` (the value) and `volta_k_{name}_d{k}` (the
    /// partial derivative with respect to argument `k`), each taking every argument as
    /// an `f32` in declaration order. Validated by naga when the macro ran.
    pub wgsl: &'static str,
    /// Kernels this one calls (their WGSL must be in the same module).
    pub deps: &'static [&'static KernelDef],
    /// The value on the CPU (the original Rust body).
    pub forward: ScalarFn,
    /// ∂/∂argument `k`, for every argument.
    pub partials: &'static [ScalarFn],
}

impl KernelDef {
    /// The WGSL function name of the value (`partial = None`) or of a partial.
    pub fn wgsl_fn(&self, partial: Option<usize>) -> String {
        match partial {
            None => format!("volta_k_{}", self.name),
            Some(k) => format!("volta_k_{}_d{k}", self.name),
        }
    }

    /// The WGSL of this kernel and every kernel it calls, each once.
    pub fn wgsl_module(&'static self) -> String {
        crate::wgsl::kernel_modules(&[crate::wgsl::KernelRef(self)])
    }
}
