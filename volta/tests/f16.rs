//! `f16` tensors: every op on the CPU, and (with the `gpu` feature) on the GPU,
//! against the same computation in `f32` from the same (f16-rounded) inputs, within
//! f16 tolerance; sums and products must accumulate in `f32`; conversions must round
//! exactly as `half` does. The GPU cases also compare against the CPU's `f16`
//! results, and run with elementwise fusion on and off.

use volta::backend::{Backend, Cast};
use volta::dtype::{Float, f16};
use volta::prelude::*;
use volta::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

/// A computation over raw tensors, written once for every device and element type.
trait Case {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        idx: &RawTensor<D, u32>,
    ) -> RawTensor<D, E>;
}

/// Inputs: dims and f32 values that are exactly representable in f16.
type Inputs = Vec<(Vec<usize>, Vec<f32>)>;

/// Random inputs of `dims`, rounded to f16 (so f32 and f16 runs see equal values).
fn inputs(seed: u64, dims: &[&[usize]], positive: bool) -> Inputs {
    let mut rng = Rng::seed(seed);
    dims.iter()
        .map(|d| {
            let n = d.iter().product();
            let v = (0..n)
                .map(|_| {
                    let x = if positive {
                        0.5 + 1.5 * rng.uniform()
                    } else {
                        rng.normal()
                    };
                    f16::from_f64(x).to_f32()
                })
                .collect();
            (d.to_vec(), v)
        })
        .collect()
}

/// `case` on device `D` in element type `E`, read back as f32.
fn eval<D: Backend<E>, E: Float>(case: &impl Case, x: &Inputs, idx: &[u32]) -> Vec<f32> {
    let raws: Vec<RawTensor<D, E>> = x
        .iter()
        .map(|(dims, v)| {
            RawTensor::from_vec(v.iter().map(|&a| E::from_f64(a.into())).collect(), dims)
        })
        .collect();
    let idx = RawTensor::<D, u32>::from_vec(idx.to_vec(), &[idx.len()]);
    let out = case.run(&raws, &idx).to_vec();
    out.iter().map(|v| v.to_f64() as f32).collect()
}

/// `got` (an f16 result) within f16 tolerance of `want` (an f32 result): a few
/// f16 ulps (2⁻¹¹ relative) of the value, or of 1 near zero.
fn close_f16(what: &str, want: &[f32], got: &[f32]) {
    assert_eq!(want.len(), got.len(), "{what}: lengths differ");
    assert!(!want.is_empty(), "{what}: nothing compared");
    for (i, (&w, &g)) in want.iter().zip(got).enumerate() {
        let ok = (w - g).abs() <= 4e-3 * w.abs().max(1.0) || (w.is_nan() && g.is_nan()) || w == g;
        assert!(ok, "{what}: element {i}: f32 {w} vs f16 {g}");
    }
}

/// The cases every device runs, with their inputs and index data.
/// A named case: its inputs (and index data), and the computation.
type Named = (
    &'static str,
    Box<dyn Fn() -> (Inputs, Vec<u32>)>,
    Box<dyn DynCase>,
);

fn cases() -> Vec<Named> {
    vec![
        (
            "fused chain with a broadcast",
            Box::new(|| (inputs(1, &[&[3, 8], &[3, 8], &[1, 8]], false), vec![])),
            Box::new(Chain),
        ),
        (
            "unary ops on a transposed view",
            Box::new(|| (inputs(2, &[&[5, 6]], true), vec![])),
            Box::new(Unaries),
        ),
        (
            "sum and max along axes",
            Box::new(|| (inputs(3, &[&[4, 37, 3]], false), vec![])),
            Box::new(Reductions),
        ),
        (
            "softmax and log-softmax",
            Box::new(|| (inputs(4, &[&[3, 40], &[5, 7]], false), vec![])),
            Box::new(Softmaxes),
        ),
        (
            "RMS and layer normalisation",
            Box::new(|| (inputs(5, &[&[3, 36], &[6, 5]], false), vec![])),
            Box::new(Norms),
        ),
        (
            "matmul, batched and transposed",
            Box::new(|| (inputs(6, &[&[2, 5, 7], &[2, 6, 7], &[7, 9]], false), vec![])),
            Box::new(Matmuls),
        ),
        (
            "gather, index_select and scatter_add",
            Box::new(|| (inputs(7, &[&[5, 4]], false), vec![3, 0, 2, 2, 1, 4])),
            Box::new(Indexing),
        ),
        (
            "pad, cat, select and a window",
            Box::new(|| (inputs(8, &[&[1, 2, 5, 5], &[1, 2, 5, 5]], false), vec![])),
            Box::new(Movement),
        ),
    ]
}

/// Object-safe wrapper of [`Case`] for the CPU (f32, f16) and the GPU (f32, f16).
trait DynCase {
    fn cpu32(&self, x: &Inputs, idx: &[u32]) -> Vec<f32>;
    fn cpu16(&self, x: &Inputs, idx: &[u32]) -> Vec<f32>;
    #[cfg(feature = "gpu")]
    fn gpu16(&self, x: &Inputs, idx: &[u32]) -> Vec<f32>;
}
impl<C: Case> DynCase for C {
    fn cpu32(&self, x: &Inputs, idx: &[u32]) -> Vec<f32> {
        eval::<Cpu, f32>(self, x, idx)
    }
    fn cpu16(&self, x: &Inputs, idx: &[u32]) -> Vec<f32> {
        eval::<Cpu, f16>(self, x, idx)
    }
    #[cfg(feature = "gpu")]
    fn gpu16(&self, x: &Inputs, idx: &[u32]) -> Vec<f32> {
        eval::<Gpu, f16>(self, x, idx)
    }
}

/// Concatenates flattened results so one case checks several ops.
fn flat<D: Backend<E>, E: Float>(parts: &[RawTensor<D, E>]) -> RawTensor<D, E> {
    let flat: Vec<RawTensor<D, E>> = parts
        .iter()
        .map(|p| p.reshape(&[p.dims().iter().product()]))
        .collect();
    RawTensor::cat(&flat, 0)
}

struct Chain;
impl Case for Chain {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        // relu(a·b + c)·2 − tanh(a), then gelu and silu: one fused kernel on the GPU.
        let c = x[2].expand(x[0].dims());
        let y = x[0]
            .binary(BinaryOp::Mul, &x[1])
            .binary(BinaryOp::Add, &c)
            .unary(UnaryOp::Relu)
            .scalar(BinaryOp::Mul, E::from_f64(2.0))
            .binary(BinaryOp::Sub, &x[0].unary(UnaryOp::Tanh));
        flat(&[
            y.unary(UnaryOp::Gelu),
            y.unary(UnaryOp::Silu),
            y.unary(UnaryOp::Sigmoid),
        ])
    }
}

struct Unaries;
impl Case for Unaries {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        let t = x[0].transpose_last();
        let parts: Vec<RawTensor<D, E>> = [
            UnaryOp::Exp,
            UnaryOp::Log,
            UnaryOp::Sqrt,
            UnaryOp::Recip,
            UnaryOp::Sin,
            UnaryOp::Erf,
            UnaryOp::Neg,
        ]
        .into_iter()
        .map(|op| t.unary(op))
        .chain([t.scalar(BinaryOp::Pow, E::from_f64(1.5))])
        .collect();
        flat(&parts)
    }
}

struct Reductions;
impl Case for Reductions {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        // Long axis (tree kernels), short axes (a thread per row), a fused producer.
        let sq = x[0].binary(BinaryOp::Mul, &x[0]);
        flat(&[
            x[0].reduce(ReduceOp::Sum, 1),
            x[0].reduce(ReduceOp::Max, 0),
            x[0].reduce(ReduceOp::Min, 2),
            sq.reduce(ReduceOp::Sum, 1),
            x[0].reduce_all(ReduceOp::Sum),
        ])
    }
}

struct Softmaxes;
impl Case for Softmaxes {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        let scaled = x[0].scalar(BinaryOp::Mul, E::from_f64(3.0));
        flat(&[
            scaled.softmax(1),
            x[0].log_softmax(1),
            x[1].softmax(0),
            x[1].transpose_last().log_softmax(1),
        ])
    }
}

struct Norms;
impl Case for Norms {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        flat(&[
            x[0].normalize(1, false, 1e-5),
            x[0].normalize(1, true, 1e-5),
            x[1].normalize(0, false, 1e-5),
            x[1].scalar(BinaryOp::Add, E::ONE).normalize(1, true, 1e-3),
        ])
    }
}

struct Matmuls;
impl Case for Matmuls {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        // (2, 5, 7) × (2, 7, 6) through a transposed view, and × a shared (7, 9).
        flat(&[x[0].matmul(&x[1].transpose_last()), x[0].matmul(&x[2])])
    }
}

struct Indexing;
impl Case for Indexing {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        idx: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        let rows = x[0].index_select(idx); // (6, 4)
        let first4 = RawTensor::from_vec(idx.to_vec()[..4].to_vec(), &[1, 4]);
        let cols = x[0].gather(1, &first4.expand_any(&[5, 4]));
        let back = rows.scatter_add(&[5, 4], 0, &idx.reshape_any(&[6, 1]).expand_any(&[6, 4]));
        flat(&[rows, cols, back])
    }
}

struct Movement;
impl Case for Movement {
    fn run<D: Backend<E>, E: Float>(
        &self,
        x: &[RawTensor<D, E>],
        _: &RawTensor<D, u32>,
    ) -> RawTensor<D, E> {
        let padded = x[0].pad(&[(0, 0), (0, 0), (1, 2), (0, 1)], E::from_f64(-0.5));
        let both = RawTensor::cat(&[x[0].clone(), x[1].clone()], 1);
        let mask = x[0].scalar(BinaryOp::Gt, E::ZERO);
        let chosen = RawTensor::select(&mask, &x[0], &x[1]);
        let win = volta::Window2d {
            kernel: [3, 3],
            stride: [2, 1],
            padding: [1, 0],
            dilation: [1, 1],
        };
        let cols = x[0].unfold2d(win, E::ZERO);
        let folded = cols.fold2d(win, [5, 5]);
        flat(&[padded, both, chosen, cols, folded])
    }
}

#[test]
fn every_op_on_the_cpu_matches_f32_within_f16_tolerance() {
    for (name, data, case) in cases() {
        let (x, idx) = data();
        let want = case.cpu32(&x, &idx);
        let got = case.cpu16(&x, &idx);
        close_f16(&format!("cpu {name}"), &want, &got);
    }
}

#[test]
fn cpu_elementwise_ops_round_an_f32_result_once() {
    // Each element is computed in f32 and rounded once: exactly half's rounding of
    // the f32 result, not a chain of f16 roundings.
    let x: Vec<f16> = (0..200)
        .map(|i| f16::from_f32(i as f32 * 0.037 - 3.0))
        .collect();
    let t = Tensor::<Rank1<200>, Cpu, f16>::from_vec(x.clone()).unwrap();
    let y = t.sigmoid().to_vec();
    for (a, b) in x.iter().zip(&y) {
        let want = f16::from_f32(1.0 / (1.0 + (-a.to_f32()).exp()));
        assert_eq!(*b, want, "sigmoid({a})");
    }
    let z = t.mul(&t).add_scalar(f16::from_f32(0.1)).to_vec();
    for (a, b) in x.iter().zip(&z) {
        // Two ops: each rounds once.
        let sq = f16::from_f32(a.to_f32() * a.to_f32());
        assert_eq!(*b, f16::from_f32(sq.to_f32() + f16::from_f32(0.1).to_f32()));
    }
}

/// 10 000 ones: an f16 accumulator stalls at 2048 (2048 + 1 rounds back to 2048).
const LONG: usize = 10_000;

fn accumulation_checks<D: Backend<f16>>() {
    let ones = Tensor::<(usize,), D, f16>::full_shaped((LONG,), f16::ONE);
    assert_eq!(
        ones.sum_all().item(),
        f16::from_f32(LONG as f32),
        "sum of ones"
    );
    let rows = Tensor::<(usize, Const<2>), D, f16>::full_shaped((LONG, Const), f16::ONE);
    let colsum: Vec<f16> = rows.raw().reduce(ReduceOp::Sum, 0).to_vec();
    assert_eq!(
        colsum,
        vec![f16::from_f32(LONG as f32); 2],
        "sum along a short axis"
    );
    // Dot products of 4096 ones: 4096 exactly (split-K on the GPU, then unsplit).
    let a = RawTensor::<D, f16>::from_vec(vec![f16::ONE; 4096], &[1, 4096]);
    let b = RawTensor::<D, f16>::from_vec(vec![f16::ONE; 4096 * 3], &[4096, 3]);
    assert_eq!(
        a.matmul(&b).to_vec(),
        vec![f16::from_f32(4096.0); 3],
        "matmul"
    );
    let a = RawTensor::<D, f16>::from_vec(vec![f16::ONE; 2 * 2 * 4000], &[2, 2, 4000]);
    let b = RawTensor::<D, f16>::from_vec(vec![f16::ONE; 2 * 4000], &[2, 4000, 1]);
    assert_eq!(
        a.matmul(&b).to_vec(),
        vec![f16::from_f32(4000.0); 4],
        "batched matmul"
    );
    // Softmax over a long row of equal values: each 1/10000 (z summed in f32).
    let p = ones.raw().softmax(0).to_vec();
    assert!(
        p.iter().all(|&v| v == f16::from_f32(1e-4)),
        "softmax {:?}",
        &p[..4]
    );
    // RMS of a long row of 3s is 3: each normalised value 1.
    let threes = RawTensor::<D, f16>::from_vec(vec![f16::from_f32(3.0); LONG], &[1, LONG]);
    let n = threes.normalize(1, false, 0.0).to_vec();
    assert!(n.iter().all(|&v| v == f16::ONE), "rms norm {:?}", &n[..4]);
}

#[test]
fn cpu_sums_and_products_accumulate_in_f32() {
    accumulation_checks::<Cpu>();
}

/// Values whose conversions are fixed: exact, rounded, overflowing, subnormal, NaN.
fn special_f32() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        1.0,
        0.1,
        -2.5,
        65504.0,
        65520.0, // rounds up past the largest f16: ∞
        1e6,
        -1e6,
        6e-8,      // the smallest subnormal is 2⁻²⁴ ≈ 5.96e-8
        1e-9,      // underflows to 0
        1.0009766, // 1 + 2⁻¹⁰: exact
        1.0004883, // 1 + 2⁻¹¹: a tie, to even (1)
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        3.3333,
    ]
}

fn conversion_checks<D: Cast<f32, f16> + Cast<f16, f32> + Backend<f32> + Backend<f16>>() {
    let v = special_f32();
    let x = Tensor::<(usize,), D, f32>::from_vec_shaped(v.clone(), (v.len(),)).unwrap();
    let h = x.to_dtype::<f16>().to_vec();
    for (a, b) in v.iter().zip(&h) {
        let want = f16::from_f32(*a);
        assert!(
            b.to_bits() == want.to_bits() || (a.is_nan() && b.is_nan()),
            "{a} → f16: {b} ({:#06x}), want {want} ({:#06x})",
            b.to_bits(),
            want.to_bits()
        );
    }
    // f16 → f32 is exact: every f16 bit pattern but NaNs round-trips.
    let all: Vec<f16> = (0..=u16::MAX)
        .map(f16::from_bits)
        .filter(|v| !v.is_nan())
        .collect();
    let t = Tensor::<(usize,), D, f16>::from_vec_shaped(all.clone(), (all.len(),)).unwrap();
    let wide = t.to_dtype::<f32>().to_vec();
    assert!(
        all.iter()
            .zip(&wide)
            .all(|(a, b)| a.to_f32().to_bits() == b.to_bits())
    );
    let back = t.to_dtype::<f32>().to_dtype::<f16>().to_vec();
    assert!(
        all.iter()
            .zip(&back)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    // Views convert through their layout: an odd-length slice of a transpose.
    let m =
        Tensor::<Rank2<3, 5>, D, f32>::from_vec((0..15).map(|i| i as f32 * 0.5).collect()).unwrap();
    let view = RawTensor::<D, f32>::transpose_last(m.raw()).narrow(0, 1, 3);
    let got = Tensor::<(usize, usize), D, f32>::try_from_raw(view).unwrap();
    let got = got.to_dtype::<f16>().to_vec();
    let want: Vec<f16> = [0.5, 3.0, 5.5, 1.0, 3.5, 6.0, 1.5, 4.0, 6.5]
        .iter()
        .map(|&v| f16::from_f32(v))
        .collect();
    assert_eq!(got, want);
    // A tracked tensor converts to a tracked leaf.
    let p = x.requires_grad().to_dtype::<f16>();
    assert!(p.is_tracked());
}

#[test]
fn cpu_conversions_round_like_half() {
    conversion_checks::<Cpu>();
    // f64 too.
    let x = Tensor::<Rank1<3>, Cpu, f64>::from_array([0.1, 1e300, -3.0]);
    let h = x.to_dtype::<f16>().to_vec();
    assert_eq!(
        h,
        vec![f16::from_f64(0.1), f16::INFINITY, f16::from_f32(-3.0)]
    );
    assert_eq!(h[0].to_bits(), f16::from_f32(0.1).to_bits());
}

#[test]
fn cpu_f16_gradients_match_f32() {
    // loss = Σ softmax(x·w)·t through autograd, in both element types.
    fn grads<E: Float>() -> (Vec<f32>, Vec<f32>) {
        let mut rng = Rng::seed(9);
        let mut draw = |n: usize| -> Vec<E> {
            (0..n)
                .map(|_| E::from_f64(f16::from_f64(rng.normal()).to_f64()))
                .collect()
        };
        let x = Tensor::<Rank2<4, 6>, Cpu, E>::from_vec(draw(24))
            .unwrap()
            .requires_grad();
        let w = Tensor::<Rank2<6, 3>, Cpu, E>::from_vec(draw(18))
            .unwrap()
            .requires_grad();
        let t = Tensor::<Rank2<4, 3>, Cpu, E>::from_vec(draw(12)).unwrap();
        let loss = x.matmul(&w).softmax::<Axis<1>>().mul(&t).sum_all();
        let g = loss.backward();
        let f = |v: Vec<E>| v.into_iter().map(|e| e.to_f64() as f32).collect();
        (
            f(g.get(&x).unwrap().to_vec()),
            f(g.get(&w).unwrap().to_vec()),
        )
    }
    let (x32, w32) = grads::<f32>();
    let (x16, w16) = grads::<f16>();
    close_f16("grad x", &x32, &x16);
    close_f16("grad w", &w32, &w16);
}

#[test]
fn cpu_f16_trains_a_layer() {
    // A few SGD steps on f16 parameters lower the loss (Linear and the fused step).
    let mut rng = Rng::seed(3);
    let mut layer = Linear::<4, 2, Cpu, f16>::new(&mut rng);
    let x = Tensor::<Rank2<8, 4>>::randn(&mut rng).to_dtype::<f16>();
    let y = Tensor::<Rank2<8, 2>>::randn(&mut rng).to_dtype::<f16>();
    let mut opt = Sgd::new(0.1).with_momentum(0.9);
    let loss = |l: &Linear<4, 2, Cpu, f16>| l.forward(&x).sub(&y).square().mean_all();
    let first = loss(&layer).item().to_f32();
    for _ in 0..20 {
        let g = loss(&layer).backward();
        opt.step(&mut layer, &g);
    }
    let last = loss(&layer).item().to_f32();
    assert!(last < 0.8 * first, "loss {first} → {last}");
}

#[cfg(feature = "gpu")]
mod gpu {
    use super::*;

    /// Tests share one GPU queue and the fusion switch.
    fn lock() -> std::sync::RwLockWriteGuard<'static, ()> {
        let g = crate::support::gpu_alone();
        Gpu::set_fusion(true);
        let info = Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
        assert!(info.f16, "this adapter lacks shader-f16: {info}");
        g
    }

    #[test]
    fn init_says_whether_f16_is_supported() {
        let _g = lock();
        let info = Gpu::init().unwrap();
        assert_eq!(info.f16, info.features.contains(&"shader-f16"), "{info}");
    }

    #[test]
    fn every_op_on_the_gpu_matches_f32_and_the_cpu() {
        let _g = lock();
        for (name, data, case) in cases() {
            let (x, idx) = data();
            let want = case.cpu32(&x, &idx);
            let cpu = case.cpu16(&x, &idx);
            for fusion in [true, false] {
                Gpu::set_fusion(fusion);
                let got = case.gpu16(&x, &idx);
                let what = format!("gpu {name} (fusion {fusion})");
                close_f16(&what, &want, &got);
                // A fused chain keeps its intermediates in f32, so it can be
                // closer to the f32 result than the CPU, which rounds each op's
                // result (x + 1 loses x's low bits). Unfused, both round every op
                // once: an f16 ulp or two apart, where f32 math differs in its
                // last bits.
                if fusion {
                    continue;
                }
                for (i, (c, g)) in cpu.iter().zip(&got).enumerate() {
                    let ok = (c - g).abs() <= 1e-3 * c.abs().max(0.25) || c == g;
                    assert!(ok, "{what}: element {i}: cpu f16 {c} vs gpu f16 {g}");
                }
            }
        }
        Gpu::set_fusion(true);
    }

    #[test]
    fn gpu_sums_and_products_accumulate_in_f32() {
        let _g = lock();
        accumulation_checks::<Gpu>();
    }

    #[test]
    fn gpu_conversions_round_like_half() {
        let _g = lock();
        conversion_checks::<Gpu>();
    }

    #[test]
    fn f16_data_moves_bit_exactly() {
        let _g = lock();
        // Odd lengths and odd offsets: read-backs of f16 views that start or end
        // inside a 4-byte word.
        for n in [1usize, 2, 3, 7, 8, 1001] {
            let v: Vec<f16> = (0..n)
                .map(|i| f16::from_bits((i * 7919 % 31744) as u16))
                .collect();
            let t = Tensor::<(usize,), Gpu, f16>::from_vec_shaped(v.clone(), (n,)).unwrap();
            assert_eq!(t.to_vec(), v, "length {n}");
            for start in [1, n / 2] {
                if start < n {
                    let s = t.raw().narrow(0, start, n - start);
                    assert_eq!(s.to_vec(), v[start..], "slice {start}.. of {n}");
                    let s = t.raw().narrow(0, start, 1);
                    assert_eq!(s.to_vec(), v[start..=start], "element {start} of {n}");
                }
            }
            // Through the CPU and back.
            assert_eq!(t.to::<Cpu>().to::<Gpu>().to_vec(), v);
        }
        let full = Tensor::<Rank2<3, 3>, Gpu, f16>::full(f16::from_f32(-1.5));
        assert_eq!(full.to_vec(), vec![f16::from_f32(-1.5); 9]);
        let r = Tensor::<Rank1<5>, Gpu, f16>::arange();
        assert_eq!(
            r.to_vec(),
            (0..5).map(|i| f16::from_f32(i as f32)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn gpu_uniform_matches_the_cpu_bit_for_bit() {
        let _g = lock();
        let g = <Gpu as Backend<f16>>::uniform(1000, 42);
        let c = <Cpu as Backend<f16>>::uniform(1000, 42);
        let g = RawTensor::<Gpu, f16>::leaf(g, volta::layout::Layout::contiguous(&[1000]));
        assert_eq!(g.to_vec(), *c);
    }

    #[test]
    fn gpu_f16_optimisers_match_the_cpu() {
        let _g = lock();
        // Adam and SGD with momentum on f16 parameters: the fused kernels compute
        // in f32 like the CPU, and store f16.
        fn train<D: Backend<f16>>(adam: bool) -> Vec<f16> {
            let mut rng = Rng::seed(4);
            let mut layer = Linear::<4, 3, Cpu, f16>::new(&mut rng).to::<D>();
            let x = Tensor::<Rank2<6, 4>>::randn(&mut rng)
                .to_dtype::<f16>()
                .to::<D>();
            let mut sgd = Sgd::new(0.05).with_momentum(0.9);
            let mut adam_opt = Adam::new(1e-2);
            for _ in 0..3 {
                let g = layer.forward(&x).square().mean_all().backward();
                if adam {
                    adam_opt.step(&mut layer, &g);
                } else {
                    sgd.step(&mut layer, &g);
                }
            }
            layer.weight.to_vec()
        }
        for adam in [false, true] {
            let c = train::<Cpu>(adam);
            let g = train::<Gpu>(adam);
            let f = |v: &[f16]| v.iter().map(|x| x.to_f32()).collect::<Vec<_>>();
            close_f16(&format!("weights (adam {adam})"), &f(&c), &f(&g));
        }
    }
}
