//! What can go wrong reading or writing a checkpoint.
use crate::optim::StateError;
use std::fmt;
use std::path::PathBuf;

/// Why a checkpoint could not be saved or loaded. Loading checks everything before
/// it changes anything: on error the model and optimiser are as they were.
#[derive(Debug)]
pub enum CheckpointError {
    /// The file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not a valid safetensors file (truncated, bad header, overlapping
    /// offsets…).
    Format {
        /// The file.
        path: PathBuf,
        /// What the safetensors reader found.
        message: String,
    },
    /// The file's tensors do not fit the model: every mismatch, in name order.
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        mismatches: Vec<Mismatch>,
    },
    /// The file holds no optimiser state, or state the optimiser cannot take.
    Optimizer {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// One way a file's tensor differs from what the model expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The model has this tensor; the file does not.
    Missing {
        /// Its name.
        name: String,
        /// Its dims in the model.
        dims: Vec<usize>,
    },
    /// The file has a tensor the model does not.
    Unexpected {
        /// Its name.
        name: String,
        /// Its dims in the file.
        dims: Vec<usize>,
    },
    /// Both have it, with different dims.
    Shape {
        /// Its name.
        name: String,
        /// The model's dims.
        expected: Vec<usize>,
        /// The file's dims.
        found: Vec<usize>,
    },
    /// Both have it, with different element types.
    Dtype {
        /// Its name.
        name: String,
        /// The model's element type.
        expected: String,
        /// The file's element type.
        found: String,
    },
}

impl Mismatch {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        match self {
            Mismatch::Missing { name, .. }
            | Mismatch::Unexpected { name, .. }
            | Mismatch::Shape { name, .. }
            | Mismatch::Dtype { name, .. } => name,
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Missing { name, dims } => write!(f, "missing `{name}` {dims:?}"),
            Mismatch::Unexpected { name, dims } => write!(f, "unexpected `{name}` {dims:?}"),
            Mismatch::Shape {
                name,
                expected,
                found,
            } => write!(
                f,
                "`{name}`: the model has {expected:?}, the file {found:?}"
            ),
            Mismatch::Dtype {
                name,
                expected,
                found,
            } => write!(f, "`{name}`: the model holds {expected}, the file {found}"),
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io { path, source } => {
                write!(f, "checkpoint {}: {source}", path.display())
            }
            CheckpointError::Format { path, message } => write!(
                f,
                "checkpoint {}: not a valid safetensors file: {message}",
                path.display()
            ),
            CheckpointError::Mismatch { path, mismatches } => {
                write!(
                    f,
                    "checkpoint {} does not fit the model ({} mismatch{}):",
                    path.display(),
                    mismatches.len(),
                    if mismatches.len() == 1 { "" } else { "es" }
                )?;
                for m in mismatches {
                    write!(f, "\n  {m}")?;
                }
                Ok(())
            }
            CheckpointError::Optimizer { path, message } => {
                write!(
                    f,
                    "checkpoint {}: optimiser state: {message}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl CheckpointError {
    pub(super) fn optimizer(path: PathBuf, e: StateError) -> Self {
        CheckpointError::Optimizer {
            path,
            message: e.to_string(),
        }
    }
}
