//! Matmul tuning at first use: each product class is timed once, products match
//! the CPU whatever tiles win, and the winners land in the cache directory.
use volta::RawTensor;
use volta::prelude::*;

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7 + seed) % 13) as f32 - 6.0).collect()
}

#[test]
fn products_tune_once_per_class_and_cache_the_winner() {
    let dir = std::env::temp_dir().join(format!("volta-autotune-{}", std::process::id()));
    // SAFETY: set before the GPU context exists, in this binary's only test.
    unsafe { std::env::set_var("VOLTA_CACHE_DIR", &dir) };
    let info =
        Gpu::init().unwrap_or_else(|e| panic!("no GPU adapter (install Mesa's lavapipe): {e}"));
    if std::env::var_os("VOLTA_AUTOTUNE").is_none() {
        // Off by default on a CPU adapter such as lavapipe, on for GPUs.
        assert_eq!(Gpu::autotune().unwrap(), info.device_type != "Cpu");
    }
    Gpu::set_autotune(true).unwrap();
    let product = |m: usize, k: usize, n: usize| {
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let want = RawTensor::<Cpu, f32>::from_vec(a.clone(), &[m, k])
            .matmul(&RawTensor::from_vec(b.clone(), &[k, n]))
            .to_vec();
        let got = RawTensor::<Gpu, f32>::from_vec(a, &[m, k])
            .matmul(&RawTensor::from_vec(b, &[k, n]))
            .to_vec();
        assert_eq!(got, want, "{m}x{k}x{n}");
    };
    let before = Gpu::matmul_classes_tuned();
    product(64, 96, 80);
    assert_eq!(Gpu::matmul_classes_tuned(), before + 1);
    // Sizes that round to the same powers of two: the same class, no timing.
    product(60, 92, 68);
    assert_eq!(Gpu::matmul_classes_tuned(), before + 1);
    product(200, 40, 36);
    assert_eq!(Gpu::matmul_classes_tuned(), before + 2);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.starts_with("volta-matmul-tuning 2\n"), "{text}");
    assert_eq!(text.lines().count(), 3, "{text}");
    Gpu::set_autotune(false).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
