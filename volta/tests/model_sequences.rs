//! `model!` over sequences: token ids through `Embedding`, a run-time length `T`,
//! learned positions checked against their table, repeated transformer blocks,
//! `Linear` per position, a summary that counts like PyTorch, padded batches, and
//! training.
use volta::nn::loss::cross_entropy;
use volta::prelude::*;

model! {
    /// A small GPT: 16 tokens, width 32, 2 blocks of 4 heads, at most 8 positions.
    pub struct TinyGpt for (B, T) -> (B, T, 16) {
        wte: Embedding<16, 32>,
        wpe: PositionalEmbedding<8>,
        drop: Dropout<0.0>,
        h: [TransformerBlock<4, ff = 64>; 2],
        ln_f: LayerNorm,
        lm_head: Linear<16>,
    }
}

model! {
    /// An encoder over features: Llama-style blocks (RMSNorm, SwiGLU, RoPE, grouped
    /// heads), not causal.
    pub struct Encoder for (B, T, 24) -> (B, T, 3) {
        attn: MultiHeadAttention<6, kv_heads = 2, causal = false, rope = true>,
        blocks: [TransformerBlock<6, kv_heads = 3, rms = true, swiglu = true, rope = true, causal = false>; 2],
        norm: RmsNorm,
        head: Linear<24, 3>,
        gelu,
    }
}

model! {
    /// nanoGPT with `bias = False`: no biases in the projections or the norms.
    pub struct BiasFreeGpt for (B, T) -> (B, T, 16) {
        wte: Embedding<16, 32>,
        wpe: PositionalEmbedding<8>,
        attn: MultiHeadAttention<4, bias = false, dropout = 0.1>,
        h: [TransformerBlock<4, ff = 64, bias = false>; 2],
        ln_f: LayerNorm<bias = false>,
        lm_head: Linear<16, bias = false>,
    }
}

model! {
    /// GPT-2's head: logits against the token table (weight tying).
    pub struct TiedGpt for (B, T) -> (B, T, 16) {
        wte: Embedding<16, 32>,
        wpe: PositionalEmbedding<8>,
        h: [TransformerBlock<4, ff = 64>; 1],
        ln_f: LayerNorm,
        lm_head: Tied<wte>,
    }
}

model! {
    /// A vision transformer's shapes: 2×2 patches of 4×4 images as 4 tokens, a
    /// block over a length known at compile time, the mean over the tokens.
    pub struct TinyVit for (B, 2, 4, 4) -> (B, 3) {
        patches: Conv2d<8, kernel = 2, stride = 2>,
        to_sequence,
        pos: PositionalEmbedding<4>,
        block: TransformerBlock<2, causal = false>,
        proj: Linear<6>,
        mean_pool,
        head: Linear<3>,
    }
}

model! {
    /// A text classifier: 2 encoder blocks, the mean over the tokens, 3 classes.
    pub struct TextClassifier for (B, T) -> (B, 3) {
        wte: Embedding<16, 24>,
        wpe: PositionalEmbedding<8>,
        blocks: [TransformerBlock<4, causal = false>; 2],
        attn: MultiHeadAttention<4, causal = false>,
        mean_pool,
        head: Linear<3>,
    }
}

type Ids = Tensor<(usize, usize), Cpu, u32>;

#[test]
fn a_gpt_in_model_trains_and_counts_its_parameters() {
    let mut rng = Rng::seed(0);
    let mut model = TinyGpt::<Cpu>::new(&mut rng);
    // Parameters as PyTorch counts them.
    let per_block =
        2 * 32 + (32 * 96 + 96) + (32 * 32 + 32) + 2 * 32 + (32 * 64 + 64) + (64 * 32 + 32);
    let want = 16 * 32 + 8 * 32 + 2 * per_block + 2 * 32 + (32 * 16 + 16);
    assert_eq!(model.param_count(), want);
    let summary = model.summary().to_string();
    assert!(
        summary.contains("[TransformerBlock<4, ff = 64>; 2]"),
        "{summary}"
    );
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.iter().any(|n| n == "h.1.attn.c_attn.weight"),
        "{names:?}"
    );
    // Learn to copy the previous token.
    let seqs: Vec<u32> = (0..8 * 6).map(|i| ((i * 7 + i / 6) % 16) as u32).collect();
    let x = Ids::from_vec_shaped(seqs.clone(), (8, 6)).unwrap();
    let targets: Vec<u32> = seqs
        .chunks(6)
        .flat_map(|s| [s[0]].into_iter().chain(s[..5].iter().copied()))
        .collect();
    let y = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(targets, (48,)).unwrap();
    let mut opt = Adam::new(1e-2);
    let mut losses = Vec::new();
    for _ in 0..60 {
        let logits = model.forward(&x);
        assert_eq!(logits.dims(), &[8, 6, 16]);
        let rows =
            Tensor::<(usize, Const<16>)>::try_from_raw(logits.raw().reshape(&[48, 16])).unwrap();
        let loss = cross_entropy(&rows, &y);
        losses.push(loss.item());
        let grads = loss.backward();
        opt.step(&mut model, &grads);
    }
    assert!(losses[59] < 0.2 * losses[0], "{:?}", &losses[..5]);
}

#[test]
fn a_sequence_past_the_positional_table_is_a_typed_error() {
    let model = TinyGpt::<Cpu>::new(&mut Rng::seed(1));
    let x = Ids::from_vec_shaped(vec![0; 9], (1, 9)).unwrap();
    let err = model.try_forward(&x).unwrap_err();
    assert!(err.to_string().contains("at most 8 positions"), "{err}");
    let ok = Ids::from_vec_shaped(vec![0; 8], (1, 8)).unwrap();
    assert_eq!(model.try_forward(&ok).unwrap().dims(), &[1, 8, 16]);
}

#[test]
fn an_encoder_of_llama_blocks_runs_on_any_length() {
    let model = Encoder::<Cpu>::new(&mut Rng::seed(2));
    for t in [1, 5, 11] {
        let x = Tensor::<(Const<2>, usize, Const<24>)>::randn_shaped(
            (Const, t, Const),
            &mut Rng::seed(3),
        );
        assert_eq!(model.forward(&x).dims(), &[2, t, 3]);
    }
}

#[test]
fn the_summary_reads_like_pytorchs() {
    let model = TinyGpt::<Cpu>::new(&mut Rng::seed(0));
    let shown = model.summary().to_string();
    println!("{shown}");
    assert!(
        shown.contains("[B, T, 16]") && shown.contains("input [B, T]"),
        "{shown}"
    );
}

#[test]
fn bias_false_leaves_every_bias_out() {
    let mut model = BiasFreeGpt::<Cpu>::new(&mut Rng::seed(5));
    assert_eq!(model.attn.attn_dropout.p(), 0.1);
    model.eval(); // the loss below without dropout's noise
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    assert!(names.iter().all(|n| n.ends_with(".weight")), "{names:?}");
    let attention = 32 * 96 + 32 * 32;
    let per_block = 32 + attention + 32 + 32 * 64 + 64 * 32;
    let want = 16 * 32 + 8 * 32 + attention + 2 * per_block + 32 + 32 * 16;
    assert_eq!(model.param_count(), want);
    // It trains: a step lowers the loss on a batch it saw.
    let x = Ids::from_vec_shaped((0..24).map(|i| i % 16).collect(), (4, 6)).unwrap();
    let y = Tensor::<(usize,), Cpu, u32>::from_vec_shaped((1..25).map(|i| i % 16).collect(), (24,))
        .unwrap();
    let loss = |m: &BiasFreeGpt<Cpu>| {
        let rows = m.forward(&x).reshape_to((24, Const::<16>)).unwrap();
        cross_entropy(&rows, &y)
    };
    let before = loss(&model);
    let first = before.item();
    Adam::new(1e-2).step(&mut model, &before.backward());
    assert!(loss(&model).item() < first);
}

#[test]
fn a_tied_head_reads_the_token_table() {
    let mut model = TiedGpt::<Cpu>::new(&mut Rng::seed(6));
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    assert!(!names.iter().any(|n| n.starts_with("lm_head")), "{names:?}");
    let per_block =
        2 * 32 + (32 * 96 + 96) + (32 * 32 + 32) + 2 * 32 + (32 * 64 + 64) + (64 * 32 + 32);
    assert_eq!(model.param_count(), 16 * 32 + 8 * 32 + per_block + 2 * 32);
    let row = model.summary().to_string();
    let row = row
        .lines()
        .find(|l| l.starts_with("lm_head"))
        .unwrap()
        .to_string();
    assert!(row.contains("Tied<wte>") && row.ends_with(" 0"), "{row}");

    // The logits are the last rows against the table: ln_f(h(x)) · wteᵀ.
    let x = Ids::from_vec_shaped(vec![1, 2, 3, 4, 5, 6], (2, 3)).unwrap();
    let logits = model.forward(&x);
    let positions = model.wpe.try_forward(&model.wte.forward(&x), 0).unwrap();
    let last = model.ln_f.forward(&model.h[0].forward(&positions));
    let want = last
        .reshape_to((6, Const::<32>))
        .unwrap()
        .matmul(&model.wte.weight.t());
    assert_eq!(logits.to_vec(), want.to_vec());

    // The table's gradient sums both uses: row 0 is never looked up, so its
    // gradient is the head's alone.
    let grads = logits.sum_all().backward();
    let table = grads
        .get(&model.wte.weight)
        .expect("the table is used")
        .to_vec();
    assert!(table[..32].iter().any(|g| *g != 0.0));

    // It trains.
    let y = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![2, 3, 4, 5, 6, 7], (6,)).unwrap();
    let loss =
        |m: &TiedGpt<Cpu>| cross_entropy(&m.forward(&x).reshape_to((6, Const::<16>)).unwrap(), &y);
    let before = loss(&model);
    let first = before.item();
    Adam::new(1e-2).step(&mut model, &before.backward());
    assert!(loss(&model).item() < first);
}

#[test]
fn a_vision_transformer_reads_patches_as_a_sequence() {
    let model = TinyVit::<Cpu>::new(&mut Rng::seed(8));
    let x = Tensor::<(Const<2>, Const<2>, Const<4>, Const<4>)>::randn(&mut Rng::seed(9));
    let y = model.forward(&x);
    // By hand: the feature maps [2, 8, 2, 2] as sequences [2, 4, 8] (position
    // p = 2·row + column), then the layers, then the mean over the 4 positions.
    let maps: Tensor<(Const<2>, Const<8>, Const<2>, Const<2>)> = model.patches.forward(&x);
    let maps = maps.to_vec();
    let seq: Vec<f32> = (0..2 * 4 * 8)
        .map(|i| {
            let (b, p, c) = (i / 32, i / 8 % 4, i % 8);
            maps[b * 32 + c * 4 + p]
        })
        .collect();
    let seq = Tensor::<(Const<2>, Const<4>, Const<8>)>::from_vec(seq).unwrap();
    let h = model
        .block
        .forward(&model.pos.try_forward(&seq, 0).unwrap());
    let h = model
        .proj
        .forward(&h.reshape_to((8, Const::<8>)).unwrap())
        .to_vec();
    let mean: Vec<f32> = (0..2 * 6)
        .map(|i| (0..4).map(|p| h[(i / 6 * 4 + p) * 6 + i % 6]).sum::<f32>() / 4.0)
        .collect();
    let want = model
        .head
        .forward(&Tensor::<(Const<2>, Const<6>)>::from_vec(mean).unwrap());
    for (a, b) in y.to_vec().iter().zip(want.to_vec()) {
        assert!(
            (a - b).abs() < 1e-5,
            "{:?} vs {:?}",
            y.to_vec(),
            want.to_vec()
        );
    }
    let shown = model.summary().to_string();
    assert!(
        shown.contains("[B, 4, 8]") && shown.contains("[B, 6]"),
        "{shown}"
    );
}

#[test]
fn a_long_layer_takes_one_row_of_the_summary() {
    let shown = Encoder::<Cpu>::new(&mut Rng::seed(0)).summary().to_string();
    let row = shown.lines().find(|l| l.starts_with("blocks")).unwrap();
    assert!(
        row.contains("[TransformerBlock<6, kv_heads = 3, rms = true, swiglu = true, rope = true, causal = false>; 2]"),
        "{shown}"
    );
}

#[test]
fn cached_steps_continue_the_sequence() {
    let mut model = TinyGpt::<Cpu>::new(&mut Rng::seed(4));
    model.eval();
    let seq: Vec<u32> = vec![3, 1, 4, 1, 5, 9];
    let whole = model
        .forward(&Ids::from_vec_shaped(seq.clone(), (1, 6)).unwrap())
        .to_vec();
    let mut caches = model.caches();
    assert_eq!(caches.len(), 2);
    let first = model
        .try_forward_cached(
            &Ids::from_vec_shaped(seq[..4].to_vec(), (1, 4)).unwrap(),
            &mut caches,
        )
        .unwrap();
    let mut stepped = first.to_vec();
    for &t in &seq[4..] {
        let y = model
            .try_forward_cached(&Ids::from_vec_shaped(vec![t], (1, 1)).unwrap(), &mut caches)
            .unwrap();
        stepped.extend(y.to_vec());
    }
    for (i, (a, b)) in whole.iter().zip(&stepped).enumerate() {
        assert!((a - b).abs() < 1e-5, "[{i}] {a} vs {b}");
    }
    // Past the table of 8 positions, the cached pass errors as the plain one does.
    let more = Ids::from_vec_shaped(vec![0, 0, 0], (1, 3)).unwrap();
    assert!(model.try_forward_cached(&more, &mut caches).is_err());
}

/// A padded batch through `model!`: each sequence's logits are those it gets
/// alone (right padding; the blocks, the attention layer and `mean_pool` see its
/// own tokens only), the padding gets no gradient, and ranges that do not fit
/// are a typed error. Causal models take padding on the left.
#[test]
// One range per batch element: `[a..b]` is a batch of one.
#[allow(clippy::single_range_in_vec_init)]
fn padded_batches_give_each_sequence_its_own_result() {
    let mut rng = Rng::seed(5);
    let model = TextClassifier::<Cpu>::new(&mut rng);
    let ids = Ids::from_vec_shaped(vec![1, 2, 3, 4, 5, 6, 7, 0, 0, 0], (2, 5)).unwrap();
    let logits = model.try_forward_padded(&ids, &[0..5, 0..2]).unwrap();
    let alone = |v: Vec<u32>| {
        let n = v.len();
        model
            .forward(&Ids::from_vec_shaped(v, (1, n)).unwrap())
            .to_vec()
    };
    let (got, first, second) = (
        logits.to_vec(),
        alone(vec![1, 2, 3, 4, 5]),
        alone(vec![6, 7]),
    );
    for (a, b) in got.iter().zip(first.iter().chain(&second)) {
        assert!((a - b).abs() < 1e-5, "{got:?} vs {first:?} {second:?}");
    }
    // Without the ranges the padding changes the second sequence's logits.
    let plain = model.forward(&ids).to_vec();
    assert!((plain[3] - got[3]).abs() > 1e-4);
    // The loss passes no gradient to the padding's embeddings: token 0 pads.
    let targets = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![2, 1], (2,)).unwrap();
    let grads = cross_entropy(&logits, &targets).backward();
    let table = grads
        .get(&model.wte.weight)
        .expect("the table is used")
        .to_vec();
    assert!(
        table[..24].iter().all(|&g| g == 0.0),
        "the padding token got a gradient"
    );
    assert!(table[24..48].iter().any(|&g| g != 0.0));
    let err = model.try_forward_padded(&ids, &[0..5, 0..6]).unwrap_err();
    assert!(
        err.to_string().contains("a batch of 2 over 5 keys"),
        "{err}"
    );

    // A causal model, padded on the left: the last position's logits are those
    // of the sequence alone at its last position, positions counting from the
    // row's start.
    let gpt = TinyGpt::<Cpu>::new(&mut rng);
    let padded = Ids::from_vec_shaped(vec![0, 0, 6, 7, 8], (1, 5)).unwrap();
    let got = gpt.try_forward_padded(&padded, &[2..5]).unwrap().to_vec();
    let plain = gpt.forward(&padded).to_vec();
    assert!(got[..2 * 16].iter().all(|&x| x.is_finite()));
    assert!(
        got[4 * 16..]
            .iter()
            .zip(&plain[4 * 16..])
            .any(|(a, b)| (a - b).abs() > 1e-4)
    );
}
