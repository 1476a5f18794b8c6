//! Anomaly mode: the first op whose forward or backward produces a NaN or an
//! infinity is named, with the dims of its result and the line that called it.
use volta::autograd::detect_anomaly;
use volta::prelude::*;

/// The panic message of `f`.
fn panic_of(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("a panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .expect("a message")
}

#[test]
fn a_nan_in_the_forward_names_the_op_and_the_line() {
    let x = Tensor::<Rank2<2, 3>>::from_array([[1.0, 4.0, 9.0], [0.5, -1.0, 2.0]]).requires_grad();
    let line = line!() + 3;
    let msg = panic_of(|| {
        detect_anomaly(|| {
            let y = (&x * 2.0).sqrt(); // √(−2) = NaN
            y.sum_all().backward();
        });
    });
    assert!(msg.contains("`Sqrt`"), "{msg}");
    assert!(msg.contains(&format!("tests/anomaly.rs:{line}")), "{msg}");
    assert!(
        msg.contains("NaN") && msg.contains("element 4") && msg.contains("[2, 3]"),
        "{msg}"
    );
}

#[test]
fn an_infinity_in_the_backward_names_the_op_and_where_its_forward_ran() {
    let x = Tensor::<Rank1<3>>::from_array([4.0, 0.0, 1.0]).requires_grad();
    let line = line!() + 3;
    let msg = panic_of(|| {
        detect_anomaly(|| {
            let y = x.sqrt(); // finite: √0 = 0 …
            y.sum_all().backward(); // … but d√x/dx at 0 is infinite
        });
    });
    assert!(msg.contains("backward of `Sqrt`"), "{msg}");
    assert!(msg.contains(&format!("tests/anomaly.rs:{line}")), "{msg}");
    assert!(msg.contains("inf"), "{msg}");
}

#[test]
fn outside_anomaly_mode_nothing_is_checked() {
    let x = Tensor::<Rank1<2>>::from_array([-1.0, 1.0]).requires_grad();
    let y = x.sqrt();
    assert!(y.to_vec()[0].is_nan());
    let g = y.sum_all().backward();
    assert!(g.get(&x).expect("a gradient").to_vec()[0].is_nan());
    // Finite work passes through anomaly mode unchanged.
    let v = detect_anomaly(|| (&x * &x).sum_all().item());
    assert_eq!(v, 2.0);
}

#[cfg(feature = "gpu")]
#[test]
fn the_gpu_forward_is_checked_too() {
    let _gpu = crate::support::gpu_shared();
    Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    let x = Tensor::<Rank1<4>, Gpu>::from_array([1.0, 2.0, 0.0, 3.0]);
    let msg = panic_of(|| {
        detect_anomaly(|| {
            let y = x.log(); // log 0 = −inf
            y.to_vec();
        });
    });
    assert!(
        msg.contains("`Log`") && msg.contains("-inf") && msg.contains("anomaly.rs"),
        "{msg}"
    );
}
