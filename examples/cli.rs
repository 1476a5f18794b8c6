//! Command-line options shared by the examples.
use std::fmt;

/// The device an example runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU backend.
    Cpu,
    /// The wgpu backend.
    Gpu,
}

/// A command line the examples do not understand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// `--device` names no known device.
    UnknownDevice(String),
    /// An option that needs a value came last.
    MissingValue(&'static str),
    /// An argument no example accepts.
    Unexpected(String),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::UnknownDevice(d) => {
                write!(f, "unknown device `{d}`: expected `cpu` or `gpu`")
            }
            ArgError::MissingValue(opt) => write!(f, "`{opt}` needs a value"),
            ArgError::Unexpected(a) => {
                write!(f, "unexpected argument `{a}` (usage: [--device cpu|gpu])")
            }
        }
    }
}

impl std::error::Error for ArgError {}

/// Parses `[--device cpu|gpu]` (also `--device=gpu`); the default is the CPU.
pub fn parse_device<I: IntoIterator<Item = String>>(args: I) -> Result<DeviceChoice, ArgError> {
    let mut device = DeviceChoice::Cpu;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--device") {
            Some("") => args.next().ok_or(ArgError::MissingValue("--device"))?,
            Some(rest) if rest.starts_with('=') => rest[1..].to_string(),
            _ => return Err(ArgError::Unexpected(arg)),
        };
        device = match value.as_str() {
            "cpu" => DeviceChoice::Cpu,
            "gpu" => DeviceChoice::Gpu,
            _ => return Err(ArgError::UnknownDevice(value)),
        };
    }
    Ok(device)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<DeviceChoice, ArgError> {
        parse_device(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_devices_and_rejects_the_rest() {
        assert_eq!(parse(&[]), Ok(DeviceChoice::Cpu));
        assert_eq!(parse(&["--device", "gpu"]), Ok(DeviceChoice::Gpu));
        assert_eq!(parse(&["--device=cpu"]), Ok(DeviceChoice::Cpu));
        assert_eq!(
            parse(&["--device", "tpu"]),
            Err(ArgError::UnknownDevice("tpu".into()))
        );
        assert_eq!(
            parse(&["--device"]),
            Err(ArgError::MissingValue("--device"))
        );
        assert_eq!(
            parse(&["--devices"]),
            Err(ArgError::Unexpected("--devices".into()))
        );
    }
}
