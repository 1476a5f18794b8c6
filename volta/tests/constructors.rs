//! Constant constructors (`zeros`, `ones`, `full` and their `_shaped` forms) for
//! every element type, `u32` index tensors included, on the CPU and the GPU.
use volta::Memory;
use volta::dtype::f16;
use volta::prelude::*;

/// `zeros`, `ones` and `full` of a static and a run-time shape on device `D`.
fn constants<D: Device + Memory<E>, E: Element>(seven: E) {
    let zero = E::from(0u8);
    let one = E::from(1u8);
    assert_eq!(Tensor::<Rank2<2, 3>, D, E>::zeros().to_vec(), vec![zero; 6]);
    assert_eq!(Tensor::<Rank2<2, 3>, D, E>::ones().to_vec(), vec![one; 6]);
    assert_eq!(
        Tensor::<Rank1<5>, D, E>::full(seven).to_vec(),
        vec![seven; 5]
    );
    let dynamic = (4usize, Const::<2>);
    assert_eq!(
        Tensor::<(usize, Const<2>), D, E>::zeros_shaped(dynamic).to_vec(),
        vec![zero; 8]
    );
    assert_eq!(
        Tensor::<(usize, Const<2>), D, E>::ones_shaped(dynamic).to_vec(),
        vec![one; 8]
    );
    let t = Tensor::<(usize, Const<2>), D, E>::full_shaped(dynamic, seven);
    assert_eq!((t.dims(), t.to_vec()), (&[4, 2][..], vec![seven; 8]));
    assert_eq!(Tensor::<(), D, E>::zeros().to_vec(), vec![zero]);
}

#[test]
fn every_element_type_has_zeros_ones_and_full_on_the_cpu() {
    constants::<Cpu, u32>(7);
    constants::<Cpu, f32>(7.5);
    constants::<Cpu, f64>(-7.5);
    constants::<Cpu, f16>(f16::from_f32(7.5));
    // An index tensor built with `zeros` feeds index ops like any other.
    let labels = Tensor::<Rank1<3>, Cpu, u32>::zeros();
    let logits = Tensor::<Rank2<3, 2>>::from_array([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]);
    let loss: Tensor<()> = volta::nn::loss::cross_entropy(&logits, &labels);
    assert!((loss.item() - 1.3133).abs() < 1e-3, "{}", loss.item());
}

#[cfg(feature = "gpu")]
#[test]
fn every_gpu_element_type_has_zeros_ones_and_full() {
    let _gpu = crate::support::gpu_shared();
    let info = Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    constants::<Gpu, u32>(7);
    constants::<Gpu, u32>(u32::MAX);
    constants::<Gpu, f32>(7.5);
    if info.f16 {
        constants::<Gpu, f16>(f16::from_f32(7.5));
    } else {
        eprintln!("SKIPPED f16: this adapter lacks shader-f16 ({info})");
    }
}
