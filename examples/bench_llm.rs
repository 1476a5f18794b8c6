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

/// SmolLM2's prefill and decode speed, in the shapes of llama.cpp's `llama-bench`
/// (`pp512`, `tg128`): each figure the median of `--runs` runs after warming up.
#[derive(Parser)]
#[command(name = "bench_llm", args_override_self = true)]
struct Args {
    /// The GGUF file.
    #[arg(long)]
    model: PathBuf,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Device::Gpu)]
    device: Device,
    /// Prompt tokens of the prefill rows (0: none).
    #[arg(long, default_value_t = 512)]
    prompt: usize,
    /// Tokens of the decode rows (0: none).
    #[arg(long, default_value_t = 128)]
    tokens: usize,
    /// Timed runs per row (after warming up).
    #[arg(long, default_value_t = 5, value_parser = volta_examples::cli::positive())]
    runs: usize,
    /// GPU only: also print the GPU time of each kernel of one decode step (a
    /// replay, at position 64) and of one prefill of `--prompt` tokens, from
    /// timestamp queries.
    #[arg(long)]
    profile: bool,
    /// Only the cold start: seconds from the process's start to the first token
    /// (the file opened, the model loaded, `--prompt` tokens run, one token
    /// decoded), each stage printed. Run it in a fresh process.
    #[arg(long)]
    first_token: bool,
    /// Batched decode rows: for each size B, B sequences of `--prompt` tokens
    /// (one prefilled cache copied into every slot) decode `--tokens` tokens
    /// together, the logits of all read back each step, as llama.cpp's
    /// `llama-batched-bench -npp P -ntg T -npl B,...` does; the figure is the
    /// batch's tokens per second. E.g. `--batch 1,4,16,64`.
    #[arg(long, value_delimiter = ',', value_parser = volta_examples::cli::positive())]
    batch: Vec<usize>,
    /// GPU only, a tuning knob: the prefill's tensor-core tiles as `WM,WN,FM,FN`
    /// (subgroups along M and N, 16×16 fragments per subgroup along each).
    #[arg(long, value_parser = tiles)]
    tensor_core_tiles: Option<[u32; 4]>,
    /// GPU only, a tuning knob: products with few output tiles keep K whole
    /// instead of splitting it (and summing the partial products).
    #[arg(long)]
    no_split_k: bool,
}

fn tiles(s: &str) -> Result<[u32; 4], String> {
    let v: Vec<u32> = s
        .split(',')
        .map(|x| x.trim().parse().map_err(|e| format!("{x}: {e}")))
        .collect::<Result<_, _>>()?;
    v.try_into()
        .map_err(|_| "four numbers: WM,WN,FM,FN".to_string())
}

/// The `--device` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Device {
    /// The CPU backend.
    Cpu,
    /// The wgpu backend (builds with the `gpu` feature, on by default).
    Gpu,
}

/// Decoding before the timed runs (at least one run).
const WARM_UP: Duration = Duration::from_secs(1);

/// Applies `--tensor-core-tiles` (K steps of one 32-weight block).
#[cfg(feature = "gpu")]
fn set_tiles(t: Option<[u32; 4]>) -> Result<(), String> {
    use volta::backend::gpu::{CoopTiles, Staging};
    let tiles = t.map(|[wm, wn, fm, fn_]| CoopTiles {
        wm,
        wn,
        fm,
        fn_,
        bk: 32,
        pad: 8,
        staging: Staging::Prefetch,
    });
    volta::Gpu::set_tensor_core_tiles(tiles).map_err(|e| e.to_string())
}

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
            let mut row = Vec::new();
            let start = Instant::now();
            for &t in &tokens {
                let h = Instant::now();
                let logits = model.forward(&[t], &mut cache);
                host += h.elapsed();
                logits.try_read_into(&mut row).expect("the logits");
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
    for &b in &args.batch {
        let (rate, read) = batched(
            &model,
            b,
            &ids(args.prompt.max(1)),
            &ids(args.tokens.max(1)),
            args.runs,
        );
        println!(
            "{:4} batch {b:<3} pp{} tg{:<4} {:>10.1} tok/s   ({:.3} ms/step, \
             of which reading the logits back {:.3} ms)",
            D::NAME,
            args.prompt.max(1),
            args.tokens.max(1),
            rate,
            1e3 * b as f64 / rate,
            read * 1e3
        );
    }
    Ok(())
}

/// Tokens per second of `b` sequences decoding `tokens` together after
/// `prompt` (the median of `runs` runs, after one to warm up), and the
/// seconds that reading a step's logits back takes (a second read of the last
/// step's, which the GPU has computed already).
fn batched<D: InferenceBackend + Replay>(
    model: &SmolLM2_135M<D>,
    b: usize,
    prompt: &[u32],
    tokens: &[u32],
    runs: usize,
) -> (f64, f64) {
    let mut cache = model.cache();
    model.forward(prompt, &mut cache);
    let run = || {
        let mut batch = model.batch(b);
        for i in 0..b {
            batch.set(i, &cache);
        }
        // Read into one vector, as a server would (fresh pages cost more than
        // the copy).
        let mut host = Vec::new();
        let start = Instant::now();
        let mut last = None;
        for &t in tokens {
            let logits = model.decode_batch(&vec![t; b], &mut batch);
            logits.try_read_into(&mut host).expect("the logits");
            assert!(host[0].is_finite());
            last = Some(logits);
        }
        let rate = (tokens.len() * b) as f64 / start.elapsed().as_secs_f64();
        // The read alone: the last step's logits again, computed already.
        let r = Instant::now();
        if let Some(l) = last {
            l.try_read_into(&mut host).expect("the logits");
        }
        (rate, r.elapsed().as_secs_f64())
    };
    run();
    let (rates, reads): (Vec<f64>, Vec<f64>) = (0..runs).map(|_| run()).unzip();
    (median(rates), median(reads))
}

/// The cold start: each stage's end, in seconds since `start` (the process's).
fn first_token<D: InferenceBackend + Replay>(
    args: &Args,
    gguf: &Gguf,
    start: Instant,
    opened: f64,
) -> Result<(), String> {
    let model = SmolLM2_135M::<D>::from_gguf(gguf).map_err(|e| e.to_string())?;
    let loaded = start.elapsed().as_secs_f64();
    let mut cache = model.cache();
    let prompt: Vec<u32> = (0..args.prompt.max(1) as u32)
        .map(|i| 1 + i % 1000)
        .collect();
    let logits = model.forward(&prompt, &mut cache).to_vec();
    let prefilled = start.elapsed().as_secs_f64();
    let next = (0..logits.len())
        .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
        .unwrap_or(0) as u32;
    let row = model.forward(&[next], &mut cache).to_vec();
    assert!(row[0].is_finite());
    let first = start.elapsed().as_secs_f64();
    println!(
        "{:4} first token {:.2} s after start (file opened {opened:.2} s, model loaded {loaded:.2} s, \
         {} prompt tokens done {prefilled:.2} s, one token decoded {first:.2} s)",
        D::NAME,
        first,
        prompt.len()
    );
    Ok(())
}

/// The kernels of one replayed decode step, timed on the GPU.
#[cfg(feature = "gpu")]
fn profile(gguf: &Gguf, prompt: usize, batches: &[usize]) -> Result<(), String> {
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
    for &b in batches {
        let mut batch = model.batch(b);
        for i in 0..b {
            batch.set(i, &cache);
        }
        model.decode_batch(&vec![4; b], &mut batch).to_vec(); // captures the step
        let (_, profile) = Gpu::profile(|| model.decode_batch(&vec![5; b], &mut batch).to_vec())
            .map_err(|e| e.to_string())?;
        println!("one batched decode step of {b} sequences at position 66, replayed:\n{profile}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let start = Instant::now();
    let args = Args::parse();
    let result = Gguf::open(&args.model)
        .map_err(|e| e.to_string())
        .and_then(|gguf| {
            let opened = start.elapsed().as_secs_f64();
            match (args.first_token, args.device) {
                (true, Device::Cpu) => first_token::<volta::Cpu>(&args, &gguf, start, opened),
                #[cfg(feature = "gpu")]
                (true, Device::Gpu) => first_token::<volta::Gpu>(&args, &gguf, start, opened),
                _ => Ok(()),
            }
            .map(|()| gguf)
        })
        .and_then(|gguf| match args.device {
            _ if args.first_token => Ok(()),
            Device::Cpu => run::<volta::Cpu>(&args, &gguf),
            #[cfg(feature = "gpu")]
            Device::Gpu => set_tiles(args.tensor_core_tiles)
                .map(|()| volta::Gpu::set_matmul_split_k(!args.no_split_k))
                .and_then(|()| run::<volta::Gpu>(&args, &gguf))
                .and_then(|()| {
                    if args.profile {
                        profile(&gguf, args.prompt, &args.batch)
                    } else {
                        Ok(())
                    }
                }),
            #[cfg(not(feature = "gpu"))]
            Device::Gpu => {
                Err("this build has no GPU backend (build with the `gpu` feature)".into())
            }
        });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The invocations of `scripts/device/*.sh` parse as they did.
    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &str| Args::try_parse_from(argv.split_whitespace());
        let a = parse("bench_llm --model m.gguf").unwrap();
        assert_eq!(
            (a.device, a.prompt, a.tokens, a.runs, a.profile),
            (Device::Gpu, 512, 128, 5, false)
        );
        let a =
            parse("bench_llm --model m --device gpu --prompt 512 --tokens 128 --runs 1 --profile")
                .unwrap();
        assert_eq!((a.device, a.runs, a.profile), (Device::Gpu, 1, true));
        let a = parse("bench_llm --device cpu --prompt 0 --tokens 64 --runs 3 --model m").unwrap();
        assert_eq!(
            (a.device, a.prompt, a.tokens, a.runs),
            (Device::Cpu, 0, 64, 3)
        );
        assert!(parse("bench_llm --model m --device tpu").is_err());
        assert!(parse("bench_llm --device cpu").is_err());
    }
}
