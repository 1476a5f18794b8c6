//! SmolLM2-135M-Instruct end to end from its GGUF file: tokenizer, chat template, the
//! f32 model and greedy decoding. llama.cpp's answer (Vulkan backend, H100,
//! 2026-11-23) to this prompt is "The capital of France is Paris." after 37 prompt
//! tokens; runs when the model file is present (`scripts/test.sh` fetches it).
mod support;
use volta::Cpu;
use volta::models::llama::Llama;
use volta::models::{ChatTemplate, Message};

#[test]
fn greedy_answer_matches_llama_cpp_on_the_cpu() {
    let Some((gguf, tokenizer)) = support::smollm2() else {
        return;
    };
    let model = Llama::<Cpu>::from_gguf(&gguf).expect("the weights load");
    assert_eq!(model.config().head_dim(), 64);

    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tokenizer.encode(&prompt);
    assert_eq!(ids.len(), 37);
    let end = tokenizer.token_id("<|im_end|>");
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
    let Some((gguf, tokenizer)) = support::smollm2() else {
        return;
    };
    let prompt = ChatTemplate::smollm2().render(&[Message::user("What is the capital of France?")]);
    let ids = tokenizer.encode(&prompt);
    let argmax = |v: &[f32]| (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap() as u32;
    // CPU: the prompt, then two greedy steps.
    let cpu = Llama::<Cpu>::from_gguf(&gguf).expect("the weights load");
    let mut cache = cpu.cache();
    let mut want = vec![cpu.forward(&ids, &mut cache).to_vec()];
    for _ in 0..2 {
        let next = argmax(want.last().unwrap());
        want.push(cpu.forward(&[next], &mut cache).to_vec());
    }
    drop(cpu);
    let gpu = Llama::<volta::Gpu>::from_gguf(&gguf).expect("the weights load");
    let mut cache = gpu.cache();
    let mut got = vec![gpu.forward(&ids, &mut cache).to_vec()];
    for w in &want[..2] {
        got.push(gpu.forward(&[argmax(w)], &mut cache).to_vec());
    }
    assert_eq!(tokenizer.decode(&[argmax(&got[0])]), "The");
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
    assert_eq!(
        tokenizer.decode(&[argmax(&got[1]), argmax(&got[2])]),
        " capital of"
    );
}
