//! The command line.
use clap::{Parser, ValueEnum};
use std::path::PathBuf;

/// Trains a CNN defined with Volta's `model!` on the bundled UCI optical digits
/// (1,797 8×8 images): prints the model and the device, shows progress, evaluates
/// every epoch, and writes a checkpoint, a metrics CSV and a PNG of the curves.
#[derive(Clone, Debug, Parser)]
#[command(name = "volta-train", version)]
pub struct Args {
    /// Where to train: `auto` takes a hardware GPU when there is one, else the CPU;
    /// `gpu` takes any adapter (software ones such as lavapipe included).
    #[arg(long, value_enum, default_value_t = DeviceChoice::Auto)]
    pub device: DeviceChoice,
    /// Epochs to train (a resumed run continues up to this many in all).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub epochs: u32,
    /// Folder for the checkpoint, metrics CSV and plot.
    #[arg(long, default_value = "runs/digits")]
    pub out: PathBuf,
    /// Continue the run saved in `--out` (model, optimiser, epoch).
    #[arg(long)]
    pub resume: bool,
    /// Stop after this epoch, as an interruption would: the schedule still spans
    /// `--epochs`, and `--resume` later continues exactly where this run stopped.
    #[arg(long, value_name = "EPOCH")]
    pub stop_after: Option<u32>,
    /// Seed for the split, the initial weights and the batch order: equal seeds
    /// give equal numbers.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The digits file (gzip CSV, 64 pixels then the label per line).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv.gz"))]
    pub data: PathBuf,
}

/// The `--device` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceChoice {
    /// A hardware GPU when present, else the CPU.
    Auto,
    /// The CPU backend.
    Cpu,
    /// The wgpu backend, on any adapter.
    Gpu,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Args::command().debug_assert();
        let a = Args::try_parse_from(["volta-train", "--device", "cpu", "--epochs", "3"]).unwrap();
        assert_eq!(
            (a.device, a.epochs, a.resume),
            (DeviceChoice::Cpu, 3, false)
        );
        assert!(Args::try_parse_from(["volta-train", "--device", "tpu"]).is_err());
        assert!(Args::try_parse_from(["volta-train", "--epochs", "0"]).is_err());
    }
}
