//! `cargo run --release`: trains a CNN defined with `model!` on the bundled UCI
//! optical digits, on the GPU when one is present. See `--help`.
mod args;
mod data_path;
mod history;
mod model;
mod plot;
mod progress;
mod ranks;
mod run;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = args::Args::parse_checked();
    if let Some(checkpoint) = &args.evaluate {
        return match run::evaluate_checkpoint(&args, checkpoint) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("volta-train: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run::run(&args) {
        Ok(report) => {
            if report.main {
                println!("{report}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("volta-train: {e}");
            ExitCode::FAILURE
        }
    }
}
