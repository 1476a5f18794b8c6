//! Writes the page test's tiny language model: a GGUF file of SmolLM2's
//! architecture at toy size (`volta_web::chat::TinyLlama`) with random Q8_0
//! weights and a byte-level vocabulary plus SmolLM2's chat tokens, so the chat box
//! can be tested without downloading SmolLM2:
//!
//! ```text
//! cargo run -p volta-web --release --bin tiny_gguf -- OUT.gguf
//! ```
#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: tiny_gguf OUT.gguf");
        return std::process::ExitCode::FAILURE;
    };
    let bytes = native::tiny_llama(3);
    match std::fs::write(&out, &bytes) {
        Ok(()) => {
            println!("wrote {out} ({} bytes)", bytes.len());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tiny_gguf: {out}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A native tool: nothing to run in the browser.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use half::f16;
    use volta::Rng;
    use volta_web::chat::TinyLlama;

    type Tiny = TinyLlama<volta::Cpu>;
    const F32: u32 = 0;
    const Q8_0: u32 = 8;
    const ALIGNMENT: usize = 32;
    /// GGUF metadata value types.
    const U32: u32 = 4;
    const I32: u32 = 5;
    const F32_VALUE: u32 = 6;
    const STRING: u32 = 8;
    const ARRAY: u32 = 9;
    /// Token types: normal and control.
    const NORMAL: i32 = 1;
    const CONTROL: i32 = 3;

    #[derive(Default)]
    struct Writer(Vec<u8>);

    impl Writer {
        fn u32(&mut self, v: u32) -> &mut Self {
            self.0.extend(v.to_le_bytes());
            self
        }
        fn u64(&mut self, v: u64) -> &mut Self {
            self.0.extend(v.to_le_bytes());
            self
        }
        fn str(&mut self, s: &str) -> &mut Self {
            self.u64(s.len() as u64);
            self.0.extend(s.as_bytes());
            self
        }
        fn pad(&mut self) {
            while !self.0.len().is_multiple_of(ALIGNMENT) {
                self.0.push(0);
            }
        }
    }

    /// GPT-2's byte-level alphabet: the character that spells byte `b`.
    fn byte_char(b: u8) -> char {
        let printable =
            |c: u8| (b'!'..=b'~').contains(&c) || (0xA1..=0xAC).contains(&c) || c >= 0xAE;
        if printable(b) {
            return char::from(b);
        }
        let n = (0..b).filter(|&c| !printable(c)).count() as u32;
        char::from_u32(256 + n).expect("a valid code point")
    }

    /// The vocabulary: SmolLM2's three chat tokens first (as in SmolLM2), then the
    /// 256 bytes.
    fn vocabulary() -> (Vec<String>, Vec<i32>) {
        let mut tokens: Vec<String> = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
            .map(String::from)
            .to_vec();
        let mut types = vec![CONTROL; 3];
        for b in 0..=255u8 {
            tokens.push(byte_char(b).to_string());
            types.push(NORMAL);
        }
        assert_eq!(tokens.len(), Tiny::VOCAB);
        (tokens, types)
    }

    /// The whole file, weights drawn from `seed`.
    pub fn tiny_llama(seed: u64) -> Vec<u8> {
        let (h, f, vocab) = (Tiny::HIDDEN, Tiny::FFN, Tiny::VOCAB);
        let kv = Tiny::KV_HEADS * Tiny::HEAD_DIM;
        let mut tensors: Vec<(String, Vec<usize>, u32)> = vec![
            ("token_embd.weight".into(), vec![h, vocab], Q8_0),
            ("output_norm.weight".into(), vec![h], F32),
        ];
        for i in 0..Tiny::LAYERS {
            let name = |n: &str| format!("blk.{i}.{n}.weight");
            tensors.extend([
                (name("attn_norm"), vec![h], F32),
                (name("attn_q"), vec![h, h], Q8_0),
                (name("attn_k"), vec![h, kv], Q8_0),
                (name("attn_v"), vec![h, kv], Q8_0),
                (name("attn_output"), vec![h, h], Q8_0),
                (name("ffn_norm"), vec![h], F32),
                (name("ffn_gate"), vec![h, f], Q8_0),
                (name("ffn_up"), vec![h, f], Q8_0),
                (name("ffn_down"), vec![f, h], Q8_0),
            ]);
        }
        let mut rng = Rng::seed(seed);
        let mut data = Writer::default();
        let mut offsets = Vec::new();
        for (name, dims, ty) in &tensors {
            data.pad();
            offsets.push(data.0.len() as u64);
            let n: usize = dims.iter().product();
            if *ty == F32 {
                for _ in 0..n {
                    data.0
                        .extend((1.0 + 0.1 * rng.normal() as f32).to_le_bytes());
                }
            } else {
                // Q8_0 blocks: an f16 scale, then 32 signed bytes; weights of about ±0.5.
                // The chat tokens' embedding rows (the first 3 of the tied output
                // layer) are zero: their logit is 0 while the bytes' spread around it,
                // so the random model seldom ends its answer at once.
                let silent = if name == "token_embd.weight" {
                    3 * h / 32
                } else {
                    0
                };
                for block in 0..n / 32 {
                    let scale = if block < silent { 0.0 } else { 0.5 / 127.0 };
                    data.0.extend(f16::from_f32(scale).to_le_bytes());
                    data.0
                        .extend((0..32).map(|_| (rng.uniform() * 256.0) as u8));
                }
            }
        }
        let (tokens, types) = vocabulary();
        let mut w = Writer::default();
        w.0.extend(b"GGUF");
        w.u32(3).u64(tensors.len() as u64).u64(15);
        w.str("general.architecture").u32(STRING).str("llama");
        for (key, v) in [
            ("llama.block_count", Tiny::LAYERS),
            ("llama.embedding_length", h),
            ("llama.feed_forward_length", f),
            ("llama.attention.head_count", Tiny::HEADS),
            ("llama.attention.head_count_kv", Tiny::KV_HEADS),
            ("llama.context_length", 512),
        ] {
            w.str(key).u32(U32).u32(v as u32);
        }
        w.str("llama.attention.layer_norm_rms_epsilon")
            .u32(F32_VALUE);
        w.0.extend(1e-5f32.to_le_bytes());
        w.str("llama.rope.freq_base").u32(F32_VALUE);
        w.0.extend(10_000f32.to_le_bytes());
        w.str("tokenizer.ggml.model").u32(STRING).str("gpt2");
        w.str("tokenizer.ggml.pre").u32(STRING).str("smollm");
        w.str("tokenizer.ggml.tokens")
            .u32(ARRAY)
            .u32(STRING)
            .u64(vocab as u64);
        for t in &tokens {
            w.str(t);
        }
        w.str("tokenizer.ggml.token_type")
            .u32(ARRAY)
            .u32(I32)
            .u64(vocab as u64);
        for t in &types {
            w.0.extend(t.to_le_bytes());
        }
        w.str("tokenizer.ggml.merges").u32(ARRAY).u32(STRING).u64(0);
        w.str("tokenizer.ggml.eos_token_id").u32(U32).u32(2);
        for ((name, dims, ty), offset) in tensors.iter().zip(offsets) {
            w.str(name).u32(dims.len() as u32);
            for &d in dims {
                w.u64(d as u64);
            }
            w.u32(*ty).u64(offset);
        }
        w.pad();
        w.0.extend(data.0);
        w.0
    }
}
