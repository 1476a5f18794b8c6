//! User kernels (`#[kernel]` functions) on the GPU: a call node in the fused
//! elementwise tree, so they fuse with the ops around them like built-in ops.
use super::Gpu;
use super::device::rt;
use super::fusion;
use crate::backend::{Buf, KernelBackend, View};
use volta_kernels::wgsl::{Elem, Expr};
use volta_kernels::{ArgKind, KernelDef};

impl KernelBackend for Gpu {
    fn call_kernel(
        def: &'static KernelDef,
        partial: Option<usize>,
        tensors: &[View<Self, f32>],
        scalars: &[f32],
    ) -> Buf<Self, f32> {
        let tensor_args = def.args.iter().filter(|a| **a == ArgKind::Tensor).count();
        assert!(
            tensors.len() == tensor_args && scalars.len() == def.args.len() - tensor_args,
            "kernel `{}` takes {tensor_args} tensors and {} scalars, got {} and {}",
            def.name,
            def.args.len() - tensor_args,
            tensors.len(),
            scalars.len()
        );
        let dims = &tensors
            .first()
            .unwrap_or_else(|| panic!("kernel `{}` has no tensor argument", def.name))
            .1
            .dims;
        let bits: Vec<u32> = scalars.iter().map(|s| s.to_bits()).collect();
        let call = Expr::call_on_inputs(def, partial);
        fusion::elementwise(rt(), Elem::F32, call, tensors, &bits, dims)
    }
}
