//! Calls of user kernels (`#[kernel]` functions) from generated WGSL.
use crate::KernelDef;
use std::hash::{Hash, Hasher};

/// A user kernel referenced from an [`Expr`](super::Expr), compared and hashed by
/// the address of its `static` definition: two kernels with the same name in
/// different modules stay distinct, and cache keys hash a pointer, not source text.
#[derive(Clone, Copy, Debug)]
pub struct KernelRef(pub &'static KernelDef);

impl PartialEq for KernelRef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for KernelRef {}

impl Hash for KernelRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

/// The WGSL of `kernels` and of every kernel they call, each exactly once and
/// callees before callers (two kernels may share a callee; WGSL rejects a function
/// defined twice).
pub fn kernel_modules(kernels: &[KernelRef]) -> String {
    fn collect(def: &'static KernelDef, seen: &mut Vec<KernelRef>, out: &mut String) {
        if seen.contains(&KernelRef(def)) {
            return;
        }
        seen.push(KernelRef(def));
        for dep in def.deps {
            collect(dep, seen, out);
        }
        out.push_str(def.wgsl);
        out.push('\n');
    }
    let mut seen = Vec::new();
    let mut out = String::new();
    for k in kernels {
        collect(k.0, &mut seen, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{KernelRef, kernel_modules};
    use crate::wgsl::{Access, Elem, ElementwiseKernel, Expr, Launch};
    use crate::{ArgKind, BinaryOp, KernelDef};

    fn zero(_: &[f32]) -> f32 {
        0.0
    }

    static SQ: KernelDef = KernelDef {
        name: "sq",
        args: &[ArgKind::Tensor, ArgKind::Scalar],
        wgsl: "fn volta_k_sq(x: f32, s: f32) -> f32 { return s * x * x; }\n\
               fn volta_k_sq_d0(x: f32, s: f32) -> f32 { return 2.0 * s * x; }\n\
               fn volta_k_sq_d1(x: f32, s: f32) -> f32 { return x * x; }",
        deps: &[],
        forward: zero,
        partials: &[zero, zero],
    };
    static QUAD: KernelDef = KernelDef {
        name: "quad",
        args: &[ArgKind::Tensor],
        wgsl: "fn volta_k_quad(x: f32) -> f32 { return volta_k_sq(volta_k_sq(x, 1.0), 1.0); }",
        deps: &[&SQ],
        forward: zero,
        partials: &[zero],
    };

    #[test]
    fn modules_hold_each_kernel_once_callees_first() {
        let m = kernel_modules(&[KernelRef(&QUAD), KernelRef(&SQ)]);
        assert_eq!(m.matches("fn volta_k_sq(").count(), 1, "{m}");
        assert!(m.find("fn volta_k_sq(") < m.find("fn volta_k_quad("), "{m}");
        assert_eq!(KernelRef(&SQ), KernelRef(&SQ));
        assert_ne!(KernelRef(&SQ), KernelRef(&QUAD));
    }

    #[test]
    fn calls_lower_to_the_kernel_functions_with_tensor_and_scalar_arguments() {
        // quad(x) + sq'(x; s) over input 0 and scalar 0: both modules once, the
        // shared argument computed once.
        let x = Expr::input(0).binary(BinaryOp::Mul, Expr::constant(2.0));
        let e = Expr::call(&QUAD, None, vec![x.clone()]).binary(
            BinaryOp::Add,
            Expr::call(&SQ, Some(0), vec![x, Expr::scalar(0)]),
        );
        assert_eq!(Expr::call_on_inputs(&SQ, None), {
            Expr::call(&SQ, None, vec![Expr::input(0), Expr::scalar(0)])
        });
        let k = ElementwiseKernel {
            rank: 1,
            elem: Elem::F32,
            out_elem: Elem::F32,
            inputs: vec![Access::Contiguous],
            output: Access::Contiguous,
            expr: e,
            vector: false,
            launch: Launch::DEFAULT,
            drawn: Default::default(),
        };
        let src = k.source();
        assert_eq!(src.matches("fn volta_k_sq(").count(), 1, "{src}");
        assert!(src.contains("fn volta_k_quad("), "{src}");
        assert!(
            src.contains("volta_k_sq_d0(t0_2, bitcast<f32>(p[4]))"),
            "{src}"
        );
        assert_eq!(src.matches("(x0_0 * 2.0)").count(), 1, "{src}");
    }
}
