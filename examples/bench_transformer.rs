//! The transformer benchmark on the GPU: fused attention forward + backward
//! (f32, causal, head width 64) at T = 1024 and 4096; the memory an attention
//! training step holds at T = 512 … 8192 (it should grow linearly); and the
//! training step of nanoGPT's shakespeare-char configuration (6 blocks of width
//! 384, 6 heads, T 256, batch 64, dropout 0.2, AdamW) in f32 and with
//! `MatmulPrecision::Half`, with the step's kernel profile (the `model!` GPT of
//! `examples/gpt_model.rs`, over 256 byte tokens). The PyTorch peer is
//! `scripts/device/transformer_peers.py` (same rows, same conventions).
//! `VOLTA_BENCH_KERNELS=1` lists the step's 25 costliest kernels too (`=all`: every one).
//!
//! ```text
//! cargo run --release -p volta-examples --example bench_transformer [-- --quick]
//! ```
use clap::Parser;
use std::time::Instant;
use volta::RawTensor;
use volta::backend::gpu::MatmulPrecision;
use volta::kernel::BinaryOp;
use volta::nn::loss::cross_entropy;
use volta::prelude::*;
use volta_examples::gpt::{CharGpt, Ids, benchmark_batch};

/// The transformer benchmark (fused attention, its memory, the GPT training step).
#[derive(Debug, Parser)]
#[command(name = "bench_transformer")]
struct Args {
    /// Small shapes (software GPUs, CI): T 128/256, the GPT step at batch 4.
    #[arg(long)]
    quick: bool,
    /// Caps the workgroup memory the attention kernels plan for (16384: the
    /// browser's plan), to compare plans on one adapter.
    #[arg(long)]
    attention_workgroup_bytes: Option<u32>,
    /// Only the attention rows.
    #[arg(long)]
    attention_only: bool,
    /// Only the GPT training step's rows.
    #[arg(long)]
    step_only: bool,
    /// The GPT step's precisions: `full` (f32), `half` (`MatmulPrecision::Half`),
    /// `split` (`MatmulPrecision::Split`), `both` (full and half) or `all`.
    #[arg(long, default_value = "both", value_parser = ["full", "half", "split", "both", "all"])]
    step_precision: String,
    /// Only the GPT step's products, one row each, with the operand layouts the
    /// step gives them (Wᵀ and Xᵀ are views), f32 and in half precision.
    /// (`--products half` times half precision only, `full` f32 only, `split`
    /// `MatmulPrecision::Split` only, `all` the three.)
    #[arg(long, num_args = 0..=1, default_missing_value = "both")]
    products: Option<String>,
    /// A tuning knob: products with few output tiles keep K whole instead of
    /// splitting it (and summing the partial products).
    #[arg(long)]
    no_split_k: bool,
    /// A tuning knob: half precision rounds f32 operands in the products' loads
    /// instead of in memory before them.
    #[arg(long)]
    no_operand_rounding: bool,
    /// A tuning knob: half precision rounds an operand already in memory by a
    /// kept copy when a product reads it at least this many times (once per
    /// tile of the other axis); 1 copies every one, a huge number none.
    #[arg(long)]
    copy_reads: Option<usize>,
    /// A tuning knob: every tensor-core product uses this entry of
    /// `CoopTiles::CANDIDATES` instead of the tiles chosen by size.
    #[arg(long)]
    tensor_core_tiles: Option<usize>,
    /// The attention rows' shapes as `BxT` pairs (`64x256`: the GPT step's
    /// attention), instead of B 8 T 1024 and B 2 T 4096.
    #[arg(long, value_delimiter = ',', value_parser = batch_by_length)]
    lengths: Option<Vec<(usize, usize)>>,
    /// Dropout on the attention weights, in the attention rows (none by default)
    /// and in the GPT step's blocks (0.2 by default, nanoGPT's): what the
    /// dropout mask costs the attention kernels.
    #[arg(long)]
    attention_dropout: Option<f64>,
    /// Left padding in the attention rows: every other batch element's keys
    /// start at this key (`AttentionSpec::keys`), as in a padded batch of
    /// prompts; none by default.
    #[arg(long)]
    padding: Option<usize>,
}

/// `BxT` as `(B, T)`.
fn batch_by_length(s: &str) -> Result<(usize, usize), String> {
    let (b, t) = s.split_once('x').ok_or(format!("{s:?} is not BxT"))?;
    let n = |x: &str| x.parse::<usize>().map_err(|e| format!("{x:?}: {e}"));
    Ok((n(b)?, n(t)?))
}

/// The precisions a flag names: `half`, `full`, or (anything else) both.
fn precisions(which: &str) -> Vec<MatmulPrecision> {
    match which {
        "half" => vec![MatmulPrecision::Half],
        "full" => vec![MatmulPrecision::Full],
        "split" => vec![MatmulPrecision::Split],
        "all" => vec![
            MatmulPrecision::Full,
            MatmulPrecision::Half,
            MatmulPrecision::Split,
        ],
        _ => vec![MatmulPrecision::Full, MatmulPrecision::Half],
    }
}

fn median(mut ts: Vec<f64>) -> f64 {
    ts.sort_by(f64::total_cmp);
    ts[ts.len() / 2]
}

/// Seconds per call of `f` (synced), median of `runs` after a warm-up.
fn time(runs: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    Gpu::sync().expect("the GPU works");
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                Gpu::sync().expect("the GPU works");
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn leaf(dims: &[usize], seed: u64) -> RawTensor<Gpu, f32> {
    RawTensor::uniform(dims, seed).tracked_leaf()
}

/// One attention training step's work: forward, `Σ out·w`, backward.
fn attention_step(
    q: &RawTensor<Gpu, f32>,
    k: &RawTensor<Gpu, f32>,
    v: &RawTensor<Gpu, f32>,
    w: &RawTensor<Gpu, f32>,
    (dropout, keys): (f64, Option<&[std::ops::Range<usize>]>),
) {
    let d = q.dims()[3];
    let spec = volta::backend::AttentionSpec {
        dropout,
        seed: 11,
        keys: keys.map(Into::into),
        ..volta::backend::AttentionSpec::new(1.0 / (d as f64).sqrt(), Some(0))
    };
    let out = q.attention_with(k, v, spec).binary(BinaryOp::Mul, w);
    let out = Tensor::<(usize, usize, usize, usize), Gpu>::try_from_raw(out).expect("rank 4");
    let grads = out.sum_all().backward();
    drop(grads);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let info = Gpu::init()?;
    println!("GPU: {} ({})", info.name, info.backend);
    Gpu::set_attention_workgroup_bytes(args.attention_workgroup_bytes);
    Gpu::set_matmul_split_k(!args.no_split_k);
    Gpu::set_matmul_operand_rounding(!args.no_operand_rounding);
    Gpu::set_matmul_copy_reads(args.copy_reads);
    if let Some(i) = args.tensor_core_tiles {
        let candidates = volta::backend::gpu::CoopTiles::CANDIDATES;
        let tiles = *candidates.get(i).ok_or_else(|| {
            format!(
                "--tensor-core-tiles: {i} is past the {} candidates",
                candidates.len()
            )
        })?;
        println!("tensor-core tiles {tiles:?}");
        Gpu::set_tensor_core_tiles(Some(tiles))?;
    }
    if let Some(which) = &args.products {
        products(
            if args.quick { 4 * 256 } else { 64 * 256 },
            &precisions(which),
        );
        return Ok(());
    }
    let (h, d) = (6, 64);
    let lengths: &[(usize, usize)] = match (args.step_only, args.quick, &args.lengths) {
        (true, _, _) => &[],
        (false, _, Some(lengths)) => lengths,
        (false, true, None) => &[(2, 128), (1, 256)],
        (false, false, None) => &[(8, 1024), (2, 4096)],
    };
    let dropout = args.attention_dropout.unwrap_or(0.0);
    let mut tag = if dropout > 0.0 {
        format!("_dropout{dropout}")
    } else {
        String::new()
    };
    if let Some(first) = args.padding {
        tag += &format!("_padded{first}");
    }
    for &(b, t) in lengths {
        let keys: Option<Vec<_>> = args.padding.map(|first| {
            (0..b)
                .map(|i| if i % 2 == 1 { first.min(t)..t } else { 0..t })
                .collect()
        });
        let step = (dropout, keys.as_deref());
        let (q, k, v) = (
            leaf(&[b, h, t, d], 1),
            leaf(&[b, h, t, d], 2),
            leaf(&[b, h, t, d], 3),
        );
        let w = RawTensor::uniform(&[b, h, t, d], 4);
        let s = time(10, || attention_step(&q, &k, &v, &w, step));
        // Causal: half the scores; forward 2 products, backward 5 (FLOPs as
        // FlashAttention-2 counts them: 4·B·H·T²·d forward, 2.5× that backward, halved).
        let flops = 3.5 * 4.0 * (b * h * t * t * d) as f64 / 2.0;
        println!(
            "{:40} {:10.3} ms {:8.2} TFLOP/s",
            format!("attention_fwd_bwd_f32_B{b}_T{t}{tag}"),
            s * 1e3,
            flops / s / 1e12
        );
        if std::env::var_os("VOLTA_BENCH_KERNELS").is_some()
            && let Ok(((), profile)) = Gpu::profile(|| attention_step(&q, &k, &v, &w, step))
        {
            print_kernels(&profile);
        }
        // The same in half precision: every product on tensor cores where the
        // adapter has them (against SDPA's f16 flash kernel).
        Gpu::set_matmul_precision(MatmulPrecision::Half);
        let s = time(10, || attention_step(&q, &k, &v, &w, step));
        println!(
            "{:40} {:10.3} ms {:8.2} TFLOP/s",
            format!("attention_fwd_bwd_half_B{b}_T{t}{tag}"),
            s * 1e3,
            flops / s / 1e12
        );
        if std::env::var_os("VOLTA_BENCH_KERNELS").is_some()
            && let Ok(((), profile)) = Gpu::profile(|| attention_step(&q, &k, &v, &w, step))
        {
            print_kernels(&profile);
        }
        Gpu::set_matmul_precision(MatmulPrecision::Full);
        // The forward alone (a prompt's attention), f32 and in half precision
        // (on tensor cores where the adapter has them).
        for (precision, tag) in [
            (MatmulPrecision::Full, "f32"),
            (MatmulPrecision::Half, "half"),
        ] {
            Gpu::set_matmul_precision(precision);
            // The output lives until the sync after it (dropped unread, a lazy
            // op might never run).
            let (q, k, v) = (q.detach(), k.detach(), v.detach());
            let mut out = None;
            let s = time(10, || out = Some(q.attention(&k, &v, Some(0))));
            drop(out);
            println!(
                "{:40} {:10.3} ms {:8.2} TFLOP/s",
                format!("attention_fwd_{tag}_B{b}_T{t}"),
                s * 1e3,
                4.0 * (b * h * t * t * d) as f64 / 2.0 / s / 1e12
            );
        }
        Gpu::set_matmul_precision(MatmulPrecision::Full);
    }
    if args.attention_only {
        return Ok(());
    }
    let memory_lengths: &[usize] = match (args.step_only, args.quick) {
        (true, _) => &[],
        (false, true) => &[128, 256, 512],
        (false, false) => &[512, 1024, 2048, 4096, 8192],
    };
    for &t in memory_lengths {
        Gpu::empty_cache();
        let base = Gpu::memory().reserved_bytes;
        let (q, k, v) = (
            leaf(&[1, h, t, d], 1),
            leaf(&[1, h, t, d], 2),
            leaf(&[1, h, t, d], 3),
        );
        let w = RawTensor::uniform(&[1, h, t, d], 4);
        attention_step(&q, &k, &v, &w, (dropout, None));
        Gpu::sync()?;
        let held = Gpu::memory().reserved_bytes - base;
        println!(
            "{:40} {:10.2} MiB ({:.0} bytes per position)",
            format!("attention_step_memory_T{t}"),
            held as f64 / (1 << 20) as f64,
            held as f64 / t as f64
        );
        drop((q, k, v, w));
    }
    let batch = if args.quick { 4 } else { 64 };
    for precision in precisions(&args.step_precision) {
        Gpu::set_matmul_precision(precision);
        let mut rng = Rng::seed(0);
        let mut model = CharGpt::<Gpu>::new(&mut rng);
        if let Some(p) = args.attention_dropout {
            for (i, block) in model.h.iter_mut().enumerate() {
                block.attn.attn_dropout = Dropout::seeded(p, 100 + i as u64);
            }
        }
        let mut opt = Adam::<Gpu>::adamw(6e-4, 0.1);
        let t = 256;
        let (x, y) = benchmark_batch(batch, t);
        let x = Ids::<Gpu>::from_vec_shaped(x, (batch, t))?;
        let y = Tensor::<(usize,), Gpu, u32>::from_vec_shaped(y, (batch * t,))?;
        let mut step = || {
            let logits = model.forward(&x);
            let rows = Tensor::<(usize, Const<256>), Gpu>::try_from_raw(
                logits.raw().reshape(&[batch * t, 256]),
            )
            .expect("rows of 256 logits");
            let loss = cross_entropy(&rows, &y);
            let grads = loss.backward();
            opt.step(&mut model, &grads);
        };
        let s = time(10, &mut step);
        let name = format!("gpt_step_shakespeare_char_{precision:?}_B{batch}");
        println!(
            "{name:40} {:10.3} ms {:8.0} tokens/s",
            s * 1e3,
            (batch * t) as f64 / s
        );
        // What one step needs beyond the parameters and Adam's state (which the
        // timed steps allocated): the most bytes tensors held at once (PyTorch's
        // peer: `max_memory_allocated`), and what the pool reserved for it,
        // which also counts buffers of one size class cached while another is
        // created.
        Gpu::empty_cache();
        let base = Gpu::memory();
        Gpu::reset_peak_memory();
        step();
        Gpu::sync()?;
        let after = Gpu::memory();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "{:40} {:10.2} MiB peak in use ({:.2} MiB reserved)",
            format!("gpt_step_memory_{precision:?}_B{batch}"),
            mib(after.peak_in_use_bytes - (base.reserved_bytes - base.cached_bytes)),
            mib(after.reserved_bytes - base.reserved_bytes)
        );
        // Where a step's wall time goes: recording on the host, then the wait.
        let (created, waits) = (Gpu::buffers_created(), Gpu::host_waits());
        let t0 = Instant::now();
        step();
        let recorded = t0.elapsed().as_secs_f64();
        Gpu::sync()?;
        println!(
            "  one step: {:.1} ms recording, {:.1} ms in all; {} buffers created, {} host waits",
            recorded * 1e3,
            t0.elapsed().as_secs_f64() * 1e3,
            Gpu::buffers_created() - created,
            Gpu::host_waits() - waits
        );
        if let Ok(((), profile)) = Gpu::profile(&mut step) {
            let total = profile.total().as_secs_f64();
            let mut shares: Vec<(&str, f64)> = Vec::new();
            for k in &profile.kernels {
                let class = classify(&k.name);
                match shares.iter_mut().find(|(c, _)| *c == class) {
                    Some((_, s)) => *s += k.total.as_secs_f64(),
                    None => shares.push((class, k.total.as_secs_f64())),
                }
            }
            shares.sort_by(|a, b| b.1.total_cmp(&a.1));
            let parts: Vec<String> = shares
                .iter()
                .map(|(c, s)| format!("{c} {:.0}%", 100.0 * s / total))
                .collect();
            if std::env::var_os("VOLTA_BENCH_KERNELS").is_some() {
                print_kernels(&profile);
            }
            println!(
                "  profile ({:.2} ms of kernels, {} launches): {}",
                total * 1e3,
                profile.calls(),
                parts.join(", ")
            );
        }
        if std::env::var_os("VOLTA_BENCH_MEMORY").is_some() {
            // Where the step's memory goes: held after the forward, then the
            // backward's peak.
            let in_use = || {
                let m = Gpu::memory();
                m.reserved_bytes - m.cached_bytes
            };
            Gpu::sync()?;
            let before = in_use();
            let logits = model.forward(&x);
            let rows = Tensor::<(usize, Const<256>), Gpu>::try_from_raw(
                logits.raw().reshape(&[batch * t, 256]),
            )
            .expect("rows of 256 logits");
            let loss = cross_entropy(&rows, &y);
            drop((logits, rows));
            Gpu::sync()?;
            let held = in_use() - before;
            Gpu::reset_peak_memory();
            let grads = loss.backward();
            Gpu::sync()?;
            let peak = Gpu::memory().peak_in_use_bytes - before;
            drop(grads);
            println!(
                "  memory: {:.1} MiB held after the forward, {:.1} MiB at the backward's peak",
                held as f64 / (1 << 20) as f64,
                peak as f64 / (1 << 20) as f64
            );
        }
    }
    Gpu::set_matmul_precision(MatmulPrecision::Full);
    Ok(())
}

/// The 25 kernels that took longest, one line each (`VOLTA_BENCH_KERNELS`;
/// every kernel with `VOLTA_BENCH_KERNELS=all`).
fn print_kernels(profile: &volta::backend::gpu::Profile) {
    let all = std::env::var_os("VOLTA_BENCH_KERNELS").is_some_and(|v| v == "all");
    for k in profile
        .kernels
        .iter()
        .take(if all { usize::MAX } else { 25 })
    {
        println!(
            "    {:9.3} ms {:5} calls  {}",
            k.total.as_secs_f64() * 1e3,
            k.calls,
            k.name
        );
    }
}

/// Seconds per call of `f` (recorded only), timed in bursts of eight between
/// syncs so that a sync's cost is not each call's, after a quarter second of
/// calls: the host making the operands leaves the GPU idle, its clock falls
/// (benchmarks/h100-2026-11-23-s9), and a few calls do not bring it back (the
/// same product's rows moved 4× between two processes, H200, 2026-12-04, after
/// a second of products before the first row).
fn per_call(mut f: impl FnMut()) -> f64 {
    const PER_SYNC: usize = 8;
    let heat = Instant::now();
    while heat.elapsed().as_secs_f64() < 0.25 {
        (0..PER_SYNC).for_each(|_| f());
        Gpu::sync().expect("the GPU works");
    }
    time(7, || (0..PER_SYNC).for_each(|_| f())) / PER_SYNC as f64
}

/// `--products`: each product of the GPT step (`rows` tokens, width 384, 1536
/// hidden, 1152 for the fused queries, keys and values, 256 logits) as the step
/// lays out its operands: the forward `X·Wᵀ` (Wᵀ a view of `W (out, in)`), the
/// input's gradient `G·W`, the weight's `Xᵀ·G` (Xᵀ a view). TFLOP/s, f32 and in
/// half precision.
fn products(rows: usize, precisions: &[MatmulPrecision]) {
    let (c, f, v) = (384, 1536, 256);
    let mut rng = Rng::seed(7);
    let mut operand = |dims: &[usize]| {
        let n = dims.iter().product::<usize>();
        let data: Vec<f32> = (0..n).map(|_| rng.uniform() as f32 - 0.5).collect();
        RawTensor::<Gpu, f32>::from_vec(data, dims)
    };
    // (name, m, k, n, A transposed, B transposed) of `A (m, k) · B (k, n)`.
    let shapes = [
        ("fwd_x_wt_384", rows, c, c, false, true),
        ("fwd_x_wt_1536", rows, c, f, false, true),
        ("fwd_x_wt_1152", rows, c, 3 * c, false, true),
        ("fwd_h_wt_384", rows, f, c, false, true),
        ("fwd_lm_head", rows, c, v, false, true),
        ("dx_g_w_384", rows, c, c, false, false),
        ("dx_g_w_1536", rows, f, c, false, false),
        ("dx_g_w_384x1536", rows, c, f, false, false),
        ("dx_g_w_1152", rows, 3 * c, c, false, false),
        ("dx_lm_head", rows, v, c, false, false),
        ("dw_xt_g_384", c, rows, c, true, false),
        ("dw_xt_g_384x1536", c, rows, f, true, false),
        ("dw_ht_g_1536x384", f, rows, c, true, false),
        ("dw_xt_g_384x1152", c, rows, 3 * c, true, false),
        ("dw_lm_head", c, rows, v, true, false),
        // The weight gradients' shapes with A stored along k (a diagnostic: the
        // step's Xᵀ is stored along m).
        ("dw_a_along_k_384", c, rows, c, false, false),
        ("dw_a_along_k_384x1536", c, rows, f, false, false),
        ("dw_a_along_k_1536x384", f, rows, c, false, false),
    ];
    for &precision in precisions {
        Gpu::set_matmul_precision(precision);
        for &(name, m, k, n, at, bt) in &shapes {
            let a = if at {
                operand(&[k, m]).transpose_last()
            } else {
                operand(&[m, k])
            };
            let b = if bt {
                operand(&[n, k]).transpose_last()
            } else {
                operand(&[k, n])
            };
            let s = per_call(|| a.matmul(&b).buffer().realize());
            println!(
                "{:48} {:10.1} µs {:8.1} TFLOP/s",
                format!("product_{precision:?}_{name}_{m}x{k}x{n}"),
                s * 1e6,
                2.0 * (m * k * n) as f64 / s / 1e12
            );
            if std::env::var_os("VOLTA_BENCH_KERNELS").is_some()
                && let Ok(((), profile)) = Gpu::profile(|| a.matmul(&b).buffer().realize())
            {
                print_kernels(&profile);
            }
        }
    }
    Gpu::set_matmul_precision(MatmulPrecision::Full);
    // The step's sums over its rows: split-K's partial products and the
    // gradients of biases and norms' weights (columns of a (rows, width) matrix).
    for (name, dims) in [
        ("split_k_sum_16x384x1536", [16, 384 * 1536]),
        ("split_k_sum_16x384x384", [16, 384 * 384]),
        ("column_sum_384", [rows, c]),
        ("column_sum_1536", [rows, f]),
    ] {
        let x = operand(&dims);
        let s = per_call(|| x.reduce(volta::kernel::ReduceOp::Sum, 0).buffer().realize());
        let bytes = 4.0 * (dims[0] * dims[1] + dims[1]) as f64;
        println!(
            "{:48} {:10.1} µs {:8.1} GB/s",
            format!("sum_{name}"),
            s * 1e6,
            bytes / s / 1e9
        );
    }
}

/// The kernel class of a profile entry.
fn classify(name: &str) -> &'static str {
    if name.contains("flash_attention") {
        "attention"
    } else if name.contains("matmul") || name.contains("coop") {
        "matmul"
    } else if name.contains("normalize") || name.contains("norm") {
        "norms"
    } else if name.contains("adam") || name.contains("sgd") {
        "optimiser"
    } else if name.contains("softmax") {
        "softmax (loss)"
    } else {
        "elementwise and other"
    }
}
