//! Trains the digits CNN natively on the CPU with the main job's recipe and writes
//! the model-only checkpoint the demo page ships (`web/www/digits.safetensors`):
//!
//! ```text
//! cargo run -p volta-web --release --bin export_digits -- [--epochs 20] [--seed 0]
//!     [--data data/digits.csv.gz] [--out web/www/digits.safetensors]
//! ```
#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    match native::run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("export_digits: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A native tool: nothing to run in the browser.
#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::path::PathBuf;
    use std::time::Instant;
    use volta::prelude::*;
    use volta_web::trainer::{Trainer, accuracy};

    struct Options {
        epochs: u32,
        seed: u64,
        data: PathBuf,
        out: PathBuf,
    }

    fn options() -> Result<Options, String> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut o = Options {
            epochs: 20,
            seed: 0,
            data: root.join("data/digits.csv.gz"),
            out: root.join("web/www/digits.safetensors"),
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or(format!("{flag} needs a value"));
            match flag.as_str() {
                "--epochs" => o.epochs = value()?.parse().map_err(|e| format!("--epochs: {e}"))?,
                "--seed" => o.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
                "--data" => o.data = value()?.into(),
                "--out" => o.out = value()?.into(),
                "-h" | "--help" => {
                    println!(
                        "export_digits [--epochs 20] [--seed 0] [--data data/digits.csv.gz] \
                         [--out web/www/digits.safetensors]"
                    );
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument `{other}` (see --help)")),
            }
        }
        Ok(o)
    }

    pub fn run() -> Result<(), String> {
        let o = options()?;
        let data = volta::data::readers::digits::load(&o.data).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let mut trainer = Trainer::<Cpu>::new(&data, o.epochs, o.seed);
        while !trainer.done() {
            trainer.step();
        }
        let (x, labels) = trainer.test_set();
        let mut model = trainer.into_model();
        let logits = {
            let _no_grad = no_grad();
            model.forward(&x).to_vec()
        };
        let acc = accuracy(&logits, &labels);
        println!(
            "{} epochs on the CPU in {:.1} s: test accuracy {:.2}% ({} images)",
            o.epochs,
            start.elapsed().as_secs_f64(),
            100.0 * acc,
            labels.len()
        );
        if acc < 0.97 {
            return Err(format!(
                "test accuracy {:.2}% is below 97%: not writing the checkpoint",
                100.0 * acc
            ));
        }
        volta::io::save(&o.out, &mut model).map_err(|e| e.to_string())?;
        let size = std::fs::metadata(&o.out).map_or(0, |m| m.len());
        println!("wrote {} ({size} bytes)", o.out.display());
        Ok(())
    }
}
