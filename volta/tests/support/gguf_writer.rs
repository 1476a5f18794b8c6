//! GGUF files written by the tests: a field-by-field [`Writer`] (for files valid and
//! corrupt) and [`tiny_llama`], a whole random Llama model small enough to run in a
//! test.
use half::f16;
use volta::Rng;

/// Writes GGUF bytes field by field.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend(s.as_bytes());
        self
    }
    pub fn header(&mut self, version: u32, tensors: u64, kvs: u64) -> &mut Self {
        self.0.extend(b"GGUF");
        self.u32(version).u64(tensors).u64(kvs)
    }
    pub fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    pub fn pad_to(&mut self, alignment: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(alignment) {
            self.0.push(0);
        }
        self
    }
}

/// The dims of a [`tiny_llama`] file, in the order of `Llama`'s const parameters.
#[derive(Clone, Copy, Debug)]
pub struct LlamaDims {
    pub layers: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub vocab: usize,
}

/// A Llama-architecture GGUF file of `dims` with random weights from `seed`: Q8_0
/// matrices (`hidden` and `ffn` must be multiples of 32), F32 norms near 1, the
/// `llama.*` metadata (a context of 256 positions) and a vocabulary of `vocab`
/// tokens `t0`, `t1`, ….
pub fn tiny_llama(dims: LlamaDims, seed: u64) -> Vec<u8> {
    tiny_llama_with_context(dims, seed, 256)
}

/// [`tiny_llama`] with a context of `context` positions.
pub fn tiny_llama_with_context(dims: LlamaDims, seed: u64, context: usize) -> Vec<u8> {
    const F32: u32 = 0;
    const Q8_0: u32 = 8;
    const ALIGNMENT: usize = 32;
    let LlamaDims {
        layers,
        hidden: h,
        ffn: f,
        heads,
        kv_heads,
        vocab,
    } = dims;
    let kv = kv_heads * (h / heads);
    // (name, ggml dims: columns first, type)
    let mut tensors: Vec<(String, Vec<usize>, u32)> = vec![
        ("token_embd.weight".into(), vec![h, vocab], Q8_0),
        ("output_norm.weight".into(), vec![h], F32),
    ];
    for i in 0..layers {
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
    for (_, d, ty) in &tensors {
        data.pad_to(ALIGNMENT);
        offsets.push(data.0.len() as u64);
        let n: usize = d.iter().product();
        if *ty == F32 {
            for _ in 0..n {
                data.0
                    .extend((1.0 + 0.1 * rng.normal() as f32).to_le_bytes());
            }
        } else {
            // Q8_0 blocks: an f16 scale, then 32 signed bytes; weights of about ±0.1.
            for _ in 0..n / 32 {
                data.0.extend(f16::from_f32(0.1 / 127.0).to_le_bytes());
                data.0
                    .extend((0..32).map(|_| (rng.uniform() * 256.0) as u8));
            }
        }
    }

    let mut w = Writer::default();
    w.header(3, tensors.len() as u64, 10);
    w.str("general.architecture").u32(8).str("llama");
    for (key, v) in [
        ("llama.block_count", layers),
        ("llama.embedding_length", h),
        ("llama.feed_forward_length", f),
        ("llama.attention.head_count", heads),
        ("llama.attention.head_count_kv", kv_heads),
        ("llama.context_length", context),
    ] {
        w.str(key).u32(4).u32(v as u32);
    }
    w.str("llama.attention.layer_norm_rms_epsilon").u32(6);
    w.0.extend(1e-5f32.to_le_bytes());
    w.str("llama.rope.freq_base").u32(6);
    w.0.extend(10_000f32.to_le_bytes());
    w.str("tokenizer.ggml.tokens")
        .u32(9)
        .u32(8)
        .u64(vocab as u64);
    for t in 0..vocab {
        w.str(&format!("t{t}"));
    }
    for ((name, d, ty), offset) in tensors.iter().zip(offsets) {
        let d: Vec<u64> = d.iter().map(|&x| x as u64).collect();
        w.tensor(name, &d, *ty, offset);
    }
    w.pad_to(ALIGNMENT);
    w.0.extend(data.0);
    w.0
}
