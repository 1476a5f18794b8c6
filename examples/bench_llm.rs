//! Language-model benchmark: SmolLM2's prefill and decode speed with Volta, in the
//! shapes of llama.cpp's `llama-bench` (`-p 512`: a 512-token prompt into an empty
//! cache; `-n 128`: 128 tokens decoded one at a time from an empty cache), so the
//! two read side by side. Token ids are seeded random ids (speed does not depend
//! on them). Every timing ends with the logits read back (the GPU synced); each
//! figure is the median of `--runs` runs after warming up: a run, repeated until
//! a second has passed (an idle GPU lowers its clocks and raises them again only
//! under sustained load; `llama-bench` measures after its prompt rows).
//!
//! Decode rows also split a token's time into host time (recording, or replaying
//! the captured step) and the rest (waiting for the GPU and reading the logits).
//!
//! ```text
//! cargo run --release -p volta-examples --example bench_llm -- --model PATH \
//!     [--device cpu|gpu] [--prompt 512] [--tokens 128] [--runs 5]
//! ```
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use volta::Rng;
use volta::backend::{InferenceBackend, Replay};
use volta::io::gguf::Gguf;
use volta::models::llama::SmolLM2_135M;

#[derive(Parser)]
struct Args {
    /// The GGUF file.
    #[arg(long)]
    model: PathBuf,
    /// `cpu` or `gpu`.
    #[arg(long, default_value = "gpu")]
    device: String,
    /// Prompt tokens of the prefill rows (0: none).
    #[arg(long, default_value_t = 512)]
    prompt: usize,
    /// Tokens of the decode rows (0: none).
    #[arg(long, default_value_t = 128)]
    tokens: usize,
    /// Timed runs per row (after warming up).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// GPU only: also print the GPU time of each kernel of one decode step (a
    /// replay, at position 64) and of one prefill of `--prompt` tokens, from
    /// timestamp queries.
    #[arg(long)]
    profile: bool,
}

/// Decoding before the timed runs (at least one run).
const WARM_UP: Duration = Duration::from_secs(1);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run<D: InferenceBackend + Replay>(args: &Args, gguf: &Gguf) -> Result<(), String> {
    let t0 = Instant::now();
    let model = SmolLM2_135M::<D>::from_gguf(gguf).map_err(|e| e.to_string())?;
    let vocab = SmolLM2_135M::<D>::VOCAB as u32;
    println!("loaded in {:.2} s", t0.elapsed().as_secs_f64());
    let mut rng = Rng::seed(7);
    let mut ids = |n: usize| -> Vec<u32> {
        (0..n)
            .map(|_| (rng.uniform() * f64::from(vocab)) as u32 % vocab)
            .collect()
    };
    if args.prompt > 0 {
        let prompt = ids(args.prompt);
        let mut times = Vec::new();
        for r in 0..=args.runs {
            let mut cache = model.cache();
            let start = Instant::now();
            let logits = model.forward(&prompt, &mut cache).to_vec();
            let s = start.elapsed().as_secs_f64();
            assert!(logits.iter().all(|v| v.is_finite()));
            if r > 0 {
                times.push(s);
            }
        }
        let t = median(times);
        println!(
            "{:4} pp{:<4} {:>10.1} tok/s   ({:.2} ms)",
            D::NAME,
            args.prompt,
            args.prompt as f64 / t,
            t * 1e3
        );
    }
    if args.tokens > 0 {
        let tokens = ids(args.tokens);
        // One run of the decode row: seconds, and host seconds per token.
        let decode = || {
            let mut cache = model.cache();
            let mut host = Duration::ZERO;
            let start = Instant::now();
            for &t in &tokens {
                let h = Instant::now();
                let logits = model.forward(&[t], &mut cache);
                host += h.elapsed();
                let row = logits.to_vec();
                assert!(row[0].is_finite());
            }
            (
                start.elapsed().as_secs_f64(),
                host.as_secs_f64() / args.tokens as f64,
            )
        };
        let warm = Instant::now();
        while warm.elapsed() < WARM_UP {
            decode();
        }
        let (mut rates, mut host_share) = (Vec::new(), Vec::new());
        for _ in 0..args.runs {
            let (s, host) = decode();
            rates.push(args.tokens as f64 / s);
            host_share.push(host);
        }
        let rate = median(rates);
        let host = median(host_share);
        println!(
            "{:4} tg{:<4} {:>10.1} tok/s   ({:.3} ms/token, of which host {:.3} ms)",
            D::NAME,
            args.tokens,
            rate,
            1e3 / rate,
            host * 1e3
        );
    }
    Ok(())
}

/// The kernels of one replayed decode step, timed on the GPU.
#[cfg(feature = "gpu")]
fn profile(gguf: &Gguf, prompt: usize) -> Result<(), String> {
    use volta::Gpu;
    let model = SmolLM2_135M::<Gpu>::from_gguf(gguf).map_err(|e| e.to_string())?;
    let mut cache = model.cache();
    model.forward(&[1; 63], &mut cache).to_vec();
    model.forward(&[2], &mut cache).to_vec(); // captures the step
    let (_, profile) =
        Gpu::profile(|| model.forward(&[3], &mut cache).to_vec()).map_err(|e| e.to_string())?;
    println!("one decode step at position 64, replayed:\n{profile}");
    if prompt > 0 {
        let mut cache = model.cache();
        let ids = vec![5; prompt];
        let (_, profile) =
            Gpu::profile(|| model.forward(&ids, &mut cache).to_vec()).map_err(|e| e.to_string())?;
        println!("one prefill of {prompt} tokens:\n{profile}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = Gguf::open(&args.model)
        .map_err(|e| e.to_string())
        .and_then(|gguf| match args.device.as_str() {
            "cpu" => run::<volta::Cpu>(&args, &gguf),
            #[cfg(feature = "gpu")]
            "gpu" => run::<volta::Gpu>(&args, &gguf).and_then(|()| {
                if args.profile {
                    profile(&gguf, args.prompt)
                } else {
                    Ok(())
                }
            }),
            other => Err(format!("unknown device `{other}` (cpu or gpu)")),
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
