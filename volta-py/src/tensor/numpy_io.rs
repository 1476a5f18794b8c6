//! Tensors out to numpy. A CPU tensor's memory is an immutable, shared buffer, so
//! numpy gets a read-only view of it (no copy; strides and broadcast axes carried
//! over) that keeps the buffer alive; a GPU tensor is read back into a new array.
use super::Tensor;
use super::data::Data;
use crate::errors;
use numpy::ndarray::{ArrayViewD, IxDyn, ShapeBuilder};
use numpy::{Element, PyArray, PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use volta::{Cpu, RawTensor};

/// What keeps a CPU buffer alive while numpy views it.
#[pyclass(module = "volta._volta", frozen)]
pub struct Buffer {
    _data: Data,
}

/// The values of `slf` as a numpy array (see the module docs).
pub fn to_numpy<'py>(slf: &Bound<'py, Tensor>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    let d = slf.get().data();
    let dims = d.dims().to_vec();
    let array = match &d {
        Data::CpuF32(t) => view(py, t, &d)?,
        Data::CpuF64(t) => view(py, t, &d)?,
        Data::CpuF16(t) => view(py, t, &d)?,
        Data::GpuF32(t) => {
            let v = py.detach(|| t.try_to_vec()).map_err(errors::gpu)?;
            PyArray1::from_vec(py, v).reshape(dims)?.into_any()
        }
        Data::GpuF16(t) => {
            let v = py.detach(|| t.try_to_vec()).map_err(errors::gpu)?;
            PyArray1::from_vec(py, v).reshape(dims)?.into_any()
        }
    };
    Ok(array)
}

fn view<'py, E: volta::dtype::Element + Element>(
    py: Python<'py>,
    t: &RawTensor<Cpu, E>,
    data: &Data,
) -> PyResult<Bound<'py, PyAny>> {
    let layout = t.layout();
    let buf = t.buffer();
    let numel: usize = layout.dims.iter().product();
    if numel == 0 {
        return Ok(PyArray1::<E>::from_vec(py, Vec::new())
            .reshape(layout.dims.to_vec())?
            .into_any());
    }
    let shape = IxDyn(&layout.dims).strides(IxDyn(&layout.strides));
    // SAFETY: the layout addresses elements inside `buf` (Volta's invariant for every
    // view), and `Buffer` below holds the `Arc` of `buf` for as long as numpy holds
    // the array; the array is made read-only because the buffer is shared.
    let array = unsafe {
        let v = ArrayViewD::from_shape_ptr(shape, buf.as_ptr().add(layout.offset));
        let owner = Bound::new(
            py,
            Buffer {
                _data: data.clone(),
            },
        )?;
        PyArray::borrow_from_array(&v, owner.into_any())
    };
    let kwargs = PyDict::new(py);
    kwargs.set_item("write", false)?;
    array.call_method("setflags", (), Some(&kwargs))?;
    Ok(array.into_any())
}
