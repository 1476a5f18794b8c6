//! The command line.
use crate::data_path::{self, NotFound};
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, ValueEnum};
use std::ffi::OsString;
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
    /// At most `--epochs`.
    #[arg(long, value_name = "EPOCH", value_parser = clap::value_parser!(u32).range(1..))]
    pub stop_after: Option<u32>,
    /// Seed for the split, the initial weights and the batch order: equal seeds
    /// give equal numbers.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The digits file (gzip CSV, 64 pixels then the label per line) [default:
    /// data/digits.csv.gz in the current folder or the nearest folder above it, else
    /// in the executable's folder or above it].
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Train nothing: load this checkpoint (written by this program, or a
    /// `state_dict()` saved from Python with the same layer names) and print its
    /// loss, accuracy and confusion matrix on the `--seed` split's test images.
    #[arg(long, value_name = "CHECKPOINT", conflicts_with_all = ["resume", "stop_after"])]
    pub evaluate: Option<PathBuf>,
}

impl Args {
    /// Parses `argv` (the program name first) and checks the options against each
    /// other; errors are clap's, so `.exit()` prints them with the usage.
    pub fn try_parse_checked_from<I, T>(argv: I) -> Result<Args, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let args = Args::try_parse_from(argv)?;
        args.check()
            .map_err(|message| Args::command().error(ErrorKind::ArgumentConflict, message))?;
        Ok(args)
    }

    /// Checks the options against each other: `--stop-after` at most `--epochs`.
    pub fn check(&self) -> Result<(), String> {
        match self.stop_after {
            Some(stop) if stop > self.epochs => Err(format!(
                "--stop-after {stop} is past --epochs {epochs}: the run ends at epoch \
                 {epochs} (raise --epochs, or stop at or before it)",
                epochs = self.epochs
            )),
            _ => Ok(()),
        }
    }

    /// The process's command line, checked; exits with clap's message on an error.
    pub fn parse_checked() -> Args {
        Args::try_parse_checked_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// The digits file: `--data`, else the bundled file found at run time.
    pub fn data_path(&self) -> Result<PathBuf, NotFound> {
        match &self.data {
            Some(path) => Ok(path.clone()),
            None => data_path::find_digits(),
        }
    }
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

    #[test]
    fn every_option_has_a_help_line() {
        let help = Args::command().render_long_help().to_string();
        for arg in Args::command().get_arguments() {
            let long = arg.get_long().expect("every option is a long one");
            assert!(arg.get_help().is_some(), "--{long} has no help");
            assert!(help.contains(&format!("--{long}")), "--{long}: {help}");
        }
    }

    #[test]
    fn stop_after_past_epochs_is_an_error() {
        let parse = |argv: &[&str]| Args::try_parse_checked_from(argv.iter().copied());
        let err = parse(&["volta-train", "--epochs", "10", "--stop-after", "12"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        let message = err.to_string();
        assert!(
            message.contains("--stop-after 12 is past --epochs 10"),
            "{message}"
        );
        // The default --epochs counts too.
        assert!(parse(&["volta-train", "--stop-after", "21"]).is_err());
        assert!(parse(&["volta-train", "--stop-after", "0"]).is_err());
        for ok in [
            &["volta-train", "--stop-after", "20"][..],
            &["volta-train", "--epochs", "3", "--stop-after", "2"],
        ] {
            let a = parse(ok).expect("a stop within the run");
            assert!(a.stop_after <= Some(a.epochs));
        }
    }

    #[test]
    fn data_defaults_to_the_bundled_file_found_at_run_time() {
        let a = Args::try_parse_checked_from(["volta-train"]).unwrap();
        assert_eq!(a.data, None);
        let found = a.data_path().expect("found from the repository");
        assert!(found.ends_with(data_path::BUNDLED_DIGITS));
        assert!(found.is_file());
        let a = Args::try_parse_checked_from(["volta-train", "--data", "x.csv"]).unwrap();
        assert_eq!(a.data_path().unwrap(), PathBuf::from("x.csv"));
    }
}
