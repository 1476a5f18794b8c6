//! Volta inside a browser: a representative set of the GPU parity tests, run in
//! headless Chromium on its WebGPU (SwiftShader on a machine without a GPU) and
//! compared with the CPU device at the native tests' tolerances. Everything that
//! reads the GPU awaits (`Gpu::init_async`, `to_vec_async`, `Gpu::sync_async`):
//! a browser cannot block.
//!
//! Run by `scripts/test.sh` (see `scripts/browser-tests.sh`):
//! `cargo test -p volta-web --target wasm32-unknown-unknown` with
//! `wasm-bindgen-test-runner` as the target's runner and chromedriver.
#![cfg(target_arch = "wasm32")]

use volta::backend::Backend;
use volta::backend::gpu::GpuError;
use volta::io::gguf::Gguf;
use volta::models::llama::Llama;
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

#[path = "../../volta/tests/support/gguf_writer.rs"]
#[allow(dead_code)] // the writer's field-by-field methods serve volta's own tests
mod gguf_writer;

wasm_bindgen_test_configure!(run_in_browser);

/// Opens the page's GPU (once; later calls return the same device).
async fn gpu() -> volta::backend::gpu::GpuInfo {
    Gpu::init_async()
        .await
        .expect("WebGPU: headless Chromium needs --enable-unsafe-webgpu")
}

/// `got` (the GPU's) against `want` (the CPU's): each element within `tol` of the
/// larger of 1 and the reference's magnitude.
fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}: element {i}: GPU {g}, CPU {w}"
        );
    }
}

/// The same values on both devices.
fn pair<S: ConstShape>(seed: u64) -> (Tensor<S, Cpu>, Tensor<S, Gpu>) {
    let c = Tensor::<S, Cpu>::randn(&mut Rng::seed(seed));
    let g = c.to::<Gpu>();
    (c, g)
}

#[wasm_bindgen_test]
async fn the_adapter_is_the_browsers_and_blocking_calls_are_typed_errors() {
    let info = gpu().await;
    assert!(info.backend.contains("WebGpu"), "backend {}", info.backend);
    assert_eq!(Gpu::info(), Some(info));
    let x = Tensor::<Rank1<3>, Gpu>::from_array([1.0, -2.0, 3.0]);
    assert_eq!(x.try_to_vec(), Err(GpuError::WouldBlock));
    assert_eq!(Gpu::sync(), Err(GpuError::WouldBlock));
    assert_eq!(x.relu().to_vec_async().await, vec![1.0, 0.0, 3.0]);
    Gpu::sync_async().await.unwrap();
}

#[wasm_bindgen_test]
async fn elementwise_ops_and_fused_chains() {
    gpu().await;
    let (a, ga) = pair::<Rank2<37, 53>>(1);
    let (b, gb) = pair::<Rank2<37, 53>>(2);
    let (r, gr) = pair::<Rank1<53>>(3);
    // One fused kernel on the GPU: broadcasts, binary and unary ops, scalars.
    fn chain<D: Backend<f32>>(
        a: &Tensor<Rank2<37, 53>, D>,
        b: &Tensor<Rank2<37, 53>, D>,
        r: &Tensor<Rank1<53>, D>,
    ) -> Tensor<Rank2<37, 53>, D> {
        a.mul(b)
            .add(&r.broadcast::<Rank2<37, 53>, _>())
            .relu()
            .mul_scalar(2.0)
            .sub(&a.tanh())
            .gelu()
            .add(&b.sigmoid().exp())
    }
    let want = chain(&a, &b, &r).to_vec();
    let got = chain(&ga, &gb, &gr).to_vec_async().await;
    close("fused chain", &got, &want, 1e-4);
    let got = ga
        .silu()
        .div(&gb.abs().add_scalar(1.0))
        .to_vec_async()
        .await;
    close(
        "silu / (|b| + 1)",
        &got,
        &a.silu().div(&b.abs().add_scalar(1.0)).to_vec(),
        1e-4,
    );
}

#[wasm_bindgen_test]
async fn reductions_and_softmax() {
    gpu().await;
    let (a, ga) = pair::<Rank2<61, 130>>(4);
    close(
        "sum_all",
        &ga.sum_all().to_vec_async().await,
        &a.sum_all().to_vec(),
        1e-4,
    );
    close(
        "max_all",
        &ga.max_all().to_vec_async().await,
        &a.max_all().to_vec(),
        0.0,
    );
    let rows: Tensor<Rank1<61>, Gpu> = ga.sum();
    let want: Tensor<Rank1<61>, Cpu> = a.sum();
    close("row sums", &rows.to_vec_async().await, &want.to_vec(), 1e-4);
    let cols: Tensor<Rank1<130>, Gpu> = ga.max();
    let want: Tensor<Rank1<130>, Cpu> = a.max();
    close(
        "column maxima",
        &cols.to_vec_async().await,
        &want.to_vec(),
        0.0,
    );
    close(
        "softmax",
        &ga.softmax::<Axis<1>>().to_vec_async().await,
        &a.softmax::<Axis<1>>().to_vec(),
        1e-5,
    );
    close(
        "log_softmax",
        &ga.log_softmax::<Axis<0>>().to_vec_async().await,
        &a.log_softmax::<Axis<0>>().to_vec(),
        1e-5,
    );
}

#[wasm_bindgen_test]
async fn matmul_plain_transposed_and_batched() {
    gpu().await;
    let (a, ga) = pair::<Rank2<67, 45>>(5);
    let (b, gb) = pair::<Rank2<45, 29>>(6);
    close(
        "67×45 · 45×29",
        &ga.matmul(&gb).to_vec_async().await,
        &a.matmul(&b).to_vec(),
        1e-4,
    );
    let (bt, gbt) = pair::<Rank2<29, 45>>(7);
    close(
        "a · bᵀ",
        &ga.matmul(&gbt.t()).to_vec_async().await,
        &a.matmul(&bt.t()).to_vec(),
        1e-4,
    );
    let (x, gx) = pair::<Rank3<3, 17, 40>>(8);
    let (y, gy) = pair::<Rank3<3, 40, 33>>(9);
    close(
        "batched",
        &gx.matmul(&gy).to_vec_async().await,
        &x.matmul(&y).to_vec(),
        1e-4,
    );
}

/// Three Adam steps of the same model on both devices, each from its own `loss`:
/// the losses stay with the CPU's.
async fn three_steps<C: Module<Cpu, f32>, G: Module<Gpu, f32>>(
    what: &str,
    (cpu, loss): (&mut C, impl Fn(&C) -> Tensor<(), Cpu>),
    (gpu, gpu_loss): (&mut G, impl Fn(&G) -> Tensor<(), Gpu>),
) {
    let mut opt = Adam::<Cpu>::new(1e-2);
    let mut gopt = Adam::<Gpu>::new(1e-2);
    for step in 0..3 {
        let l = loss(cpu);
        let gl = gpu_loss(gpu);
        close(
            &format!("{what} loss at step {step}"),
            &gl.to_vec_async().await,
            &l.to_vec(),
            1e-4,
        );
        opt.step(cpu, &l.backward());
        gopt.step(gpu, &gl.backward());
        Gpu::sync_async().await.unwrap();
    }
}

model! {
    /// A small CNN: convolution, batch norm, pooling and a linear head.
    pub struct Cnn for (B, 1, 8, 8) -> (B, 10) {
        conv1: Conv2d<8, kernel = 3, padding = 1>,
        bn1: BatchNorm2d,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<16, kernel = 3, padding = 1>,
        relu,
        pool2: AvgPool2d<2>,
        flatten,
        fc: Linear<10>,
    }
}

/// Convolution and pooling forward, then training steps of a `model!` network:
/// the losses and the weights stay with the CPU's.
#[wasm_bindgen_test]
async fn a_model_training_step_matches_the_cpu() {
    gpu().await;
    let mut cpu = Cnn::<Cpu>::new(&mut Rng::seed(10));
    let mut gpu_net: Cnn<Gpu> = cpu.to::<Gpu>();
    let (x, gx) = pair::<Rank4<16, 1, 8, 8>>(11);
    let labels: Vec<u32> = (0..16).map(|i| (i * 3 % 10) as u32).collect();
    let y = Tensor::<Rank1<16>, Cpu, u32>::from_vec(labels.clone()).unwrap();
    let gy = Tensor::<Rank1<16>, Gpu, u32>::from_vec(labels).unwrap();
    close(
        "CNN forward",
        &gpu_net.forward(&gx).to_vec_async().await,
        &cpu.forward(&x).to_vec(),
        1e-4,
    );
    three_steps(
        "CNN",
        (&mut cpu, |m: &Cnn<Cpu>| cross_entropy(&m.forward(&x), &y)),
        (&mut gpu_net, |m: &Cnn<Gpu>| {
            cross_entropy(&m.forward(&gx), &gy)
        }),
    )
    .await;
    close(
        "fc weights after 3 Adam steps",
        &gpu_net.fc.weight.to_vec_async().await,
        &cpu.fc.weight.to_vec(),
        1e-3,
    );
}

model! {
    /// A GPT: 11 tokens, width 16, one block of two heads, at most 8 positions.
    pub struct TinyGpt for (B, T) -> (B, T, 11) {
        wte: Embedding<11, 16>,
        wpe: PositionalEmbedding<8>,
        h: [TransformerBlock<2, ff = 32>; 1],
        ln_f: LayerNorm,
        lm_head: Linear<11>,
    }
}

/// A transformer's training steps (token ids through an embedding, fused causal
/// attention, LayerNorm, GELU): the browser's WebGPU has no `f32` atomics, so the
/// attention's backward takes its two launches, in WebGPU's default workgroup
/// memory. The losses and the weights stay with the CPU's.
#[wasm_bindgen_test]
async fn a_gpt_training_step_matches_the_cpu() {
    gpu().await;
    let mut cpu = TinyGpt::<Cpu>::new(&mut Rng::seed(12));
    let mut gpu_net: TinyGpt<Gpu> = cpu.to::<Gpu>();
    let (b, t) = (3, 7);
    let ids: Vec<u32> = (0..b * t).map(|i| (i * 5 % 11) as u32).collect();
    let next: Vec<u32> = (0..b * t).map(|i| ((i * 5 + 3) % 11) as u32).collect();
    let x = Tensor::<(usize, usize), Cpu, u32>::from_vec_shaped(ids.clone(), (b, t)).unwrap();
    let gx = Tensor::<(usize, usize), Gpu, u32>::from_vec_shaped(ids, (b, t)).unwrap();
    let y = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(next.clone(), (b * t,)).unwrap();
    let gy = Tensor::<(usize,), Gpu, u32>::from_vec_shaped(next, (b * t,)).unwrap();
    let rows = |logits: Tensor<(usize, usize, Const<11>), Cpu>| {
        Tensor::<(usize, Const<11>), Cpu>::try_from_raw(logits.raw().reshape(&[b * t, 11])).unwrap()
    };
    let grows = |logits: Tensor<(usize, usize, Const<11>), Gpu>| {
        Tensor::<(usize, Const<11>), Gpu>::try_from_raw(logits.raw().reshape(&[b * t, 11])).unwrap()
    };
    three_steps(
        "GPT",
        (&mut cpu, |m: &TinyGpt<Cpu>| {
            cross_entropy(&rows(m.forward(&x)), &y)
        }),
        (&mut gpu_net, |m: &TinyGpt<Gpu>| {
            cross_entropy(&grows(m.forward(&gx)), &gy)
        }),
    )
    .await;
    close(
        "the attention's projection after 3 Adam steps",
        &gpu_net.h[0].attn.c_attn_weight.to_vec_async().await,
        &cpu.h[0].attn.c_attn_weight.to_vec(),
        1e-3,
    );
}

type Tiny<D> = Llama<D, 2, 64, 96, 4, 2, 40>;

/// The language model's kernels (quantised matmul, RMSNorm, RoPE, attention over
/// the KV cache, the captured and replayed decode step) on a tiny random GGUF.
#[wasm_bindgen_test]
async fn a_tiny_random_llama_matches_the_cpu() {
    gpu().await;
    let dims = gguf_writer::LlamaDims {
        layers: 2,
        hidden: 64,
        ffn: 96,
        heads: 4,
        kv_heads: 2,
        vocab: 40,
    };
    let gguf = Gguf::parse("tiny.gguf", gguf_writer::tiny_llama(dims, 3)).expect("it parses");
    let mut cpu = Tiny::<Cpu>::from_gguf(&gguf).expect("the weights load");
    // The GPU's activations are f32; the CPU's decode quantises them by default.
    cpu.set_activations(volta::tensor::Activations::F32);
    let gpu_model = Tiny::<Gpu>::from_gguf(&gguf).expect("the weights load");
    let (mut cache, mut gcache) = (cpu.cache(), gpu_model.cache());
    let prompt = [1, 7, 39, 0, 12];
    close(
        "prompt logits",
        &gpu_model.forward(&prompt, &mut gcache).to_vec_async().await,
        &cpu.forward(&prompt, &mut cache).to_vec(),
        2e-3,
    );
    // The first single token captures the decode step; the next ones replay it.
    for t in [5, 6, 7] {
        close(
            &format!("logits after token {t}"),
            &gpu_model.forward(&[t], &mut gcache).to_vec_async().await,
            &cpu.forward(&[t], &mut cache).to_vec(),
            2e-3,
        );
    }
}
