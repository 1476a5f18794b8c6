//! A tensor's storage as one value whatever its device and element type: the enum
//! every Python-facing op dispatches over, so that each op is written once, as a
//! generic function of the `volta` crate's `RawTensor<D, E>`.
use crate::device::Where;
use crate::errors;
use pyo3::PyResult;
use volta::dtype::f16;
use volta::{Cpu, Gpu, RawTensor};

/// A float element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE half (GPU, where the adapter has `shader-f16`).
    F16,
    /// The default.
    F32,
    /// Double (CPU).
    F64,
}

impl DType {
    /// numpy's name for it.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parses `"float32"`, `"f32"`, `"float"`, `"half"`, `"double"`, ….
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "float16" | "f16" | "half" | "torch.float16" => Some(DType::F16),
            "float32" | "f32" | "float" | "torch.float32" => Some(DType::F32),
            "float64" | "f64" | "double" | "torch.float64" => Some(DType::F64),
            _ => None,
        }
    }
}

/// One tensor's storage: the device and element type, as variants.
#[derive(Clone, Debug)]
pub enum Data {
    /// f32 on the CPU.
    CpuF32(RawTensor<Cpu, f32>),
    /// f64 on the CPU.
    CpuF64(RawTensor<Cpu, f64>),
    /// f16 on the CPU.
    CpuF16(RawTensor<Cpu, f16>),
    /// f32 on the GPU.
    GpuF32(RawTensor<Gpu, f32>),
    /// f16 on the GPU.
    GpuF16(RawTensor<Gpu, f16>),
}

/// `$body` with `$t` bound to the `RawTensor` inside `$data`, whatever its variant.
macro_rules! with {
    ($data:expr, $t:ident => $body:expr) => {
        match $data {
            $crate::tensor::data::Data::CpuF32($t) => $body,
            $crate::tensor::data::Data::CpuF64($t) => $body,
            $crate::tensor::data::Data::CpuF16($t) => $body,
            $crate::tensor::data::Data::GpuF32($t) => $body,
            $crate::tensor::data::Data::GpuF16($t) => $body,
        }
    };
}

/// `$body` (a `RawTensor` of the same device and type) wrapped back in the variant.
macro_rules! map {
    ($data:expr, $t:ident => $body:expr) => {
        match $data {
            $crate::tensor::data::Data::CpuF32($t) => $crate::tensor::data::Data::CpuF32($body),
            $crate::tensor::data::Data::CpuF64($t) => $crate::tensor::data::Data::CpuF64($body),
            $crate::tensor::data::Data::CpuF16($t) => $crate::tensor::data::Data::CpuF16($body),
            $crate::tensor::data::Data::GpuF32($t) => $crate::tensor::data::Data::GpuF32($body),
            $crate::tensor::data::Data::GpuF16($t) => $crate::tensor::data::Data::GpuF16($body),
        }
    };
}

/// `$body` over the `RawTensor`s of several `Data` of one variant, wrapped back;
/// a `TypeError`/`ValueError` naming `$op` when their devices or types differ.
macro_rules! zip {
    ($op:expr, ($($d:expr),+), |$($t:ident),+| $body:expr) => {{
        use $crate::tensor::data::Data as V;
        match ($($d,)+) {
            ($(V::CpuF32($t),)+) => Ok(V::CpuF32($body)),
            ($(V::CpuF64($t),)+) => Ok(V::CpuF64($body)),
            ($(V::CpuF16($t),)+) => Ok(V::CpuF16($body)),
            ($(V::GpuF32($t),)+) => Ok(V::GpuF32($body)),
            ($(V::GpuF16($t),)+) => Ok(V::GpuF16($body)),
            #[allow(unreachable_patterns)]
            _ => Err($crate::tensor::data::mismatch($op, &[$($d),+])),
        }
    }};
}

pub(crate) use {map, zip};

/// The error for operands on different devices (ValueError) or of different
/// element types (TypeError).
pub fn mismatch(op: &str, data: &[&Data]) -> pyo3::PyErr {
    let first = data[0];
    if let Some(other) = data.iter().find(|d| d.place() != first.place()) {
        return pyo3::exceptions::PyValueError::new_err(format!(
            "{op}: operands on different devices ({} and {}); move one with .to(\"{}\")",
            first.place_name(),
            other.place_name(),
            first.place_name()
        ));
    }
    let other = data
        .iter()
        .find(|d| d.dtype() != first.dtype())
        .unwrap_or(&first);
    errors::type_error(format!(
        "{op}: operands of different dtypes ({} and {}); convert one with .to({:?})",
        first.dtype().name(),
        other.dtype().name(),
        first.dtype().name()
    ))
}

impl Data {
    /// The dims.
    pub fn dims(&self) -> &[usize] {
        with!(self, t => t.dims())
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Data::CpuF32(_) | Data::GpuF32(_) => DType::F32,
            Data::CpuF64(_) => DType::F64,
            Data::CpuF16(_) | Data::GpuF16(_) => DType::F16,
        }
    }

    /// The device.
    pub fn place(&self) -> Where {
        match self {
            Data::CpuF32(_) | Data::CpuF64(_) | Data::CpuF16(_) => Where::Cpu,
            Data::GpuF32(_) | Data::GpuF16(_) => Where::Gpu,
        }
    }

    fn place_name(&self) -> &'static str {
        match self.place() {
            Where::Cpu => "cpu",
            Where::Gpu => "gpu",
        }
    }

    /// The id autograd knows this tensor by.
    pub fn id(&self) -> volta::TensorId {
        with!(self, t => t.id())
    }

    /// Whether autograd records ops on it.
    pub fn is_tracked(&self) -> bool {
        with!(self, t => t.is_tracked())
    }

    /// The values as f64 in row-major order (reads the GPU back).
    pub fn to_f64(&self) -> PyResult<Vec<f64>> {
        Ok(match self {
            Data::CpuF32(t) => t.to_vec().into_iter().map(f64::from).collect(),
            Data::CpuF64(t) => t.to_vec(),
            Data::CpuF16(t) => t.to_vec().into_iter().map(f64::from).collect(),
            Data::GpuF32(t) => t
                .try_to_vec()
                .map_err(errors::gpu)?
                .into_iter()
                .map(f64::from)
                .collect(),
            Data::GpuF16(t) => t
                .try_to_vec()
                .map_err(errors::gpu)?
                .into_iter()
                .map(f64::from)
                .collect(),
        })
    }

    /// A new tensor with `values` (row-major) and `dims`, on `place` as `dtype`.
    pub fn from_f64(values: &[f64], dims: &[usize], place: Where, dtype: DType) -> PyResult<Data> {
        Ok(match (place, dtype) {
            (Where::Cpu, DType::F32) => Data::CpuF32(RawTensor::from_vec(
                values.iter().map(|&v| v as f32).collect(),
                dims,
            )),
            (Where::Cpu, DType::F64) => Data::CpuF64(RawTensor::from_vec(values.to_vec(), dims)),
            (Where::Cpu, DType::F16) => Data::CpuF16(RawTensor::from_vec(
                values.iter().map(|&v| f16::from_f64(v)).collect(),
                dims,
            )),
            (Where::Gpu, DType::F32) => Data::GpuF32(RawTensor::from_vec(
                values.iter().map(|&v| v as f32).collect(),
                dims,
            )),
            (Where::Gpu, DType::F16) => {
                check_gpu_f16()?;
                Data::GpuF16(RawTensor::from_vec(
                    values.iter().map(|&v| f16::from_f64(v)).collect(),
                    dims,
                ))
            }
            (Where::Gpu, DType::F64) => {
                return Err(errors::type_error(
                    "float64 tensors live on the CPU only (WGSL has no f64); use float32 on the GPU",
                ));
            }
        })
    }

    /// This tensor on `place` as `dtype` (a new untracked leaf; `self` when both
    /// already match).
    pub fn convert(&self, place: Where, dtype: DType) -> PyResult<Data> {
        if self.place() == place && self.dtype() == dtype {
            return Ok(self.clone());
        }
        if place == Where::Gpu {
            crate::device::open_gpu()?;
        }
        // Same-device casts stay on the device; the rest go through the host.
        Ok(match (self, place, dtype) {
            (Data::GpuF32(t), Where::Gpu, DType::F16) => {
                check_gpu_f16()?;
                Data::GpuF16(cast(t))
            }
            (Data::GpuF16(t), Where::Gpu, DType::F32) => Data::GpuF32(cast(t)),
            (Data::CpuF32(t), Where::Cpu, DType::F64) => Data::CpuF64(cast(t)),
            (Data::CpuF64(t), Where::Cpu, DType::F32) => Data::CpuF32(cast(t)),
            _ => Data::from_f64(&self.to_f64()?, self.dims(), place, dtype)?,
        })
    }
}

fn cast<D, A, B>(t: &RawTensor<D, A>) -> RawTensor<D, B>
where
    D: volta::Cast<A, B>,
    A: volta::dtype::Float,
    B: volta::dtype::Float,
{
    let (buf, layout) = t.view();
    RawTensor::leaf(
        D::cast((buf, layout)),
        volta::backend::Layout::contiguous(t.dims()),
    )
}

/// A `TypeError` unless the GPU computes in f16.
fn check_gpu_f16() -> PyResult<()> {
    match Gpu::info() {
        Some(info) if info.f16 => Ok(()),
        _ => Err(errors::type_error(
            "this GPU adapter has no shader-f16: float16 tensors cannot live on it; use float32",
        )),
    }
}
