//! Fused attention on `Gpu` against `Cpu`: the output and the gradients of
//! queries, keys and values, over lengths that are not a multiple of the kernels'
//! tiles (and 1), grouped heads, head widths 6 to 320 (past one launch's 256),
//! dropout on the weights, causal at an offset and not causal, padded batches,
//! strided queries (a permuted `[B, T, H, d]` store). Small shapes: CI runs this on lavapipe.
#![cfg(feature = "gpu")]

use volta::backend::{AttentionSpec, Backend};
use volta::prelude::*;
use volta::{Gradients, RawTensor};
use volta_kernels::{BinaryOp, ReduceOp};

/// Deterministic values in (−2, 2).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.6180339 + seed as f32 * 0.371).fract() - 0.5) * 4.0)
        .collect()
}

struct Case {
    b: usize,
    h: usize,
    hkv: usize,
    t: usize,
    s: usize,
    d: usize,
    causal: Option<usize>,
    /// Each batch element's keys (padding).
    keys: Option<Vec<std::ops::Range<usize>>>,
}

/// The output and the gradients of `Σ out·w` for `(q_store, k, v)`, with
/// dropout `p` on the attention weights.
fn run<D: Backend<f32>>(c: &Case, p: f64) -> (Vec<f32>, [Vec<f32>; 3]) {
    let leaf = |dims: &[usize], seed| {
        RawTensor::<D, f32>::from_vec(values(dims.iter().product(), seed), dims).tracked_leaf()
    };
    let q_store = leaf(&[c.b, c.t, c.h, c.d], 1);
    let (k, v) = (
        leaf(&[c.b, c.hkv, c.s, c.d], 2),
        leaf(&[c.b, c.hkv, c.s, c.d], 3),
    );
    let q = q_store.permute(&[0, 2, 1, 3]);
    let spec = AttentionSpec {
        dropout: p,
        seed: 11,
        keys: c.keys.clone().map(Into::into),
        ..AttentionSpec::new(1.0 / (c.d as f64).sqrt(), c.causal)
    };
    let out = q.attention_with(&k, &v, spec);
    let w = RawTensor::<D, f32>::from_vec(values(out.layout().numel(), 4), out.dims());
    let got = out.to_vec();
    let grads: Gradients<D> = out
        .binary(BinaryOp::Mul, &w)
        .reduce_all(ReduceOp::Sum)
        .backward();
    let grad = |x: &RawTensor<D, f32>| grads.get_raw(x.id()).expect("a gradient").to_vec();
    (got, [grad(&q_store), grad(&k), grad(&v)])
}

#[track_caller]
fn close(what: &str, cpu: &[f32], gpu: &[f32]) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: lengths differ");
    for (i, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        assert!(
            (c - g).abs() <= 1e-4 + 1e-4 * c.abs(),
            "{what}[{i}]: cpu {c} vs gpu {g}"
        );
    }
}

#[test]
fn fused_attention_and_its_gradients_match_the_cpu() {
    let _gpu = crate::support::gpu_shared();
    let cases = [
        // A width that is not a multiple of 4 (the kernels read vec4s).
        Case {
            b: 1,
            h: 2,
            hkv: 1,
            t: 9,
            s: 9,
            d: 6,
            causal: None,
            keys: None,
        },
        Case {
            b: 1,
            h: 1,
            hkv: 1,
            t: 1,
            s: 1,
            d: 8,
            causal: Some(0),
            keys: None,
        },
        Case {
            b: 2,
            h: 4,
            hkv: 2,
            t: 70,
            s: 70,
            d: 16,
            causal: Some(0),
            keys: None,
        },
        Case {
            b: 1,
            h: 3,
            hkv: 1,
            t: 5,
            s: 67,
            d: 32,
            causal: Some(62),
            keys: None,
        },
        Case {
            b: 2,
            h: 2,
            hkv: 2,
            t: 33,
            s: 129,
            d: 64,
            causal: None,
            keys: None,
        },
        Case {
            b: 1,
            h: 6,
            hkv: 3,
            t: 131,
            s: 131,
            d: 12,
            causal: Some(0),
            keys: None,
        },
        // Wide heads: a row of 128 (and 256) floats in workgroup memory, fewer
        // rows per pass, each thread holding four (eight) vec4 columns.
        Case {
            b: 1,
            h: 2,
            hkv: 1,
            t: 40,
            s: 40,
            d: 80,
            causal: Some(0),
            keys: None,
        },
        Case {
            b: 1,
            h: 1,
            hkv: 1,
            t: 17,
            s: 23,
            d: 200,
            causal: None,
            keys: None,
        },
        // Wider than one launch's 256 features: a launch per slice of the
        // head, each computing the scores over all of it. (A wide head read as
        // scalars, e.g. 258, translates in the kernels' unit test; on
        // lavapipe its pipelines take over a minute to build.)
        Case {
            b: 1,
            h: 2,
            hkv: 1,
            t: 20,
            s: 20,
            d: 320,
            causal: Some(0),
            keys: None,
        },
        // Padded batches: left padding under a causal mask (the first rows see
        // no key), a batch element that is all padding, and blocks of keys
        // that no query sees.
        Case {
            b: 3,
            h: 2,
            hkv: 1,
            t: 70,
            s: 70,
            d: 16,
            causal: Some(0),
            keys: Some(vec![0..70, 5..40, 66..70]),
        },
        Case {
            b: 2,
            h: 2,
            hkv: 2,
            t: 33,
            s: 129,
            d: 64,
            causal: None,
            keys: Some(vec![0..0, 64..129]),
        },
    ];
    // The default plan (the backward in chunks of 16 features), then the
    // browser's: WebGPU's default 16 KiB of workgroup memory, chunks of 8, and
    // no atomic sums (as deterministic runs and browsers, which lack `f32`
    // atomics, take the backward in two launches); and dropout on the weights
    // (the devices drop the same ones).
    let runs = [
        (None, 0.0, false),
        (None, 0.2, false),
        (Some(16 << 10), 0.2, true),
    ];
    for (c, (cap, p, deterministic)) in cases
        .iter()
        .flat_map(|c| runs.iter().map(move |&run| (c, run)))
    {
        Gpu::set_attention_workgroup_bytes(cap);
        Gpu::set_deterministic(deterministic);
        let what = format!(
            "B {} H {} Hkv {} T {} S {} d {} causal {:?} keys {:?}, workgroup memory {cap:?}, \
             dropout {p}, deterministic {deterministic}",
            c.b, c.h, c.hkv, c.t, c.s, c.d, c.causal, c.keys
        );
        let (cpu_out, cpu_grads) = run::<Cpu>(c, p);
        let (gpu_out, gpu_grads) = run::<Gpu>(c, p);
        close(&format!("{what}: out"), &cpu_out, &gpu_out);
        for (name, (a, b)) in ["dq", "dk", "dv"]
            .iter()
            .zip(cpu_grads.iter().zip(&gpu_grads))
        {
            close(&format!("{what}: {name}"), a, b);
        }
        if deterministic {
            let (again_out, again_grads) = run::<Gpu>(c, p);
            assert_eq!(gpu_out, again_out, "{what}: out repeats bit for bit");
            assert_eq!(
                gpu_grads, again_grads,
                "{what}: the gradients repeat bit for bit"
            );
        }
    }
    Gpu::set_attention_workgroup_bytes(None);
    Gpu::set_deterministic(false);
}

/// q, k and v as the heads of one projection `x` `[B, T, (H + 2·Hkv)·d]` (how
/// `MultiHeadAttention` splits its fused projection), each viewed as `[B, H, T,
/// d]`.
#[allow(clippy::type_complexity)]
fn heads<D: Backend<f32>>(
    (b, h, hkv, t, d): (usize, usize, usize, usize, usize),
) -> (RawTensor<D, f32>, [RawTensor<D, f32>; 3]) {
    let width = (h + 2 * hkv) * d;
    let x = RawTensor::<D, f32>::from_vec(values(b * t * width, 5), &[b, t, width]).tracked_leaf();
    let part = |from: usize, n: usize| {
        x.narrow(2, from * d, n * d)
            .reshape(&[b, t, n, d])
            .permute(&[0, 2, 1, 3])
    };
    let qkv = [part(0, h), part(h, hkv), part(h + hkv, hkv)];
    (x, qkv)
}

/// The gradient of `Σ out·w` with respect to the projection `x`.
fn projection_grad<D: Backend<f32>>(shape: (usize, usize, usize, usize, usize)) -> Vec<f32> {
    let (x, [q, k, v]) = heads::<D>(shape);
    let out = q.attention_with_dropout(&k, &v, Some(0), 0.1, 3);
    let w = RawTensor::<D, f32>::from_vec(values(out.layout().numel(), 4), out.dims());
    let grads: Gradients<D> = out
        .binary(BinaryOp::Mul, &w)
        .reduce_all(ReduceOp::Sum)
        .backward();
    grads.get_raw(x.id()).expect("a gradient").to_vec()
}

/// Attention over the heads of one projection: the projection's gradient (the
/// three heads' gradients concatenated) matches the CPU's, with head offsets
/// that align for storage windows and ones that do not, in one launch and in
/// two. Where they align, the backend writes dq, dk and dv into one buffer
/// through q's, k's and v's own views, so that concatenating them is a view of
/// that buffer and copies nothing.
#[test]
fn attention_over_one_projections_heads_writes_its_gradients_in_one_buffer() {
    use volta::backend::{AttentionSpec, Memory, packed_like};
    let _gpu = crate::support::gpu_shared();
    // (B, H, Hkv, T, d): heads of 64 floats start on 256-byte boundaries; 6
    // and 12 floats do not.
    let shapes = [(2, 2, 2, 33, 64), (1, 2, 1, 9, 6), (2, 4, 2, 20, 12)];
    for (shape, deterministic) in shapes.iter().flat_map(|&s| [(s, false), (s, true)]) {
        Gpu::set_deterministic(deterministic);
        let what = format!("{shape:?}, deterministic {deterministic}");
        close(
            &what,
            &projection_grad::<Cpu>(shape),
            &projection_grad::<Gpu>(shape),
        );
    }
    Gpu::set_deterministic(false);
    let (_, [q, k, v]) = heads::<Gpu>((2, 2, 2, 33, 64));
    let spec = AttentionSpec::new(0.125, Some(0));
    let (out, lse) = <Gpu as Backend<f32>>::attention(q.view(), k.view(), v.view(), &spec);
    let out = RawTensor::<Gpu, f32>::leaf(out, packed_like(q.layout()));
    let lse = RawTensor::<Gpu, f32>::leaf(lse, volta::backend::Layout::contiguous(&[2, 2, 33]));
    let delta = out.reduce(ReduceOp::Sum, 3);
    let [(dq, lq), (dk, lk), (dv, lv)] = <Gpu as Backend<f32>>::attention_backward(
        q.view(),
        k.view(),
        v.view(),
        out.view(),
        lse.view(),
        delta.view(),
        &spec,
    );
    let same = |a, b| <Gpu as Memory<f32>>::same_memory(a, b);
    assert!(
        same(&dq, &dk) && same(&dq, &dv),
        "dq, dk and dv in one buffer"
    );
    assert_eq!([lq, lk, lv], [*q.layout(), *k.layout(), *v.layout()]);
}

/// A transformer block (grouped heads, RoPE, SwiGLU, RMSNorm) moved to the GPU
/// computes what it computes on the CPU: output and every parameter's gradient.
#[test]
fn a_transformer_block_on_the_gpu_matches_the_cpu() {
    use volta::nn::{BlockOptions, FeedForwardKind, NormKind, ToDevice, TransformerBlock};
    let _gpu = crate::support::gpu_shared();
    let options = BlockOptions {
        norm: NormKind::Rms,
        feed_forward: FeedForwardKind::SwiGlu,
        rope: Some(10_000.0),
        bias: false, // as Llama's
        ..BlockOptions::default()
    };
    let mut rng = Rng::seed(5);
    let mut cpu = TransformerBlock::<16, 4, 32, 2>::with_options(options, &mut rng);
    let mut gpu = cpu.to::<Gpu>();
    let x = Tensor::<(Const<2>, usize, Const<16>)>::randn_shaped((Const, 7, Const), &mut rng);
    let (yc, yg) = (cpu.forward(&x), gpu.forward(&x.to::<Gpu>()));
    close("block output", &yc.to_vec(), &yg.to_vec());
    let (gc, gg) = (yc.sum_all().backward(), yg.sum_all().backward());
    let (pc, pg) = (cpu.named_params(), gpu.named_params());
    assert_eq!(pc.len(), 7, "weights only");
    for ((name, c), (_, g)) in pc.iter().zip(&pg) {
        let (c, g) = (gc.get_raw(c.id()), gg.get_raw(g.id()));
        close(
            name,
            &c.expect("a gradient").to_vec(),
            &g.expect("a gradient").to_vec(),
        );
    }
}

/// A block stepped over an [`AttentionCache`](volta::nn::AttentionCache) on the
/// GPU, as a sampler runs it (no gradients: each step's keys and values written
/// in place, the store grown past its first 16 positions), computes what the
/// whole sequence computes on the CPU.
#[test]
fn cached_steps_on_the_gpu_match_the_whole_sequence() {
    use volta::nn::{AttentionCache, ToDevice, TransformerBlock};
    let _gpu = crate::support::gpu_shared();
    let mut rng = Rng::seed(9);
    let cpu = TransformerBlock::<16, 4, 32, 2>::new(&mut rng);
    let gpu = cpu.to::<Gpu>();
    let n = 18;
    let x = Tensor::<(Const<2>, usize, Const<16>)>::randn_shaped((Const, n, Const), &mut rng);
    let whole = cpu.forward(&x).to_vec();
    let _no_grad = volta::no_grad();
    let xg = x.to::<Gpu>();
    let mut cache = AttentionCache::new();
    let mut rows = vec![Vec::new(); 2];
    let mut t = 0;
    for len in [3, 1, 14] {
        let step =
            Tensor::<(Const<2>, usize, Const<16>), Gpu>::try_from_raw(xg.raw().narrow(1, t, len))
                .expect("a step of the sequence");
        let y = gpu.forward_cached(&step, &mut cache).to_vec();
        for (b, r) in rows.iter_mut().enumerate() {
            r.extend_from_slice(&y[b * len * 16..][..len * 16]);
        }
        t += len;
    }
    assert_eq!((cache.len(), cache.capacity()), (n, 32));
    close("cached steps", &whole, &rows.concat());
}
