//! Command-line options shared by the examples.
use std::fmt;

/// The device an example runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// A hardware GPU when one is present, else the CPU (the default).
    Auto,
    /// The CPU backend.
    Cpu,
    /// The wgpu backend (any adapter, software ones included).
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
                write!(f, "unknown device `{d}`: expected `auto`, `cpu` or `gpu`")
            }
            ArgError::MissingValue(opt) => write!(f, "`{opt}` needs a value"),
            ArgError::Unexpected(a) => {
                write!(
                    f,
                    "unexpected argument `{a}` (usage: [--device auto|cpu|gpu])"
                )
            }
        }
    }
}

impl std::error::Error for ArgError {}

/// Parses `[--device auto|cpu|gpu]` (also `--device=gpu`); the default is `auto`.
pub fn parse_device<I: IntoIterator<Item = String>>(args: I) -> Result<DeviceChoice, ArgError> {
    let mut device = DeviceChoice::Auto;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = match arg.strip_prefix("--device") {
            Some("") => args.next().ok_or(ArgError::MissingValue("--device"))?,
            Some(rest) if rest.starts_with('=') => rest[1..].to_string(),
            _ => return Err(ArgError::Unexpected(arg)),
        };
        device = match value.as_str() {
            "auto" => DeviceChoice::Auto,
            "cpu" => DeviceChoice::Cpu,
            "gpu" => DeviceChoice::Gpu,
            _ => return Err(ArgError::UnknownDevice(value)),
        };
    }
    Ok(device)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<DeviceChoice, ArgError> {
        parse_device(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn parses_devices_and_rejects_the_rest() {
        assert_eq!(parse(&[]), Ok(DeviceChoice::Auto));
        assert_eq!(parse(&["--device", "auto"]), Ok(DeviceChoice::Auto));
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
