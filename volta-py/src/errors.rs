//! Rust errors as Python exceptions.
//!
//! The exception classes live in `volta/errors.py`, where Python gives them the
//! double bases users catch by (`ShapeError` is a `ValueError`, `OutOfMemoryError` a
//! `MemoryError`); this file raises them. A panic inside Volta is a bug, but it still
//! reaches Python as a `VoltaError` naming it, never as pyo3's bare `PanicException`.
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use volta::backend::gpu::GpuError;

/// Which exception of `volta.errors` to raise.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Anything else Volta reports (the base class).
    Volta,
    /// Operands whose shapes do not fit the op (a `ValueError`).
    Shape,
    /// A GPU failure other than the two below.
    Gpu,
    /// The GPU ran out of memory (also a `MemoryError`).
    OutOfMemory,
    /// The driver lost the device.
    DeviceLost,
    /// A malformed GGUF or safetensors file (a `ValueError`).
    FileFormat,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Volta => "VoltaError",
            Kind::Shape => "ShapeError",
            Kind::Gpu => "GpuError",
            Kind::OutOfMemory => "OutOfMemoryError",
            Kind::DeviceLost => "DeviceLostError",
            Kind::FileFormat => "FileFormatError",
        }
    }
}

/// The exception `kind` with `message`.
pub fn error(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match class(py, kind) {
        Ok(cls) => PyErr::from_type(cls, message),
        Err(e) => e,
    })
}

/// A `ValueError` naming the op and both shapes.
pub fn shape_error(op: &str, a: &[usize], b: &[usize]) -> PyErr {
    error(
        Kind::Shape,
        format!("{op}: shapes {a:?} and {b:?} do not fit"),
    )
}

/// A `TypeError`.
pub fn type_error(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}

fn class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || py.import("volta.errors").map(Bound::unbind))?;
    Ok(module
        .bind(py)
        .getattr(kind.class_name())?
        .cast_into::<PyType>()?)
}

/// A GPU error as its exception.
pub fn gpu(e: GpuError) -> PyErr {
    let kind = match &e {
        GpuError::OutOfMemory { .. } => Kind::OutOfMemory,
        GpuError::DeviceLost(_) => Kind::DeviceLost,
        _ => Kind::Gpu,
    };
    error(kind, e.to_string())
}

thread_local! {
    /// Set while [`guard`] runs: the panic hook stays quiet for panics it catches.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, turning a panic inside it into a `VoltaError` with the panic's message.
///
/// Input is checked before Volta is called, so a panic here is a bug in Volta (or a
/// GPU failure Volta reports by panicking, as out-of-memory inside a lazy op can);
/// either way Python gets an exception it can catch.
pub fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    let was = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    match result {
        Ok(r) => r,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            // A second backward through a released graph is the caller's
            // mistake, a `RuntimeError` as in PyTorch.
            if message.starts_with(volta::autograd::GRAPH_RELEASED) {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(message));
            }
            let kind = if message.contains("out of memory") {
                Kind::OutOfMemory
            } else if message.contains("device lost") || message.contains("DeviceLost") {
                Kind::DeviceLost
            } else {
                Kind::Volta
            };
            Err(error(kind, message))
        }
    }
}

/// Installs a panic hook that is silent for panics [`guard`] turns into exceptions
/// and prints the others as before.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !GUARDED.with(Cell::get) {
            previous(info);
        }
    }));
}
