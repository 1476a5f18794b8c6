//! Command-line options shared by the examples (clap's derive API, as the main job's).
use clap::CommandFactory;
use clap::builder::RangedU64ValueParser;
use std::path::PathBuf;

/// The device an example runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceChoice {
    /// A hardware GPU when one is present, else the CPU.
    #[default]
    Auto,
    /// The CPU backend.
    Cpu,
    /// The wgpu backend (any adapter, software ones included).
    Gpu,
}

/// `[--device auto|cpu|gpu]` (also `--device=gpu`), `auto` by default: flatten it
/// into an example's arguments with `#[command(flatten)]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct DeviceArg {
    /// Where to run: `auto` takes a hardware GPU when there is one, else the CPU;
    /// `gpu` takes any adapter (software ones such as lavapipe included).
    #[arg(long, value_enum, default_value_t = DeviceChoice::Auto)]
    pub device: DeviceChoice,
}

/// `[--data PATH]`: the digits file, by default the bundled one found at run time
/// (see [`crate::find_digits`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct DataArg {
    /// The digits file (gzip CSV, 64 pixels then the label per line) [default:
    /// data/digits.csv.gz in the current folder or the nearest folder above it, else
    /// in the executable's folder or above it].
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
}

impl DataArg {
    /// `--data`, else the bundled file; the error names the paths tried.
    pub fn path(&self) -> Result<PathBuf, crate::NotFound> {
        match &self.data {
            Some(path) => Ok(path.clone()),
            None => crate::find_digits(),
        }
    }
}

/// A value parser for a positive count (`1..`), as a `usize`.
pub fn positive() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// Resolves `auto`: the GPU when a hardware adapter is present (software adapters
/// such as lavapipe are slower than the CPU backend), else the CPU.
pub fn resolve(choice: DeviceChoice) -> DeviceChoice {
    match choice {
        DeviceChoice::Auto => {
            #[cfg(feature = "gpu")]
            if volta::Gpu::init().is_ok_and(|info| info.device_type != "Cpu") {
                return DeviceChoice::Gpu;
            }
            DeviceChoice::Cpu
        }
        other => other,
    }
}

/// Checks an example's command line for its tests: clap's own consistency checks,
/// and a help line for every option, each listed by `--help`.
pub fn assert_documented<P: CommandFactory>() {
    let command = P::command();
    command.clone().debug_assert();
    let help = command.clone().render_long_help().to_string();
    for arg in command.get_arguments() {
        let name = match (arg.get_long(), arg.get_value_names()) {
            (Some(long), _) => format!("--{long}"),
            (None, Some([value, ..])) => format!("<{value}>"),
            (None, _) => format!("<{}>", arg.get_id().as_str().to_uppercase()),
        };
        assert!(arg.get_help().is_some(), "{name} has no help line");
        assert!(
            help.contains(&name),
            "`--help` does not list {name}:\n{help}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use clap::error::ErrorKind;

    /// A command line of `--device` alone.
    #[derive(Debug, Parser)]
    struct Only {
        #[command(flatten)]
        device: DeviceArg,
    }

    fn parse(args: &[&str]) -> Result<DeviceChoice, ErrorKind> {
        Only::try_parse_from(std::iter::once("example").chain(args.iter().copied()))
            .map(|o| o.device.device)
            .map_err(|e| e.kind())
    }

    #[test]
    fn parses_devices_and_rejects_the_rest() {
        assert_eq!(parse(&[]), Ok(DeviceChoice::Auto));
        assert_eq!(parse(&["--device", "auto"]), Ok(DeviceChoice::Auto));
        assert_eq!(parse(&["--device", "gpu"]), Ok(DeviceChoice::Gpu));
        assert_eq!(parse(&["--device=cpu"]), Ok(DeviceChoice::Cpu));
        assert_eq!(parse(&["--device", "tpu"]), Err(ErrorKind::InvalidValue));
        assert_eq!(parse(&["--device"]), Err(ErrorKind::InvalidValue));
        assert_eq!(parse(&["--devices"]), Err(ErrorKind::UnknownArgument));
        assert_eq!(parse(&["--help"]), Err(ErrorKind::DisplayHelp));
        assert_documented::<Only>();
    }

    #[test]
    fn positive_counts_only() {
        #[derive(Debug, Parser)]
        struct Count {
            /// A count.
            #[arg(long, value_parser = positive())]
            n: usize,
        }
        assert_eq!(Count::try_parse_from(["x", "--n", "3"]).unwrap().n, 3);
        for bad in ["0", "-1", "x"] {
            assert!(Count::try_parse_from(["x", "--n", bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn data_defaults_to_the_bundled_file() {
        let found = DataArg::default()
            .path()
            .expect("found from the repository");
        assert!(found.is_file(), "{}", found.display());
        let given = DataArg {
            data: Some("elsewhere.csv".into()),
        };
        assert_eq!(given.path().unwrap(), PathBuf::from("elsewhere.csv"));
    }
}
