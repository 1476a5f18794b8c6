//! The inference kernels against compositions of ordinary ops: quantised matmuls
//! (every block type, the GEMV and dense paths, each fused extra), the KV-cache
//! write and split attention (against `causal_attention` with `rope`, across chunk
//! boundaries and at cache offsets), on the CPU and, with the `gpu` feature, on the
//! GPU; and the GPU's capture and replay of a step.
use half::f16;
use volta::backend::infer::{AttnShape, rope_table};
use volta::backend::{Backend, InferenceBackend, Memory, Replay};
use volta::io::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType};
use volta::layout::Layout;
use volta::tensor::{Activations, QMATMUL_GEMV_ROWS, QMatmulOptions, QTensor, RawTensor};
use volta::{Cpu, Rng};
use volta_kernels::{BinaryOp, UnaryOp};

/// Random ggml blocks of `ty` for a `rows × cols` matrix.
fn random_blocks(ty: GgmlType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let mut bytes = Vec::new();
    let scale = |rng: &mut Rng| f16::from_f32((rng.uniform() as f32 - 0.5) * 0.2).to_le_bytes();
    // The other types: random bytes, their f16 scales set to finite values.
    let halves: &[usize] = match ty {
        GgmlType::Q5_0 => &[0],
        GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[],
    };
    if !halves.is_empty() {
        let (elems, size) = ty.block().unwrap();
        for _ in 0..rows * cols / elems as usize {
            let mut b: Vec<u8> = (0..size).map(|_| (rng.uniform() * 256.0) as u8).collect();
            for &at in halves {
                b[at..at + 2].copy_from_slice(&scale(rng));
            }
            bytes.extend(b);
        }
        return bytes;
    }
    for _ in 0..rows * cols / 32 {
        match ty {
            GgmlType::Q4_0 | GgmlType::Q4_1 => {
                bytes.extend(scale(rng));
                if ty == GgmlType::Q4_1 {
                    bytes.extend(scale(rng));
                }
                bytes.extend((0..16).map(|_| (rng.uniform() * 256.0) as u8));
            }
            _ => {
                bytes.extend(scale(rng));
                bytes.extend((0..32).map(|_| (rng.uniform() * 256.0) as u8));
            }
        }
    }
    let size = match ty {
        GgmlType::Q4_0 => BlockQ4_0::BYTES,
        GgmlType::Q4_1 => BlockQ4_1::BYTES,
        _ => BlockQ8_0::BYTES,
    };
    assert_eq!(bytes.len(), rows * cols / 32 * size);
    bytes
}

fn randn<D: Backend<f32>>(dims: &[usize], rng: &mut Rng) -> RawTensor<D, f32> {
    let n = dims.iter().product();
    RawTensor::from_vec((0..n).map(|_| rng.normal() as f32).collect(), dims)
}

/// Within `tol` of the largest magnitude in `want` (products of long rows cancel,
/// so one element's own size says little about its rounding).
fn close_overall(got: &[f32], want: &[f32], tol: f32, what: &str) {
    let top = want.iter().fold(1.0f32, |m, w| m.max(w.abs()));
    close(got, want, tol * top, what);
}

fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: element {i} is {g}, expected {w}"
        );
    }
}

/// Every block type (ggml's own blocks for Q4_0, Q4_1 and Q8_0, sub-blocks for
/// the others), m on both sides of the GEMV/dense switch (70 crosses the
/// tensor-core kernel's 64-row tiles), each fused extra; rows of x short enough
/// for the GPU kernel to stage in shared memory and one longer (k > 2048), and a
/// W so wide that a workgroup takes several groups of outputs. Products of many
/// rows are within `many_tol` (relative to the largest output): on tensor cores
/// their operands are rounded to f16. Fewer rows (the GEMV) are within 1e-5 with
/// [`Activations::F32`] and within `int8_tol` by default ([`Activations::Int8`]).
fn qmatmul_matches_dense<D: InferenceBackend>(many_tol: f32, int8_tol: f32) {
    let mut rng = Rng::seed(1);
    let shapes = [(48, 96), (8, 2112), (40_000, 64)];
    let k_shapes = [(48, 256), (8, 2304), (20_000, 256)];
    let types = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];
    for (ty, (n, k)) in types.into_iter().flat_map(|ty| {
        if ty.block().unwrap().0 == 256 {
            k_shapes
        } else {
            shapes
        }
        .map(|s| (ty, s))
    }) {
        let bytes = random_blocks(ty, n, k, &mut rng);
        let w = QTensor::<D>::from_blocks(ty, n, k, &bytes).unwrap();
        let dense = w.dequantize();
        let reference: Vec<f32> = volta::io::quant::dequantize(ty, &bytes, (n * k) as u64).unwrap();
        close(&dense.to_vec(), &reference, 0.0, "dequantize");
        let ms: &[usize] = if n > 1000 { &[1] } else { &[1, 3, 6, 12, 70] };
        for &m in ms {
            let x = randn::<D>(&[m, k], &mut rng);
            let scale = randn::<D>(&[k], &mut rng);
            let resid = randn::<D>(&[m, n / 2], &mut rng);
            let plain_want = x.matmul(&dense.transpose_last());
            // norm → product → glu → add
            let normed = x
                .normalize(1, false, 1e-5)
                .binary(BinaryOp::Mul, &scale.reshape(&[1, k]).expand(&[m, k]));
            let y = normed.matmul(&dense.transpose_last());
            let glu = y
                .narrow(1, 0, n / 2)
                .unary(UnaryOp::Silu)
                .binary(BinaryOp::Mul, &y.narrow(1, n / 2, n / 2));
            let fused_want = glu.binary(BinaryOp::Add, &resid);
            let modes = if m > QMATMUL_GEMV_ROWS {
                vec![(Activations::default(), many_tol)]
            } else {
                vec![(Activations::F32, 1e-5), (Activations::Int8, int8_tol)]
            };
            for (activations, tol) in modes {
                let what = format!("{ty} m={m} {activations:?}");
                let plain = x.qmatmul(
                    &w,
                    QMatmulOptions {
                        activations,
                        ..Default::default()
                    },
                );
                close_overall(&plain.to_vec(), &plain_want.to_vec(), tol, &what);
                let got = x.qmatmul(
                    &w,
                    QMatmulOptions {
                        norm: Some((&scale, 1e-5)),
                        glu: true,
                        add: Some(&resid),
                        activations,
                    },
                );
                close_overall(
                    &got.to_vec(),
                    &fused_want.to_vec(),
                    tol,
                    &format!("{what} fused"),
                );
            }
        }
        let ids = RawTensor::<D, u32>::from_vec(vec![5, 0, 47], &[3]);
        if n != 48 {
            continue;
        }
        let rows = w.rows(&ids).to_vec();
        close(&rows[..k], &reference[5 * k..6 * k], 0.0, "rows");
        close(&rows[2 * k..], &reference[47 * k..48 * k], 0.0, "rows");
    }
    // A weight as wide as a model's output matrix times a batch's few rows
    // (the quantised GEMM where the backend has one, else the GEMV), with the
    // norm fused, as a batch's last product has it.
    for ty in [GgmlType::Q8_0, GgmlType::Q4_1] {
        let (n, k, m) = (32_768, 512, 3);
        let bytes = random_blocks(ty, n, k, &mut rng);
        let w = QTensor::<D>::from_blocks(ty, n, k, &bytes).unwrap();
        let dense = w.dequantize();
        let x = randn::<D>(&[m, k], &mut rng);
        let scale = randn::<D>(&[k], &mut rng);
        let normed = x
            .normalize(1, false, 1e-5)
            .binary(BinaryOp::Mul, &scale.reshape(&[1, k]).expand(&[m, k]));
        let opts = QMatmulOptions {
            norm: Some((&scale, 1e-5)),
            activations: Activations::F32,
            ..Default::default()
        };
        close_overall(
            &x.qmatmul(&w, opts).to_vec(),
            &normed.matmul(&dense.transpose_last()).to_vec(),
            many_tol.max(1e-5),
            &format!("wide {ty} m={m}"),
        );
    }
    // A K-quant mix's fused projection: parts of different types, one matrix.
    let k = 256;
    let parts: Vec<(GgmlType, usize, Vec<u8>)> = [
        (GgmlType::Q5_0, 8),
        (GgmlType::Q8_0, 4),
        (GgmlType::Q6_K, 4),
    ]
    .into_iter()
    .map(|(ty, rows)| (ty, rows, random_blocks(ty, rows, k, &mut rng)))
    .collect();
    let refs: Vec<(GgmlType, usize, &[u8])> = parts
        .iter()
        .map(|(t, r, b)| (*t, *r, b.as_slice()))
        .collect();
    let w = QTensor::<D>::from_parts(&refs, k).unwrap();
    let mut reference = Vec::new();
    for (ty, rows, bytes) in &parts {
        reference.extend(volta::io::quant::dequantize(*ty, bytes, (rows * k) as u64).unwrap());
    }
    close(
        &w.dequantize().to_vec(),
        &reference,
        0.0,
        "mixed dequantize",
    );
    let x = randn::<D>(&[1, k], &mut rng);
    let dense = RawTensor::<D, f32>::from_vec(reference, &[16, k]);
    let want = x.matmul(&dense.transpose_last()).to_vec();
    for (activations, tol) in [(Activations::F32, 1e-5), (Activations::Int8, int8_tol)] {
        let opts = QMatmulOptions {
            activations,
            ..Default::default()
        };
        close_overall(
            &x.qmatmul(&w, opts).to_vec(),
            &want,
            tol,
            &format!("mixed qmatmul {activations:?}"),
        );
    }
}

#[test]
fn qmatmul_matches_dense_on_the_cpu() {
    // 8-bit activations: each element of x (unit normal) is off by up to half a
    // step, amax/254 of its block (amax ≈ 2.2 over 32), uniformly, so an output
    // is off by a random walk of σ ≈ ‖w‖·2.2/(127·√12) ≈ 0.5%·‖w‖, where a typical
    // output is ‖w‖ and the largest of 48 (the test's unit) over 2‖w‖: σ ≈ 0.25%
    // of the unit, and 2e-2 is 8σ. (At 3e-3 the test fails: it does see the int8
    // path.) The GPU gets the same rows in f32.
    qmatmul_matches_dense::<Cpu>(1e-5, 2e-2);
}

/// `T` tokens at `start`, written into a cache and attended, equal rope + causal
/// attention over the concatenated keys: prompts (the GPU's flash-attention
/// forward, with tiles the lengths cross; at head width 64 on tensor cores where
/// the adapter has them, within `prompt_tol`) and single tokens (one decode
/// kernel that writes its own key and value; launched for more than 256
/// positions it splits the keys and a second kernel combines the splits).
fn attend_matches_composed<D: InferenceBackend + Replay>(d: usize, prompt_tol: f32) {
    let mut rng = Rng::seed(2);
    let (heads, kv, cap) = (4, 2, 1200);
    let shape = AttnShape {
        heads,
        kv_heads: kv,
        head_dim: d,
        capacity: cap,
    };
    let width = (heads + 2 * kv) * d;
    let rope = RawTensor::<D, f32>::from_vec(rope_table(cap, d, 10_000.0), &[cap, d / 2, 2]);
    let mut cache = <D as Memory<f32>>::full(2 * kv * cap * d, 0.0);
    let mut all_k: Vec<RawTensor<D, f32>> = Vec::new();
    let mut all_v: Vec<RawTensor<D, f32>> = Vec::new();
    let mut start = 0;
    for t in [70, 1, 1, 9, 1, 950, 1, 1, 17, 1] {
        let qkv = randn::<D>(&[t, width], &mut rng);
        let pos = RawTensor::<D, u32>::from_vec(vec![start as u32], &[1]);
        // Single tokens launch for the positions a replayed step is captured
        // for (on the GPU: 256, the keys whole, until the cache passes them,
        // then a power of two within the capacity, the keys split).
        let max_len = if t == 1 {
            D::decode_len(start + 1, cap)
        } else {
            start + t
        };
        let got = D::attend(
            qkv.view(),
            rope.view(),
            pos.view(),
            &mut cache,
            &shape,
            max_len,
        );
        let got = RawTensor::<D, f32>::leaf(got, Layout::contiguous(&[t, heads * d])).to_vec();
        // The composition: (T, n·d) → (1, n, T, d), rope at `start`.
        let split = |a: usize, n: usize| {
            qkv.narrow(1, a * d, n * d)
                .reshape(&[1, t, n, d])
                .permute(&[0, 2, 1, 3])
        };
        let q = split(0, heads).rope(start, 10_000.0);
        all_k.push(split(heads, kv).rope(start, 10_000.0));
        all_v.push(split(heads + kv, kv));
        let k = RawTensor::cat(&all_k, 2);
        let v = RawTensor::cat(&all_v, 2);
        let want = q
            .causal_attention(&k, &v, start)
            .permute(&[0, 2, 1, 3])
            .reshape(&[t, heads * d]);
        let tol = if t > 1 { prompt_tol } else { 1e-4 };
        close_overall(
            &got,
            &want.to_vec(),
            tol,
            &format!("d {d}: {t} tokens at {start}"),
        );
        start += t;
    }
}

#[test]
fn attend_matches_composed_on_the_cpu() {
    attend_matches_composed::<Cpu>(8, 1e-4);
    attend_matches_composed::<Cpu>(64, 1e-4);
}

#[cfg(feature = "gpu")]
mod gpu {
    use super::*;
    use volta::Gpu;

    #[test]
    fn qmatmul_matches_dense_on_the_gpu() {
        let _gpu = crate::support::gpu_shared();
        let info = Gpu::init().expect("a GPU adapter");
        // f16 operands: a relative error near 2⁻¹¹ per operand.
        let many_tol = if info.tensor_cores { 4e-3 } else { 1e-5 };
        // The GPU computes with f32 activations whichever the options ask.
        qmatmul_matches_dense::<Gpu>(many_tol, 1e-5);
    }

    #[test]
    fn attend_matches_composed_on_the_gpu() {
        let _gpu = crate::support::gpu_alone();
        let info = Gpu::init().expect("a GPU adapter");
        attend_matches_composed::<Gpu>(8, 1e-4);
        let tol = if info.tensor_cores { 5e-3 } else { 1e-4 };
        attend_matches_composed::<Gpu>(64, tol);
    }

    /// A captured step replays with new inputs: a quantised embedding lookup of a
    /// token id held in a device buffer, then a matmul; overwriting the id and
    /// replaying gives the next row's result, and other work in between is intact.
    #[test]
    fn a_captured_step_replays_with_new_inputs() {
        let _gpu = crate::support::gpu_alone();
        let mut rng = Rng::seed(3);
        let (n, k) = (16, 64);
        let bytes = random_blocks(GgmlType::Q8_0, n, k, &mut rng);
        let table = QTensor::<Gpu>::from_blocks(GgmlType::Q8_0, n, k, &bytes).unwrap();
        let w = QTensor::<Gpu>::from_blocks(
            GgmlType::Q4_1,
            8,
            k,
            &random_blocks(GgmlType::Q4_1, 8, k, &mut rng),
        )
        .unwrap();
        let expect = |id: u32| {
            let ids = RawTensor::<Gpu, u32>::from_vec(vec![id], &[1]);
            table
                .rows(&ids)
                .qmatmul(&w, QMatmulOptions::default())
                .to_vec()
        };
        let mut id = <Gpu as Memory<u32>>::from_vec(vec![3]);
        let (out, graph) = Gpu::capture(|| {
            let ids = RawTensor::<Gpu, u32>::leaf(id.clone(), Layout::contiguous(&[1]));
            table.rows(&ids).qmatmul(&w, QMatmulOptions::default())
        });
        let graph = graph.expect("the GPU records a graph");
        assert_eq!(graph.launches(), 2);
        assert_eq!(out.to_vec(), expect(3));
        for next in [7, 0, 15] {
            Gpu::overwrite(&mut id, &[next]);
            let unrelated = randn::<Gpu>(&[4, 4], &mut rng).scalar(BinaryOp::Mul, 2.0);
            Gpu::replay(&graph);
            assert_eq!(out.to_vec(), expect(next), "token {next}");
            assert_eq!(unrelated.to_vec().len(), 16);
        }
    }

    /// Two captured steps replayed in turn, each read back before the other
    /// runs: a read-back encodes the graph replayed last again, ahead of its next
    /// replay, and the other graph's replay must neither submit those commands
    /// nor lose its own; a graph replayed twice running submits them.
    #[test]
    fn captured_steps_replayed_in_turn_each_give_their_own_result() {
        let _gpu = crate::support::gpu_alone();
        let mut rng = Rng::seed(4);
        let k = 64;
        let table = QTensor::<Gpu>::from_blocks(
            GgmlType::Q8_0,
            16,
            k,
            &random_blocks(GgmlType::Q8_0, 16, k, &mut rng),
        )
        .unwrap();
        let weight = |rng: &mut Rng| {
            let bytes = random_blocks(GgmlType::Q4_1, 8, k, rng);
            QTensor::<Gpu>::from_blocks(GgmlType::Q4_1, 8, k, &bytes).unwrap()
        };
        let (wa, wb) = (weight(&mut rng), weight(&mut rng));
        let step = |w: &QTensor<Gpu>, id: &<Gpu as Memory<u32>>::Buffer| {
            let ids = RawTensor::<Gpu, u32>::leaf(id.clone(), Layout::contiguous(&[1]));
            table.rows(&ids).qmatmul(w, QMatmulOptions::default())
        };
        let expect = |w: &QTensor<Gpu>, id: u32| {
            let ids = RawTensor::<Gpu, u32>::from_vec(vec![id], &[1]);
            table
                .rows(&ids)
                .qmatmul(w, QMatmulOptions::default())
                .to_vec()
        };
        let mut id = <Gpu as Memory<u32>>::from_vec(vec![0]);
        let (out_a, graph_a) = Gpu::capture(|| step(&wa, &id));
        let (out_b, graph_b) = Gpu::capture(|| step(&wb, &id));
        let (graph_a, graph_b) = (graph_a.unwrap(), graph_b.unwrap());
        for (i, which) in ["a", "b", "b", "a", "a", "b", "a"].into_iter().enumerate() {
            let next = 1 + i as u32;
            Gpu::overwrite(&mut id, &[next]);
            let (got, w) = if which == "a" {
                Gpu::replay(&graph_a);
                (out_a.to_vec(), &wa)
            } else {
                Gpu::replay(&graph_b);
                (out_b.to_vec(), &wb)
            };
            assert_eq!(got, expect(w, next), "replay {i}, of graph {which}");
        }
    }
}
