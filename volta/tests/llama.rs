//! `Llama` from GGUF files: a small random model that these tests write loads into
//! the `Llama` type of its dims and runs; into a type of other dims it is a typed
//! error. The real SmolLM2-135M file's tests are in `smollm2.rs`.
use crate::support;
use support::gguf_writer::{LlamaDims, tiny_llama, tiny_llama_with_context};
use volta::backend::{InferenceBackend, Replay};
use volta::io::gguf::{Gguf, GgufError, GgufErrorKind};
use volta::models::llama::{Llama, SmolLM2_135M};
use volta::tensor::Activations;
use volta::{Cpu, Rank1, Tensor};

/// The small random model's type: 2 blocks of width 64, feed-forward 96, 4 heads
/// of 16 over 2 key/value heads, 40 tokens.
type Tiny<D> = Llama<D, 2, 64, 96, 4, 2, 40>;

const TINY: LlamaDims = LlamaDims {
    layers: 2,
    hidden: 64,
    ffn: 96,
    heads: 4,
    kv_heads: 2,
    vocab: 40,
};

fn tiny_file(dims: LlamaDims) -> Gguf {
    Gguf::parse("tiny.gguf", tiny_llama(dims, 3)).expect("the file parses")
}

#[test]
fn a_small_random_model_loads_into_the_type_of_its_dims_and_runs() {
    assert_eq!(Tiny::<Cpu>::HEAD_DIM, 16);
    let model = Tiny::<Cpu>::from_gguf(&tiny_file(TINY)).expect("the weights load");
    assert_eq!(model.config().context, 256);
    let tokens = [1, 7, 39, 0, 12];
    // The whole sequence in one call, and the same one token at a time through the
    // cache (the first single token captures the decode step, the rest replay it).
    let mut cache = model.cache();
    let all: Tensor<Rank1<40>, Cpu> = model.forward(&tokens, &mut cache);
    assert_eq!(all.dims(), &[40]);
    let all = all.to_vec();
    assert!(all.iter().all(|v| v.is_finite()));
    let mut cache = model.cache();
    let mut last = Vec::new();
    for &t in &tokens {
        last = model.forward(&[t], &mut cache).to_vec();
    }
    assert_eq!(cache.len(), tokens.len());
    for (a, b) in all.iter().zip(&last) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
    let new = model.generate_greedy(&tokens, 4, None);
    assert_eq!(new.len(), 4);
    assert!(new.iter().all(|&t| t < 40));
}

/// The tiny model's logits after a prompt, then after each of two more tokens (the
/// first captures the decode step, the second replays it), with f32 activations
/// (the GPU's).
fn tiny_logits<D: InferenceBackend + Replay>(gguf: &Gguf) -> Vec<Vec<f32>> {
    let mut model = Tiny::<D>::from_gguf(gguf).expect("the weights load");
    model.set_activations(Activations::F32);
    let mut cache = model.cache();
    let mut out = vec![model.forward(&[1, 7, 39, 0, 12], &mut cache).to_vec()];
    for t in [5, 6] {
        out.push(model.forward(&[t], &mut cache).to_vec());
    }
    out
}

// Each GPU test here runs alone (`gpu_alone`): the GPU's capture is process-wide,
// and one test's replay while another captures panics.

#[cfg(feature = "gpu")]
#[test]
fn the_small_random_model_runs_alike_on_the_gpu() {
    let _gpu = crate::support::gpu_alone();
    let gguf = tiny_file(TINY);
    let want = tiny_logits::<Cpu>(&gguf);
    let got = tiny_logits::<volta::Gpu>(&gguf);
    for (step, (g, w)) in got.iter().zip(&want).enumerate() {
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() < 1e-3, "step {step}: {a} vs {b}");
        }
    }
}

/// The logits of 10 tokens decoded one at a time after a 250-token prompt.
fn decode_past_256<D: InferenceBackend + Replay>(gguf: &Gguf) -> Vec<Vec<f32>> {
    let mut model = Tiny::<D>::from_gguf(gguf).expect("the weights load");
    model.set_activations(Activations::F32);
    let mut cache = model.cache();
    let prompt: Vec<u32> = (0..250u32).map(|j| (j * 7 + 3) % 40).collect();
    model.forward(&prompt, &mut cache).to_vec();
    [5, 6, 11, 0, 39, 2, 8, 17, 4, 30]
        .iter()
        .map(|&t| model.forward(&[t], &mut cache).to_vec())
        .collect()
}

/// A sequence decoded one token at a time past 256 positions, where the GPU
/// captures its step again for twice the positions (attention's keys then split
/// and are combined), gives the CPU's logits at every step.
#[cfg(feature = "gpu")]
#[test]
fn a_decode_past_256_positions_runs_alike_on_the_gpu() {
    let _gpu = crate::support::gpu_alone();
    let gguf =
        Gguf::parse("tiny.gguf", tiny_llama_with_context(TINY, 3, 1024)).expect("the file parses");
    let want = decode_past_256::<Cpu>(&gguf);
    let got = decode_past_256::<volta::Gpu>(&gguf);
    for (step, (g, w)) in got.iter().zip(&want).enumerate() {
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() < 1e-3, "position {}: {a} vs {b}", 250 + step);
        }
    }
}

fn argmax(v: &[f32]) -> u32 {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap() as u32
}

/// `n` sequences of different lengths decoded together get each one's own
/// logits: three batched steps (the first captures the step, the others replay
/// it) against each sequence decoded alone, with slot 0 refilled by a new
/// sequence before the last step (a server's next request).
fn batched_matches_alone<D: InferenceBackend + Replay>(
    gguf: &Gguf,
    n: usize,
    activations: Activations,
    tol: f32,
) {
    let mut model = Tiny::<D>::from_gguf(gguf).expect("the weights load");
    model.set_activations(activations);
    let prompt = |i: usize| -> Vec<u32> {
        (0..3 + 7 * i as u32)
            .map(|j| (j * 5 + i as u32) % 40)
            .collect()
    };
    let mut batch = model.batch(n);
    let (mut alone, mut next) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mut cache = model.cache();
        next.push(argmax(&model.forward(&prompt(i), &mut cache).to_vec()));
        batch.set(i, &cache);
        alone.push(cache);
    }
    for step in 0..3 {
        if step == 2 {
            let mut cache = model.cache();
            next[0] = argmax(&model.forward(&[9, 8, 7, 6], &mut cache).to_vec());
            batch.set(0, &cache);
            alone[0] = cache;
        }
        let logits = model.decode_batch(&next, &mut batch);
        assert_eq!(logits.dims(), [n, 40]);
        let got: Vec<Vec<f32>> = logits.to_vec().chunks(40).map(<[f32]>::to_vec).collect();
        for (i, g) in got.iter().enumerate() {
            let want = model.forward(&[next[i]], &mut alone[i]).to_vec();
            for (a, b) in g.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= tol * (1.0 + b.abs()),
                    "batch of {n}, step {step}, sequence {i}: {a} vs {b}"
                );
            }
        }
        next = got.iter().map(|g| argmax(g)).collect();
    }
    let lens: Vec<usize> = alone.iter().map(|c| c.len()).collect();
    assert_eq!(batch.lens(), lens);
}

#[test]
fn a_batch_of_sequences_decodes_as_each_alone_on_the_cpu() {
    let gguf = tiny_file(TINY);
    // 3 rows run the single-token kernel (8-bit activations, as each alone), 10
    // the many-row product, which is f32: alone, the tokens run f32 too.
    batched_matches_alone::<Cpu>(&gguf, 3, Activations::Int8, 1e-5);
    batched_matches_alone::<Cpu>(&gguf, 10, Activations::F32, 1e-4);
}

#[cfg(feature = "gpu")]
#[test]
fn a_batch_of_sequences_decodes_as_each_alone_on_the_gpu() {
    let _gpu = crate::support::gpu_alone();
    let gguf = tiny_file(TINY);
    let info = volta::Gpu::init().expect("a GPU adapter");
    // Ten rows run on tensor cores where the adapter has them: f16 operands.
    let many = if info.tensor_cores { 2e-2 } else { 1e-4 };
    batched_matches_alone::<volta::Gpu>(&gguf, 3, Activations::F32, 1e-4);
    batched_matches_alone::<volta::Gpu>(&gguf, 10, Activations::F32, many);
}

#[test]
fn a_file_of_other_dims_is_a_typed_error_naming_both() {
    let load = |dims| {
        Tiny::<Cpu>::from_gguf(&tiny_file(dims))
            .err()
            .expect("a dims error")
    };
    let err: GgufError = load(LlamaDims { layers: 3, ..TINY });
    match &err.kind {
        GgufErrorKind::ModelDims {
            what,
            key,
            found,
            expected,
            ty,
            file_ty,
        } => {
            assert_eq!((*what, *key), ("layers", "llama.block_count"));
            assert_eq!((*found, *expected), (3, 2));
            assert_eq!(ty, "Llama<Cpu, 2, 64, 96, 4, 2, 40>");
            assert_eq!(file_ty, "Llama<Cpu, 3, 64, 96, 4, 2, 40>");
        }
        other => panic!("expected ModelDims, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "GGUF file tiny.gguf: the file has 3 layers (`llama.block_count`), but the type \
         Llama<Cpu, 2, 64, 96, 4, 2, 40> expects 2; the file's dims make \
         Llama<Cpu, 3, 64, 96, 4, 2, 40>"
    );
    // The first dim that differs is named; the file's type carries every one.
    let err = load(LlamaDims {
        vocab: 41,
        heads: 2,
        ..TINY
    });
    assert_eq!(
        err.to_string(),
        "GGUF file tiny.gguf: the file has 2 attention heads (`llama.attention.head_count`), \
         but the type Llama<Cpu, 2, 64, 96, 4, 2, 40> expects 4; the file's dims make \
         Llama<Cpu, 2, 64, 96, 2, 2, 41>"
    );
    let err = load(LlamaDims { vocab: 41, ..TINY });
    assert!(
        err.to_string()
            .contains("the file has 41 tokens (`tokenizer.ggml.tokens`)"),
        "{err}"
    );
    // SmolLM2's type reads the tiny file's dims the same way.
    let err = SmolLM2_135M::<Cpu>::from_gguf(&tiny_file(TINY))
        .err()
        .expect("a dims error");
    assert!(
        err.to_string().ends_with(
            "but the type Llama<Cpu, 30, 576, 1536, 9, 3, 49152> expects 30; the file's dims \
             make Llama<Cpu, 2, 64, 96, 4, 2, 40>"
        ),
        "{err}"
    );
}
