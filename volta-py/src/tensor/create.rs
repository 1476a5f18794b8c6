//! Making tensors: from Python data and numpy arrays, filled, random, ranges, and
//! joined (`cat`, `stack`, `where`).
use super::data::{DType, Data, map, zip};
use super::{Tensor, ops, shape};
use crate::device::{self, Where};
use crate::errors::{self, guard};
use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::{LazyLock, Mutex};
use volta::dtype::f16;
use volta::{Cpu, Gpu, RawTensor, Rng};

/// The generator behind `randn`/`rand`/`randint`/layer initialisation, seeded by
/// `manual_seed`.
static RNG: LazyLock<Mutex<Rng>> = LazyLock::new(|| Mutex::new(Rng::seed(0)));

/// Runs `f` with the global generator.
pub fn with_rng<T>(f: impl FnOnce(&mut Rng) -> T) -> T {
    f(&mut RNG.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Seeds the generator behind volta's random tensors and layer initialisation.
#[pyfunction]
pub fn manual_seed(seed: u64) {
    with_rng(|r| *r = Rng::seed(seed));
}

/// A `dtype=` argument: `"float32"`, `numpy.float32`, `numpy.dtype("f4")`, … or
/// `None` when `obj` names no float type this package has.
pub fn dtype_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<DType>> {
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(s) = obj.extract::<String>() {
        return Ok(DType::parse(&s));
    }
    let np = obj.py().import("numpy")?;
    match np.call_method1("dtype", (obj,)) {
        Ok(dt) => Ok(DType::parse(&dt.str()?.to_string())),
        Err(_) => Ok(None),
    }
}

fn dtype_arg(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<DType>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => dtype_of(o)?.map(Some).ok_or_else(|| {
            PyTypeError::new_err(format!(
                "unsupported dtype {}: Volta's tensors are float16, float32 or float64",
                o.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        }),
    }
}

/// The dtype a new tensor gets: the one asked for, else float32 (float64 numpy
/// arrays stay float64 on the CPU, as `torch.from_numpy`).
fn resolve(asked: Option<DType>, found: Option<DType>, place: Where) -> PyResult<DType> {
    match (asked, found) {
        (Some(DType::F64), _) if place == Where::Gpu => Err(errors::type_error(
            "float64 tensors live on the CPU only (WGSL has no f64); use float32 on the GPU",
        )),
        (Some(t), _) => Ok(t),
        (None, Some(DType::F64)) if place == Where::Gpu => Ok(DType::F32),
        (None, Some(t)) => Ok(t),
        (None, None) => Ok(DType::F32),
    }
}

/// Storage from any Python data: a `Tensor`, a numpy array, nested lists, a number.
pub fn data_from_object(
    obj: &Bound<'_, PyAny>,
    dtype: Option<DType>,
    place: Where,
) -> PyResult<Data> {
    if let Ok(t) = obj.cast::<Tensor>() {
        let d = t.get().data();
        let ty = resolve(dtype, Some(d.dtype()), place)?;
        return d.convert(place, ty);
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let is_array = obj.is_instance(&np.getattr("ndarray")?)?;
    let arr = np.call_method1("asarray", (obj,))?;
    let kind: String = arr.getattr("dtype")?.getattr("kind")?.extract()?;
    if !matches!(kind.as_str(), "f" | "i" | "u" | "b") {
        return Err(PyTypeError::new_err(format!(
            "cannot make a tensor of numpy dtype {}: expected numbers",
            arr.getattr("dtype")?
        )));
    }
    let found = if is_array {
        dtype_of(&arr.getattr("dtype")?)?
    } else {
        None
    };
    let ty = resolve(dtype, found, place)?;
    let target = np.getattr(ty.name())?;
    // `asarray(order="C")` rather than `ascontiguousarray`, which makes a 0-d array
    // 1-d: `tensor(3.0)` has shape (), as in numpy and PyTorch.
    let kwargs = PyDict::new(py);
    kwargs.set_item("dtype", target)?;
    kwargs.set_item("order", "C")?;
    let arr = np.call_method("asarray", (arr,), Some(&kwargs))?;
    Ok(match ty {
        DType::F32 => {
            let a = arr.cast_into::<PyArrayDyn<f32>>()?;
            let (v, dims) = (a.readonly().as_slice()?.to_vec(), a.shape().to_vec());
            match place {
                Where::Cpu => Data::CpuF32(RawTensor::<Cpu, f32>::from_vec(v, &dims)),
                Where::Gpu => {
                    Data::GpuF32(guard(|| Ok(RawTensor::<Gpu, f32>::from_vec(v, &dims)))?)
                }
            }
        }
        DType::F64 => {
            let a = arr.cast_into::<PyArrayDyn<f64>>()?;
            Data::CpuF64(RawTensor::from_vec(
                a.readonly().as_slice()?.to_vec(),
                a.shape(),
            ))
        }
        DType::F16 => {
            let a = arr.cast_into::<PyArrayDyn<f16>>()?;
            let (v, dims) = (a.readonly().as_slice()?.to_vec(), a.shape().to_vec());
            match place {
                Where::Cpu => Data::CpuF16(RawTensor::from_vec(v, &dims)),
                Where::Gpu => Data::from_f64(
                    &v.iter().map(|x| f64::from(*x)).collect::<Vec<_>>(),
                    &dims,
                    place,
                    ty,
                )?,
            }
        }
    })
}

/// `volta.tensor(data, dtype=None, device=None, requires_grad=False)`.
pub fn tensor(
    data: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let place = device::parse(device)?;
    let d = data_from_object(data, dtype_arg(dtype)?, place)?;
    Ok(Tensor::leaf(d, requires_grad))
}

/// A tensor from Python data: nested lists, a number, or a numpy array (float32,
/// float16 and float64 arrays keep their dtype; others become float32).
#[pyfunction(name = "tensor")]
#[pyo3(signature = (data, *, dtype=None, device=None, requires_grad=false))]
pub fn tensor_fn(
    data: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    tensor(data, dtype, device, requires_grad)
}

/// A tensor from a numpy array, keeping its dtype (as `torch.from_numpy`).
#[pyfunction]
#[pyo3(signature = (array, *, device=None))]
pub fn from_numpy(array: &Bound<'_, PyAny>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Tensor> {
    let np = array.py().import("numpy")?;
    if !array.is_instance(&np.getattr("ndarray")?)? {
        return Err(PyTypeError::new_err("from_numpy expects a numpy.ndarray"));
    }
    tensor(array, None, device, false)
}

/// Dims from `*size` or one tuple.
fn size_args(args: &Bound<'_, PyTuple>) -> PyResult<Vec<usize>> {
    let ints = super::int_args(args)?;
    ints.iter()
        .map(|&d| {
            usize::try_from(d)
                .map_err(|_| PyValueError::new_err(format!("sizes must be ≥ 0, got {ints:?}")))
        })
        .collect::<PyResult<Vec<_>>>()
        .and_then(|dims| {
            dims.iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .filter(|&n| n <= isize::MAX as usize / 8)
                .map(|_| dims.clone())
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "a tensor of shape {dims:?} has too many elements"
                    ))
                })
        })
}

/// `n` values `f(0), f(1), …` in a buffer allocated fallibly: a tensor larger than
/// the host can hold raises `MemoryError` (as numpy does) instead of aborting the
/// process, which is what a failed allocation in Rust does.
/// A new leaf of `values` with `dims`, on the `device=` argument's device as the
/// `dtype=` argument's type (float32 by default): the end of every constructor.
fn new_leaf(
    values: &[f64],
    dims: &[usize],
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let place = device::parse(device)?;
    let ty = resolve(dtype_arg(dtype)?, None, place)?;
    Ok(Tensor::leaf(
        guard(|| Data::from_f64(values, dims, place, ty))?,
        requires_grad,
    ))
}

fn values(op: &str, n: usize, f: impl FnMut(usize) -> f64) -> PyResult<Vec<f64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        pyo3::exceptions::PyMemoryError::new_err(format!(
            "{op}: cannot allocate {n} elements on the host"
        ))
    })?;
    v.extend((0..n).map(f));
    Ok(v)
}

/// A count argument (`steps`, `n`) that must be ≥ 0: a `ValueError` otherwise, as
/// `zeros(-1)` gives (pyo3 alone would raise `OverflowError`).
fn count(op: &str, name: &str, n: isize) -> PyResult<usize> {
    usize::try_from(n)
        .map_err(|_| PyValueError::new_err(format!("{op}: {name} must be ≥ 0, got {n}")))
}

fn filled(
    dims: &[usize],
    value: f64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let n: usize = dims.iter().product();
    let v = values("full", n, |_| value)?;
    new_leaf(&v, dims, dtype, device, requires_grad)
}

/// Zeros of the given dims: `zeros(2, 3)` or `zeros((2, 3))`.
#[pyfunction]
#[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
pub fn zeros(
    size: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    filled(&size_args(size)?, 0.0, dtype, device, requires_grad)
}

/// Ones of the given dims.
#[pyfunction]
#[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
pub fn ones(
    size: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    filled(&size_args(size)?, 1.0, dtype, device, requires_grad)
}

/// `fill_value` everywhere, with dims `size` (a tuple).
#[pyfunction]
#[pyo3(signature = (size, fill_value, *, dtype=None, device=None, requires_grad=false))]
pub fn full(
    size: &Bound<'_, PyAny>,
    fill_value: f64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let size = PyTuple::new(size.py(), [size])?;
    filled(&size_args(&size)?, fill_value, dtype, device, requires_grad)
}

fn random(
    dims: &[usize],
    draw: impl Fn(&mut Rng) -> f64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let n: usize = dims.iter().product();
    let values = with_rng(|r| values("random", n, |_| draw(r)))?;
    new_leaf(&values, dims, dtype, device, requires_grad)
}

/// Standard normal samples (seed with `manual_seed`).
#[pyfunction]
#[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
pub fn randn(
    size: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    random(&size_args(size)?, Rng::normal, dtype, device, requires_grad)
}

/// Uniform samples in [0, 1) (seed with `manual_seed`).
#[pyfunction]
#[pyo3(signature = (*size, dtype=None, device=None, requires_grad=false))]
pub fn rand(
    size: &Bound<'_, PyTuple>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    random(
        &size_args(size)?,
        Rng::uniform,
        dtype,
        device,
        requires_grad,
    )
}

/// Uniform samples in [low, high) with dims `size` (layer initialisation).
#[pyfunction]
#[pyo3(signature = (size, low, high, *, dtype=None, device=None, requires_grad=false))]
pub fn uniform(
    size: &Bound<'_, PyAny>,
    low: f64,
    high: f64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    // NaN bounds fail too.
    if low.partial_cmp(&high).is_none_or(|o| o.is_gt()) {
        return Err(PyValueError::new_err(format!(
            "uniform: low {low} must not exceed high {high}"
        )));
    }
    let size = PyTuple::new(size.py(), [size])?;
    random(
        &size_args(&size)?,
        |r| low + (high - low) * r.uniform(),
        dtype,
        device,
        requires_grad,
    )
}

/// `start, start + step, …` below `end` (`arange(5)`, `arange(1, 2, 0.25)`).
#[pyfunction]
#[pyo3(signature = (start, end=None, step=1.0, *, dtype=None, device=None, requires_grad=false))]
pub fn arange(
    start: f64,
    end: Option<f64>,
    step: f64,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let (start, end) = match end {
        Some(e) => (start, e),
        None => (0.0, start),
    };
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
        return Err(PyValueError::new_err(
            "arange: step must be finite and non-zero, start and end finite",
        ));
    }
    let n = ((end - start) / step).ceil().max(0.0) as usize;
    let values = values("arange", n, |i| start + i as f64 * step)?;
    new_leaf(&values, &[n], dtype, device, requires_grad)
}

/// `steps` evenly spaced values from `start` to `end` inclusive.
#[pyfunction]
#[pyo3(signature = (start, end, steps, *, dtype=None, device=None, requires_grad=false))]
pub fn linspace(
    start: f64,
    end: f64,
    steps: isize,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let steps = count("linspace", "steps", steps)?;
    let values = values("linspace", steps, |i| {
        if steps == 1 {
            start
        } else {
            start + (end - start) * i as f64 / (steps - 1) as f64
        }
    })?;
    new_leaf(&values, &[steps], dtype, device, requires_grad)
}

/// The `n × m` identity (m defaults to n).
#[pyfunction]
#[pyo3(signature = (n, m=None, *, dtype=None, device=None, requires_grad=false))]
pub fn eye(
    n: isize,
    m: Option<isize>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<Tensor> {
    let (n, m) = (count("eye", "n", n)?, count("eye", "m", m.unwrap_or(n))?);
    let len = n.saturating_mul(m); // too many: MemoryError below
    let values = values("eye", len, |i| if i / m == i % m { 1.0 } else { 0.0 })?;
    new_leaf(&values, &[n, m], dtype, device, requires_grad)
}

fn like(t: &Tensor, value: f64, requires_grad: bool) -> PyResult<Tensor> {
    let d = t.data();
    Ok(Tensor::leaf(
        guard(|| Ok(map!(&d, x => ops::full_like(x, value))))?,
        requires_grad,
    ))
}

/// Zeros with `t`'s shape, device and dtype.
#[pyfunction]
#[pyo3(signature = (t, *, requires_grad=false))]
pub fn zeros_like(t: &Bound<'_, Tensor>, requires_grad: bool) -> PyResult<Tensor> {
    like(t.get(), 0.0, requires_grad)
}

/// Ones with `t`'s shape, device and dtype.
#[pyfunction]
#[pyo3(signature = (t, *, requires_grad=false))]
pub fn ones_like(t: &Bound<'_, Tensor>, requires_grad: bool) -> PyResult<Tensor> {
    like(t.get(), 1.0, requires_grad)
}

/// `fill_value` with `t`'s shape, device and dtype.
#[pyfunction]
#[pyo3(signature = (t, fill_value, *, requires_grad=false))]
pub fn full_like(t: &Bound<'_, Tensor>, fill_value: f64, requires_grad: bool) -> PyResult<Tensor> {
    like(t.get(), fill_value, requires_grad)
}

/// Tensors joined along an existing axis `dim`; every other dim must agree.
#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
pub fn cat(tensors: Vec<Bound<'_, Tensor>>, dim: isize) -> PyResult<Tensor> {
    let parts: Vec<Data> = tensors.iter().map(|t| t.get().data()).collect();
    cat_data(&parts, dim).map(Tensor::result)
}

/// `cat` on storage (shared with `stack` and the functional API).
pub fn cat_data(parts: &[Data], dim: isize) -> PyResult<Data> {
    let first = parts
        .first()
        .ok_or_else(|| PyValueError::new_err("cat: expected at least one tensor"))?;
    let rank = first.dims().len();
    let axis = shape::real_axis("cat", dim, rank)?;
    for p in &parts[1..] {
        let ok = p.dims().len() == rank
            && p.dims()
                .iter()
                .zip(first.dims())
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !ok {
            return Err(errors::error(
                errors::Kind::Shape,
                format!(
                    "cat: shapes {:?} and {:?} differ outside dim {dim}",
                    first.dims(),
                    p.dims()
                ),
            ));
        }
        if p.place() != first.place() || p.dtype() != first.dtype() {
            return Err(super::data::mismatch("cat", &[first, p]));
        }
    }
    // Every part has `first`'s variant (checked above): unwrap them all as it.
    macro_rules! cat_as {
        ($($v:ident),*) => {
            match first {
                $(Data::$v(_) => Data::$v(RawTensor::cat(
                    &parts
                        .iter()
                        .map(|p| match p {
                            Data::$v(t) => t.clone(),
                            _ => unreachable!("cat: parts of one variant"),
                        })
                        .collect::<Vec<_>>(),
                    axis,
                )),)*
            }
        };
    }
    guard(|| Ok(cat_as!(CpuF32, CpuF64, CpuF16, GpuF32, GpuF16)))
}

/// Tensors of one shape stacked along a new axis `dim`.
#[pyfunction]
#[pyo3(signature = (tensors, dim=0))]
pub fn stack(tensors: Vec<Bound<'_, Tensor>>, dim: isize) -> PyResult<Tensor> {
    let first = tensors
        .first()
        .ok_or_else(|| PyValueError::new_err("stack: expected at least one tensor"))?;
    let dims = first.get().data().dims().to_vec();
    let axis = shape::axis("stack", dim, dims.len() + 1)?;
    let mut parts = Vec::with_capacity(tensors.len());
    for t in &tensors {
        let d = t.get().data();
        if d.dims() != dims {
            return Err(errors::shape_error("stack", &dims, d.dims()));
        }
        let mut spec: Vec<isize> = dims.iter().map(|&n| n as isize).collect();
        spec.insert(axis, 1);
        parts.push(t.get().reshape_to(&spec)?.data());
    }
    cat_data(&parts, axis as isize).map(Tensor::result)
}

/// `cond ? a : b` elementwise, broadcast (`cond` non-zero is true).
#[pyfunction(name = "where")]
pub fn where_(
    cond: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<Tensor> {
    let like = [cond, a, b]
        .iter()
        .find_map(|o| o.cast::<Tensor>().ok().map(|t| t.get().data()))
        .ok_or_else(|| {
            PyTypeError::new_err("where: at least one argument must be a volta.Tensor")
        })?;
    let get = |o: &Bound<'_, PyAny>| match o.cast::<Tensor>() {
        Ok(t) => Ok(t.get().data()),
        Err(_) => data_from_object(o, Some(like.dtype()), like.place()),
    };
    let (c, x, y) = (get(cond)?, get(a)?, get(b)?);
    let dims = shape::broadcast(
        "where",
        &shape::broadcast("where", c.dims(), x.dims())?,
        y.dims(),
    )?;
    guard(|| {
        zip!("where", (&c, &x, &y), |c, x, y| RawTensor::select(
            &ops::broadcast_to(c, &dims),
            &ops::broadcast_to(x, &dims),
            &ops::broadcast_to(y, &dims)
        ))
    })
    .map(Tensor::result)
}
