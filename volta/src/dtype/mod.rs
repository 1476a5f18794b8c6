//! Element types. `f32` everywhere; `f64` on the CPU (gradient checks, science);
//! `u32` for indices. `f16` is planned: tensors carry the element type as a
//! parameter (default `f32`), so adding it changes no user code.

pub use volta_kernels::Float as ScalarMath;

/// A type tensors can hold.
pub trait Element: 'static + Copy + Default + PartialEq + std::fmt::Debug + Send + Sync {
    /// Its name in messages.
    const NAME: &'static str;
}

/// An element type with arithmetic, autograd and the full op set.
pub trait Float: Element + ScalarMath {}

impl Element for f32 {
    const NAME: &'static str = "f32";
}
impl Element for f64 {
    const NAME: &'static str = "f64";
}
impl Element for u32 {
    const NAME: &'static str = "u32";
}
impl Float for f32 {}
impl Float for f64 {}
