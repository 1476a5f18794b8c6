//! `volta.Device`: where tensors live and compute, the CPU or the GPU (wgpu).
use crate::errors;
use pyo3::prelude::*;
use volta::Gpu;

/// The two devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Where {
    /// The CPU backend (gemm + rayon).
    Cpu,
    /// The GPU through wgpu (Vulkan, Metal, DX12).
    Gpu,
}

/// Where tensors live and compute: `Device.cpu()` or `Device.gpu()`.
///
/// Everywhere a device is asked for, the strings `"cpu"` and `"gpu"` work too.
#[pyclass(module = "volta._volta", name = "Device", frozen, eq, hash)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    pub place: Where,
}

#[pymethods]
impl Device {
    /// The CPU.
    #[staticmethod]
    fn cpu() -> Self {
        Device { place: Where::Cpu }
    }

    /// The GPU, opened on first use; raises `GpuError` when no adapter is found.
    #[staticmethod]
    fn gpu() -> PyResult<Self> {
        open_gpu()?;
        Ok(Device { place: Where::Gpu })
    }

    /// Whether a GPU adapter (a driver, or software Vulkan) can be opened.
    #[staticmethod]
    fn is_gpu_available() -> bool {
        Gpu::init().is_ok()
    }

    /// `"cpu"` or `"gpu"`.
    #[getter]
    fn r#type(&self) -> &'static str {
        match self.place {
            Where::Cpu => "cpu",
            Where::Gpu => "gpu",
        }
    }

    /// The GPU adapter's description (name, backend, features); `None` on the CPU.
    #[getter]
    fn adapter(&self) -> Option<String> {
        match self.place {
            Where::Cpu => None,
            Where::Gpu => Gpu::info().map(|i| format!("{i:?}")),
        }
    }

    fn __repr__(&self) -> String {
        format!("device(type='{}')", self.r#type())
    }

    fn __str__(&self) -> &'static str {
        self.r#type()
    }
}

/// Opens the GPU (once per process), as a `GpuError` when it cannot.
pub fn open_gpu() -> PyResult<()> {
    Python::attach(|py| py.detach(Gpu::init))
        .map(drop)
        .map_err(errors::gpu)
}

/// A `device=` argument: a `Device`, `"cpu"`/`"gpu"` (also `"cuda"`, as PyTorch code
/// says it), or `None` for the CPU.
pub fn parse(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Where> {
    let Some(obj) = obj else {
        return Ok(Where::Cpu);
    };
    if obj.is_none() {
        return Ok(Where::Cpu);
    }
    if let Ok(d) = obj.cast::<Device>() {
        return Ok(d.get().place);
    }
    let Ok(s) = obj.extract::<String>() else {
        return Err(errors::type_error(format!(
            "device must be a volta.Device or 'cpu'/'gpu', not {}",
            obj.get_type().name()?
        )));
    };
    match s.as_str() {
        "cpu" => Ok(Where::Cpu),
        "gpu" | "cuda" | "wgpu" => {
            open_gpu()?;
            Ok(Where::Gpu)
        }
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown device '{other}': use 'cpu' or 'gpu'"
        ))),
    }
}
