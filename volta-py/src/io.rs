//! `volta.save_file` / `volta.load_file`: tensors in safetensors files, the format
//! the Rust side's checkpoints and PyTorch's `safetensors.torch` use, so a file
//! written by any of them loads in the others.
use crate::device;
use crate::errors::{self, Kind};
use crate::tensor::Tensor;
use crate::tensor::data::{DType, Data};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use safetensors::tensor::{Dtype, TensorView};
use safetensors::{SafeTensorError, SafeTensors};
use std::collections::BTreeMap;
use std::path::PathBuf;
use volta::dtype::f16;

/// Writes `tensors` (name → Tensor) and optional string `metadata` to `path`.
/// GPU tensors are read back first. Names and metadata keys are written in sorted
/// order, so the same tensors and metadata give the same bytes.
#[pyfunction]
#[pyo3(signature = (tensors, path, metadata=None))]
pub fn save_file(
    py: Python<'_>,
    tensors: &Bound<'_, PyDict>,
    path: PathBuf,
    metadata: Option<BTreeMap<String, String>>,
) -> PyResult<()> {
    let mut items: BTreeMap<String, (Dtype, Vec<usize>, Vec<u8>)> = BTreeMap::new();
    for (k, v) in tensors.iter() {
        let name: String = k
            .extract()
            .map_err(|_| errors::type_error("save_file: tensor names must be str"))?;
        let t = v.cast::<Tensor>().map_err(|_| {
            errors::type_error(format!("save_file: {name:?} is not a volta.Tensor"))
        })?;
        let d = t.get().data();
        let dims = d.dims().to_vec();
        let (dtype, bytes) = py.detach(|| -> PyResult<_> {
            Ok(match &d {
                Data::CpuF32(x) => (
                    Dtype::F32,
                    x.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
                Data::CpuF64(x) => (
                    Dtype::F64,
                    x.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
                Data::CpuF16(x) => (
                    Dtype::F16,
                    x.to_vec().iter().flat_map(|v| v.to_le_bytes()).collect(),
                ),
                Data::GpuF32(x) => (
                    Dtype::F32,
                    x.try_to_vec()
                        .map_err(errors::gpu)?
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                ),
                Data::GpuF16(x) => (
                    Dtype::F16,
                    x.try_to_vec()
                        .map_err(errors::gpu)?
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect(),
                ),
            })
        })?;
        items.insert(name, (dtype, dims, bytes));
    }
    let views = items
        .iter()
        .map(|(n, (dt, dims, bytes))| {
            TensorView::new(*dt, dims.clone(), bytes)
                .map(|v| (n.clone(), v))
                .map_err(|e| errors::error(Kind::Volta, format!("save_file: {n}: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let meta = metadata.map(|m| m.into_iter().collect());
    let bytes = py
        .detach(|| safetensors::serialize(views, meta))
        .map_err(|e| errors::error(Kind::Volta, format!("save_file: {}: {e}", path.display())))?;
    py.detach(|| std::fs::write(&path, sorted_metadata(bytes)))
        .map_err(|io| {
            os_error(
                &io,
                format!("save_file: cannot write {}: {io}", path.display()),
            )
        })
}

/// An `OSError` of the subclass Python picks for the errno (`FileNotFoundError`,
/// `PermissionError`, `IsADirectoryError`, …), as `open()` raises.
fn os_error(e: &std::io::Error, message: String) -> PyErr {
    match e.raw_os_error() {
        Some(errno) => pyo3::exceptions::PyOSError::new_err((errno, message)),
        None => pyo3::exceptions::PyOSError::new_err(message),
    }
}

/// A serialized file with its `__metadata__` entries in sorted key order, so that
/// the same tensors and metadata give the same bytes: the safetensors crate writes
/// them from a `HashMap`, whose order changes from call to call. The same JSON in
/// another order has the same length, so the header length and offsets stay valid.
fn sorted_metadata(mut bytes: Vec<u8>) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let Ok(serde_json::Value::Object(mut header)) = serde_json::from_slice(&bytes[8..8 + n]) else {
        return bytes;
    };
    if let Some(serde_json::Value::Object(meta)) = header.get_mut("__metadata__") {
        let sorted: BTreeMap<String, serde_json::Value> =
            std::mem::take(meta).into_iter().collect();
        meta.extend(sorted);
    }
    let mut json = serde_json::to_vec(&header).expect("a JSON value serializes");
    if json.len() <= n {
        json.resize(n, b' '); // the crate's padding to 8 bytes
        bytes[8..8 + n].copy_from_slice(&json);
    }
    bytes
}

/// Reads every tensor of the safetensors file at `path` onto `device` (float32
/// unless the file holds float16/float64; integer tensors become float32, bf16
/// float32). A malformed file raises `FileFormatError` naming the file and the
/// byte offset where it goes wrong.
#[pyfunction]
#[pyo3(signature = (path, device=None))]
pub fn load_file<'py>(
    py: Python<'py>,
    path: PathBuf,
    device: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let place = device::parse(device)?;
    let bytes = std::fs::read(&path).map_err(|e| {
        os_error(
            &e,
            format!("load_file: cannot read {}: {e}", path.display()),
        )
    })?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| format_error(&path, &bytes, e))?;
    let out = PyDict::new(py);
    let mut names = file.names();
    names.sort();
    for name in names {
        let view = file
            .tensor(name)
            .map_err(|e| format_error(&path, &bytes, e))?;
        let data = view.data();
        let at = data.as_ptr() as usize - bytes.as_ptr() as usize;
        let bad = |what: &str| {
            errors::error(
                Kind::FileFormat,
                format!("{}: tensor {name:?} at offset {at}: {what}", path.display()),
            )
        };
        let values: Vec<f64> = match view.dtype() {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            Dtype::F64 => data
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect(),
            Dtype::I64 => data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            Dtype::I32 => data
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            Dtype::U8 => data.iter().map(|&b| b as f64).collect(),
            Dtype::BOOL => data.iter().map(|&b| (b != 0) as u8 as f64).collect(),
            other => return Err(bad(&format!("dtype {other:?} is not supported"))),
        };
        let dtype = match view.dtype() {
            Dtype::F64 if place == device::Where::Cpu => DType::F64,
            Dtype::F16 => DType::F16,
            _ => DType::F32,
        };
        let t = Data::from_f64(&values, view.shape(), place, dtype)?;
        out.set_item(name, Tensor::leaf(t, false))?;
    }
    Ok(out)
}

/// The string metadata of a safetensors file (`{}` when it has none).
#[pyfunction]
pub fn load_metadata(path: PathBuf) -> PyResult<BTreeMap<String, String>> {
    let bytes = std::fs::read(&path).map_err(|e| {
        os_error(
            &e,
            format!("load_metadata: cannot read {}: {e}", path.display()),
        )
    })?;
    let (_, meta) =
        SafeTensors::read_metadata(&bytes).map_err(|e| format_error(&path, &bytes, e))?;
    Ok(meta
        .metadata()
        .clone()
        .map(|m| m.into_iter().collect())
        .unwrap_or_default())
}

/// A `FileFormatError` naming the file and where it goes wrong: the length prefix
/// (offset 0), the JSON header (offset 8), or the data section after it.
fn format_error(path: &std::path::Path, bytes: &[u8], e: SafeTensorError) -> PyErr {
    let data_start = bytes
        .get(..8)
        .map(|b| 8 + u64::from_le_bytes(b.try_into().unwrap()))
        .unwrap_or(0);
    let offset = match &e {
        SafeTensorError::HeaderTooSmall
        | SafeTensorError::HeaderTooLarge
        | SafeTensorError::InvalidHeaderLength => 0,
        SafeTensorError::InvalidHeader(_)
        | SafeTensorError::InvalidHeaderDeserialization(_)
        | SafeTensorError::MetadataIncompleteBuffer => 8,
        _ => data_start,
    };
    errors::error(
        Kind::FileFormat,
        format!(
            "{}: not a valid safetensors file ({} bytes): at offset {offset}: {e}",
            path.display(),
            bytes.len()
        ),
    )
}
