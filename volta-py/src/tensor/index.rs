//! `tensor[key]`: ints, slices (any step > 0), `None`, `...`, tuples of those, and a
//! list / numpy array / tensor of integer indices along the first indexed axis.
use super::data::{Data, map};
use super::{Tensor, ops};
use crate::errors::guard;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};

pub fn get(t: &Tensor, key: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter().collect(),
        Err(_) => vec![key.clone()],
    };
    let mut data = t.data();
    let rank = data.dims().len();
    let consuming = items
        .iter()
        .filter(|k| !k.is_none() && !k.is_instance_of::<PyEllipsis>())
        .count();
    if consuming > rank {
        return Err(PyIndexError::new_err(format!(
            "too many indices for a tensor of rank {rank}: {consuming} were given"
        )));
    }
    if items
        .iter()
        .filter(|k| k.is_instance_of::<PyEllipsis>())
        .count()
        > 1
    {
        return Err(PyIndexError::new_err(
            "an index can only have one ellipsis ('...')",
        ));
    }
    // numpy pairs several integer lists element by element; `take` picks along one
    // axis, so a second list would give their outer product instead: refuse it.
    let is_int = |k: &Bound<'_, PyAny>| k.extract::<isize>().is_ok();
    let is_list = |k: &Bound<'_, PyAny>| {
        !(k.is_none()
            || k.is_instance_of::<PyEllipsis>()
            || k.is_instance_of::<PySlice>()
            || is_int(k))
    };
    let lists: Vec<usize> = (0..items.len()).filter(|&i| is_list(&items[i])).collect();
    if lists.len() > 1 {
        return Err(PyTypeError::new_err(
            "an index can hold only one integer list/array/tensor (numpy would pair several \
             element by element); index one axis at a time",
        ));
    }
    // numpy's rule for an integer list with ints: when a slice, None or ... stands
    // between them, the list's axes go first in the result (else where the list is).
    let advanced: Vec<usize> = (0..items.len())
        .filter(|&i| is_list(&items[i]) || is_int(&items[i]))
        .collect();
    let list_first = !lists.is_empty() && advanced.windows(2).any(|w| w[1] != w[0] + 1);
    // Walk the key: `axis` is the current axis of `data`; ints remove it, None adds one.
    let mut axis = 0usize;
    let mut list_at = None;
    for k in &items {
        let dims = data.dims().to_vec();
        if k.is_none() {
            let mut d = dims.clone();
            d.insert(axis, 1);
            data = guard(|| Ok(map!(&data, x => x.reshape(&d))))?;
            axis += 1;
        } else if k.is_instance_of::<PyEllipsis>() {
            axis += rank - consuming;
        } else if let Ok(s) = k.cast::<PySlice>() {
            let n = dims[axis];
            let idx = s.indices(n as isize)?;
            if idx.step <= 0 {
                return Err(PyValueError::new_err(
                    "slices with a step ≤ 0 are not supported (use .flip)",
                ));
            }
            let (start, len, step) = (idx.start as usize, idx.slicelength, idx.step as usize);
            data = guard(|| {
                Ok(map!(&data, x => {
                    let span = if len == 0 { 0 } else { (len - 1) * step + 1 };
                    let v = x.narrow(axis, start.min(n), span);
                    if step > 1 && len > 0 { v.step(axis, step) } else { v }
                }))
            })?;
            axis += 1;
        } else if let Ok(i) = k.extract::<isize>() {
            if k.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyTypeError::new_err("boolean indices are not supported"));
            }
            let n = dims[axis] as isize;
            let j = if i < 0 { i + n } else { i };
            if j < 0 || j >= n {
                return Err(PyIndexError::new_err(format!(
                    "index {i} is out of range for dim {axis} of size {n}"
                )));
            }
            let mut d = dims.clone();
            d.remove(axis);
            data = guard(|| Ok(map!(&data, x => x.narrow(axis, j as usize, 1).reshape(&d))))?;
        } else {
            let key_rank;
            (data, key_rank) = take(&data, axis, k)?;
            list_at = Some((axis, key_rank));
            // Past every axis the key's dims put there (a 2-D list adds two).
            axis += key_rank;
        }
    }
    if let (true, Some((at, k))) = (list_first, list_at) {
        let rank = data.dims().len();
        let perm: Vec<usize> = (at..at + k).chain(0..at).chain(at + k..rank).collect();
        data = guard(|| Ok(map!(&data, x => x.permute(&perm))))?;
    }
    Ok(Tensor::result(data))
}

/// Rows `ids` along `axis` (an embedding lookup generalised): ids from a list, a
/// numpy array or a tensor of integers. Also returns the key's rank (the number of
/// axes that replace `axis`).
fn take(data: &Data, axis: usize, key: &Bound<'_, PyAny>) -> PyResult<(Data, usize)> {
    let np = key.py().import("numpy")?;
    let key = match key.cast::<Tensor>() {
        Ok(t) => np.call_method1("asarray", (super::numpy_io::to_numpy(t, key.py())?,))?,
        Err(_) => np.call_method1("asarray", (key,))?,
    };
    let kind: String = key.getattr("dtype")?.getattr("kind")?.extract()?;
    let values: Vec<f64> = np
        .call_method1("asarray", (key.clone(), "float64"))?
        .call_method0("ravel")?
        .call_method0("tolist")?
        .extract()
        .map_err(|_| PyTypeError::new_err("unsupported index"))?;
    if !(kind == "i" || kind == "u" || (kind == "f" && values.iter().all(|v| v.fract() == 0.0))) {
        return Err(PyTypeError::new_err(
            "indices must be ints, slices, None, ..., or integer lists/arrays/tensors",
        ));
    }
    let key_dims: Vec<usize> = key.getattr("shape")?.extract()?;
    let dims = data.dims().to_vec();
    let n = dims[axis] as f64;
    let ids = values
        .iter()
        .map(|&v| {
            let j = if v < 0.0 { v + n } else { v };
            if j < 0.0 || j >= n {
                Err(PyIndexError::new_err(format!(
                    "index {v} is out of range for dim {axis} of size {n}"
                )))
            } else {
                Ok(j as u32)
            }
        })
        .collect::<PyResult<Vec<u32>>>()?;
    let count = ids.len();
    let key_rank = key_dims.len();
    guard(|| {
        Ok(map!(data, x => {
            // Bring `axis` to the front, pick rows, put the picked axes back.
            let mut perm: Vec<usize> = (0..dims.len()).collect();
            perm.remove(axis);
            perm.insert(0, axis);
            let front = x.permute(&perm);
            let rows = front.index_select(&ops::indices(x, ids.clone(), &[count]));
            let mut picked: Vec<usize> = key_dims.clone();
            picked.extend(perm[1..].iter().map(|&a| dims[a]));
            let rows = rows.reshape(&picked);
            // Axes: key dims first, then the others in order; move key dims to `axis`.
            let k = key_dims.len();
            let rest = dims.len() - 1;
            let mut back: Vec<usize> = (k..k + axis).collect();
            back.extend(0..k);
            back.extend(k + axis..k + rest);
            rows.permute(&back)
        }))
    })
    .map(|d| (d, key_rank))
}
