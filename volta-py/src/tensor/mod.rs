//! `volta.Tensor`: a tensor whose rank and dims are known at run time, on the CPU or
//! the GPU, as float16/32/64, with autograd. Every op checks shapes here and then
//! calls the `volta` crate's `RawTensor` op, the same one typed Rust code records.
pub mod create;
pub mod data;
pub mod grad;
mod index;
mod numpy_io;
pub mod ops;
pub mod shape;

use crate::device::{Device, Where};
use crate::errors::{self, guard};
use data::{DType, Data, map, zip};
use grad::Slot;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::sync::{Arc, Mutex, RwLock};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

/// A tensor: rank and dims known at run time, float32 (or float16/float64), on the
/// CPU or the GPU, with autograd.
///
/// Build one with `volta.tensor(data)`, `volta.zeros(2, 3)`, `volta.from_numpy(a)`.
/// Ops broadcast as numpy does; a shape mismatch raises `volta.ShapeError` (a
/// `ValueError`) naming the op and both shapes.
#[pyclass(module = "volta._volta", name = "Tensor", frozen, weakref)]
pub struct Tensor {
    data: RwLock<Data>,
    grad: Slot,
    /// Made by the user (a leaf) rather than by an op.
    leaf: bool,
}

impl Tensor {
    /// A tensor that an op made.
    pub fn result(data: Data) -> Self {
        Tensor {
            data: RwLock::new(data),
            grad: Arc::new(Mutex::new(None)),
            leaf: false,
        }
    }

    /// A leaf (made by the user), registered for `.grad` when it requires grad. One
    /// that does not is cut from the graph: `volta.tensor(p)` of a tensor that
    /// requires grad is a copy, not `p` under another name (whose uses would send
    /// gradients to `p`).
    pub fn leaf(data: Data, requires_grad: bool) -> Self {
        let data = if requires_grad {
            track(&data)
        } else if data.is_tracked() {
            untrack(&data)
        } else {
            data
        };
        let t = Tensor {
            data: RwLock::new(data),
            grad: Arc::new(Mutex::new(None)),
            leaf: true,
        };
        if requires_grad {
            grad::register(t.data().id(), &t.grad);
        }
        t
    }

    /// The storage (a cheap handle).
    pub fn data(&self) -> Data {
        self.data.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the storage of a leaf in place (an optimiser step, `x -= …`), keeping
    /// its `.grad` slot and its `requires_grad`.
    pub fn replace(&self, new: Data) {
        let mut data = self.data.write().unwrap_or_else(|p| p.into_inner());
        let tracked = data.is_tracked();
        if tracked {
            grad::unregister(data.id());
        }
        *data = if tracked { track(&new) } else { untrack(&new) };
        if tracked {
            grad::register(data.id(), &self.grad);
        }
    }

    /// The accumulated gradient, if any.
    pub fn grad_data(&self) -> Option<Data> {
        self.grad.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sets (or clears) the accumulated gradient.
    pub fn set_grad_data(&self, g: Option<Data>) {
        *self.grad.lock().unwrap_or_else(|p| p.into_inner()) = g;
    }

    fn dims(&self) -> Vec<usize> {
        self.data().dims().to_vec()
    }

    /// A binary op with numpy broadcasting; `other` a tensor or a number.
    fn binary(
        &self,
        op: BinaryOp,
        name: &str,
        other: &Bound<'_, PyAny>,
        reflected: bool,
    ) -> PyResult<Tensor> {
        let a = self.data();
        if let Some(c) = number(other) {
            return guard(|| {
                Ok(Tensor::result(if reflected {
                    map!(&a, t => ops::scalar_left(t, op, c))
                } else {
                    map!(&a, t => ops::scalar(t, op, c))
                }))
            });
        }
        let b = operand(other, &a)?;
        let (x, y) = if reflected { (b, a) } else { (a, b) };
        binary_data(op, name, &x, &y).map(Tensor::result)
    }

    fn unary(&self, op: UnaryOp) -> PyResult<Tensor> {
        let d = self.data();
        guard(|| Ok(Tensor::result(map!(&d, t => t.unary(op)))))
    }

    fn reduce_with(
        &self,
        name: &str,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        op: ReduceOp,
    ) -> PyResult<Tensor> {
        let d = self.data();
        let axes = dims_arg(name, dim, d.dims().len())?;
        if op != ReduceOp::Sum && axes.iter().any(|&a| d.dims()[a] == 0) {
            return Err(PyValueError::new_err(format!(
                "{name}: the reduced axes of a tensor of shape {:?} are empty (no identity for max/min)",
                d.dims()
            )));
        }
        guard(|| {
            Ok(Tensor::result(
                map!(&d, t => ops::reduce(t, op, &axes, keepdim)),
            ))
        })
    }

    fn place(&self) -> Where {
        self.data().place()
    }
}

/// `data` as a new leaf that gradients flow to.
fn track(data: &Data) -> Data {
    map!(data, t => t.tracked_leaf())
}

/// `data` cut from the graph.
fn untrack(data: &Data) -> Data {
    map!(data, t => t.detach())
}

/// A Python int or float (not a bool tensor, not a tensor).
fn number(obj: &Bound<'_, PyAny>) -> Option<f64> {
    if obj.is_instance_of::<Tensor>() {
        return None;
    }
    obj.extract::<f64>().ok()
}

/// The other operand of a binary op as storage: a `Tensor`, or anything
/// `volta.tensor()` takes (lists, numpy arrays), put on `like`'s device and dtype.
fn operand(obj: &Bound<'_, PyAny>, like: &Data) -> PyResult<Data> {
    if let Ok(t) = obj.cast::<Tensor>() {
        return Ok(t.get().data());
    }
    let data = create::data_from_object(obj, Some(like.dtype()), like.place())
        .map_err(|_| PyTypeError::new_err(format!(
            "unsupported operand of type {}: expected a volta.Tensor, a number, a list or a numpy array",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        )))?;
    Ok(data)
}

/// `op(a, b)` broadcast numpy's way, checked first.
pub fn binary_data(op: BinaryOp, name: &str, a: &Data, b: &Data) -> PyResult<Data> {
    let dims = shape::broadcast(name, a.dims(), b.dims())?;
    guard(|| {
        zip!(name, (a, b), |x, y| ops::broadcast_to(x, &dims)
            .binary(op, &ops::broadcast_to(y, &dims)))
    })
}

/// A `dim=` argument: `None` (every axis), an int, or a tuple/list of ints.
fn dims_arg(op: &str, dim: Option<&Bound<'_, PyAny>>, rank: usize) -> PyResult<Vec<usize>> {
    match dim {
        None => Ok((0..rank).collect()),
        Some(d) if d.is_none() => Ok((0..rank).collect()),
        Some(d) => {
            let axes = if let Ok(a) = d.extract::<isize>() {
                vec![shape::axis(op, a, rank)?]
            } else {
                let list: Vec<isize> = d.extract().map_err(|_| {
                    PyTypeError::new_err(format!("{op}: dim must be an int or a tuple of ints"))
                })?;
                shape::axes(op, &list, rank)?
            };
            // A 0-d tensor's dim 0 is its one element: there is no axis to reduce.
            Ok(if rank == 0 { Vec::new() } else { axes })
        }
    }
}

/// Ints from `*args` or one tuple/list argument (`reshape(2, 3)`, `reshape((2, 3))`).
fn int_args(args: &Bound<'_, PyTuple>) -> PyResult<Vec<isize>> {
    if args.len() == 1 {
        let first = args.get_item(0)?;
        if let Ok(v) = first.extract::<Vec<isize>>() {
            return Ok(v);
        }
    }
    args.iter()
        .map(|a| a.extract::<isize>())
        .collect::<PyResult<Vec<_>>>()
        .map_err(|_| PyTypeError::new_err("expected ints, or one tuple of ints"))
}

#[pymethods]
impl Tensor {
    #[new]
    #[pyo3(signature = (data, *, dtype=None, device=None, requires_grad=false))]
    fn py_new(
        data: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        requires_grad: bool,
    ) -> PyResult<Self> {
        create::tensor(data, dtype, device, requires_grad)
    }

    // ---- what it is ----

    /// The dims, as a tuple.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.dims())
    }

    /// The dims (`size()`), or one of them (`size(dim)`).
    #[pyo3(signature = (dim=None))]
    fn size<'py>(&self, py: Python<'py>, dim: Option<isize>) -> PyResult<Bound<'py, PyAny>> {
        let dims = self.dims();
        match dim {
            None => Ok(PyTuple::new(py, dims)?.into_any()),
            Some(d) => Ok(dims[shape::real_axis("size", d, dims.len())?]
                .into_pyobject(py)?
                .into_any()),
        }
    }

    /// The number of dims.
    #[getter]
    fn ndim(&self) -> usize {
        self.dims().len()
    }

    /// The number of dims (PyTorch's `dim()`).
    fn dim(&self) -> usize {
        self.dims().len()
    }

    /// The number of elements.
    fn numel(&self) -> usize {
        self.dims().iter().product()
    }

    /// `"float32"`, `"float16"` or `"float64"` (numpy's names).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.data().dtype().name()
    }

    /// Where it lives: a `volta.Device` (`str()` gives `"cpu"` or `"gpu"`).
    #[getter]
    fn device(&self) -> Device {
        Device {
            place: self.place(),
        }
    }

    /// Whether ops on it are recorded for `backward()`.
    #[getter]
    fn requires_grad(&self) -> bool {
        self.data().is_tracked()
    }

    #[setter]
    fn set_requires_grad(&self, on: bool) -> PyResult<()> {
        self.set_tracking(on)
    }

    /// Makes a leaf require grad (or not), in place; returns it.
    #[pyo3(signature = (requires_grad=true))]
    fn requires_grad_<'py>(
        slf: &Bound<'py, Self>,
        requires_grad: bool,
    ) -> PyResult<Bound<'py, Self>> {
        slf.get().set_tracking(requires_grad)?;
        Ok(slf.clone())
    }

    /// Whether the user made it (rather than an op).
    #[getter]
    fn is_leaf(&self) -> bool {
        self.leaf || !self.data().is_tracked()
    }

    /// The gradient `backward()` accumulated into this leaf (`None` before).
    #[getter]
    fn grad(&self) -> Option<Tensor> {
        self.grad_data().map(|g| Tensor::leaf(g, false))
    }

    #[setter]
    fn set_grad(&self, g: Option<&Bound<'_, Tensor>>) -> PyResult<()> {
        match g {
            None => self.set_grad_data(None),
            Some(g) => {
                let g = g.get().data();
                if g.dims() != self.dims() {
                    return Err(errors::shape_error("grad", g.dims(), &self.dims()));
                }
                let mine = self.data();
                if g.place() != mine.place() || g.dtype() != mine.dtype() {
                    return Err(data::mismatch("grad", &[&mine, &g]));
                }
                self.set_grad_data(Some(g));
            }
        }
        Ok(())
    }

    /// The values as a new leaf without history (`x.data` in PyTorch).
    #[getter(data)]
    fn get_data(&self) -> Tensor {
        Tensor::leaf(untrack(&self.data()), false)
    }

    /// Replaces the values (same shape), keeping `.grad` and `requires_grad`:
    /// `p.data = p.data - lr * p.grad`.
    #[setter(data)]
    fn set_data(&self, value: &Bound<'_, Tensor>) -> PyResult<()> {
        let new = value.get().data();
        let mine = self.data();
        if new.dims() != mine.dims() {
            return Err(errors::shape_error("data", new.dims(), mine.dims()));
        }
        let new = new.convert(mine.place(), mine.dtype())?;
        self.replace(new);
        Ok(())
    }

    // ---- autograd ----

    /// Computes gradients of this tensor with respect to the leaves that require
    /// grad, adding them to each leaf's `.grad`. A tensor of more than one element
    /// needs `gradient` (the vector of the vector-Jacobian product). The values
    /// the graph saved go as the pass runs: a second backward through it raises
    /// `RuntimeError` unless the first had `retain_graph=True`, as in PyTorch.
    #[pyo3(signature = (gradient=None, retain_graph=false))]
    fn backward(
        &self,
        py: Python<'_>,
        gradient: Option<&Bound<'_, Tensor>>,
        retain_graph: bool,
    ) -> PyResult<()> {
        let d = self.data();
        if !d.is_tracked() {
            return Err(PyRuntimeError::new_err(
                "backward(): this tensor does not require grad (no input had requires_grad=True, \
                 or it was computed inside no_grad())",
            ));
        }
        let root = match gradient {
            Some(g) => {
                let g = g.get().data();
                if g.dims() != d.dims() {
                    return Err(errors::shape_error("backward", d.dims(), g.dims()));
                }
                let prod = zip!("backward", (&d, &g), |a, b| a.binary(BinaryOp::Mul, b))?;
                map!(&prod, t => ops::reduce(t, ReduceOp::Sum, &(0..t.dims().len()).collect::<Vec<_>>(), false))
            }
            None if d.dims().iter().product::<usize>() != 1 => {
                return Err(PyRuntimeError::new_err(format!(
                    "backward(): grad can be implicitly created only for one-element outputs, \
                     this has shape {:?}; pass gradient= or reduce it (e.g. .sum())",
                    d.dims()
                )));
            }
            None => d,
        };
        py.detach(|| guard(|| grad::backward(&root, retain_graph)))
    }

    /// The same values without history.
    fn detach(&self) -> Tensor {
        Tensor::leaf(untrack(&self.data()), false)
    }

    /// A copy that gradients flow through.
    fn clone(&self) -> PyResult<Tensor> {
        let d = self.data();
        guard(|| {
            Ok(Tensor::result(
                map!(&d, t => ops::scalar(t, BinaryOp::Mul, 1.0)),
            ))
        })
    }

    /// A copy in memory of its own, a leaf that requires grad as this one does
    /// (`copy.deepcopy`, as a module's parameters are copied in PyTorch; the
    /// gradient is not copied).
    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let d = untrack(&self.data());
        let copy = guard(|| Ok(map!(&d, t => ops::scalar(t, BinaryOp::Mul, 1.0))))?;
        Ok(Tensor::leaf(copy, self.data().is_tracked()))
    }

    /// Clears the gradient (`.grad = None`).
    fn zero_grad(&self) {
        self.set_grad_data(None);
    }

    // ---- out to Python ----

    /// A numpy array of the values: a read-only view of the CPU tensor's memory
    /// (no copy) where it can be one, else a copy (GPU tensors are read back).
    fn numpy<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_io::to_numpy(slf, py)
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = numpy_io::to_numpy(slf, py)?;
        let a = match dtype {
            Some(dt) if !dt.is_none() => a.call_method1("astype", (dt,))?,
            _ => a,
        };
        if copy == Some(true) {
            a.call_method0("copy")
        } else {
            Ok(a)
        }
    }

    /// The values as (nested) Python lists; a float for a 0-dim tensor.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = self.data();
        let values = py.detach(|| d.to_f64())?;
        nested(py, &values, d.dims())
    }

    /// The value of a one-element tensor, as a Python float.
    fn item(&self, py: Python<'_>) -> PyResult<f64> {
        let d = self.data();
        let n: usize = d.dims().iter().product();
        if n != 1 {
            return Err(PyValueError::new_err(format!(
                "item(): only one-element tensors convert to a Python number, this has shape {:?}",
                d.dims()
            )));
        }
        Ok(py.detach(|| d.to_f64())?[0])
    }

    fn __float__(&self, py: Python<'_>) -> PyResult<f64> {
        self.item(py)
    }

    fn __int__(&self, py: Python<'_>) -> PyResult<i64> {
        Ok(self.item(py)? as i64)
    }

    fn __bool__(&self, py: Python<'_>) -> PyResult<bool> {
        let d = self.data();
        if d.dims().iter().product::<usize>() != 1 {
            return Err(PyValueError::new_err(format!(
                "the truth value of a tensor of shape {:?} is ambiguous; use .any() or .all()",
                d.dims()
            )));
        }
        Ok(self.item(py)? != 0.0)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.dims()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }

    fn __repr__(slf: &Bound<'_, Self>, py: Python<'_>) -> PyResult<String> {
        let d = slf.get().data();
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("separator", ", ")?;
        kwargs.set_item("prefix", "tensor(")?;
        kwargs.set_item("precision", 4)?;
        let body = py
            .import("numpy")?
            .getattr("array2string")?
            .call((numpy_io::to_numpy(slf, py)?,), Some(&kwargs))?
            .to_string();
        let mut extra = String::new();
        if d.place() == Where::Gpu {
            extra.push_str(", device='gpu'");
        }
        if d.dtype() != DType::F32 {
            extra.push_str(&format!(", dtype={}", d.dtype().name()));
        }
        if d.is_tracked() {
            extra.push_str(", requires_grad=True");
        }
        Ok(format!("tensor({body}{extra})"))
    }

    // ---- devices and types ----

    /// A copy on another device and/or as another dtype: `to("gpu")`,
    /// `to("float16")`, `to(device="cpu", dtype="float64")`. A leaf that requires
    /// grad gives a leaf that requires grad (a moved parameter stays trainable).
    #[pyo3(signature = (*args, device=None, dtype=None))]
    fn to<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        device: Option<&Bound<'py, PyAny>>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Self>> {
        let me = slf.get();
        let d = me.data();
        let (mut place, mut asked) = (d.place(), None);
        for a in args.iter() {
            if let Ok(s) = a.extract::<String>()
                && let Some(t) = DType::parse(&s)
            {
                asked = Some(t);
                continue;
            }
            if let Some(t) = create::dtype_of(&a)? {
                asked = Some(t);
            } else {
                place = crate::device::parse(Some(&a))?;
            }
        }
        if let Some(dev) = device {
            place = crate::device::parse(Some(dev))?;
        }
        if let Some(t) = dtype {
            asked = Some(create::dtype_of(t)?.ok_or_else(|| {
                PyTypeError::new_err("dtype must be float16, float32 or float64")
            })?);
        }
        // float64 has no GPU form: moving it there without naming a dtype gives
        // float32 (as `.gpu()` does); asking for float64 on the GPU is a TypeError.
        let ty = match asked {
            Some(t) => t,
            None if place == Where::Gpu && d.dtype() == DType::F64 => DType::F32,
            None => d.dtype(),
        };
        if place == d.place() && ty == d.dtype() {
            return Ok(slf.clone());
        }
        let moved = guard(|| d.convert(place, ty))?;
        Bound::new(slf.py(), Tensor::leaf(moved, d.is_tracked() && me.leaf))
    }

    /// `to("cpu")`.
    fn cpu<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        Self::moved(slf, Where::Cpu, None)
    }

    /// `to("gpu")`.
    fn gpu<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        crate::device::open_gpu()?;
        Self::moved(slf, Where::Gpu, None)
    }

    /// `to("gpu")`, under the name PyTorch code uses.
    fn cuda<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        Self::gpu(slf)
    }

    /// `to("float32")`.
    fn float<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        Self::moved(slf, slf.get().place(), Some(DType::F32))
    }

    /// `to("float64")`.
    fn double<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        Self::moved(slf, slf.get().place(), Some(DType::F64))
    }

    /// `to("float16")`.
    fn half<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        Self::moved(slf, slf.get().place(), Some(DType::F16))
    }

    // ---- arithmetic ----

    fn __add__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Add, "add", o, false)
    }
    fn __radd__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Add, "add", o, true)
    }
    fn __sub__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Sub, "sub", o, false)
    }
    fn __rsub__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Sub, "sub", o, true)
    }
    fn __mul__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Mul, "mul", o, false)
    }
    fn __rmul__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Mul, "mul", o, true)
    }
    fn __truediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Div, "div", o, false)
    }
    fn __rtruediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Div, "div", o, true)
    }
    fn __mod__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Mod, "remainder", o, false)
    }
    fn __rmod__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Mod, "remainder", o, true)
    }

    /// Above numpy's arrays and scalars, so that `np.float64(2) * t` and
    /// `np.ones(3) + t` call Tensor's reflected ops and give a Tensor (keeping its
    /// graph and device), as in PyTorch, rather than numpy converting it.
    #[classattr]
    fn __array_priority__() -> f64 {
        1000.0
    }

    fn __pow__(
        &self,
        o: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Tensor> {
        match number(o) {
            Some(k) => {
                let d = self.data();
                guard(|| Ok(Tensor::result(map!(&d, t => ops::powf(t, k)))))
            }
            None => self.binary(BinaryOp::Pow, "pow", o, false),
        }
    }

    fn __rpow__(
        &self,
        o: &Bound<'_, PyAny>,
        _modulo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Tensor> {
        self.binary(BinaryOp::Pow, "pow", o, true)
    }

    /// `self ** exponent`.
    fn pow(&self, exponent: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__pow__(exponent, None)
    }

    fn __neg__(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Neg)
    }
    fn __pos__(&self) -> Tensor {
        self.alias()
    }
    fn __abs__(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Abs)
    }

    // Products are the long CPU ops: the GIL is released while they run.
    fn __matmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let a = self.data();
        let b = operand(o, &a)?;
        py.detach(|| matmul(&a, &b)).map(Tensor::result)
    }

    fn __rmatmul__(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let b = self.data();
        let a = operand(o, &b)?;
        py.detach(|| matmul(&a, &b)).map(Tensor::result)
    }

    /// Matrix product with numpy's rules (`@`).
    fn matmul(&self, py: Python<'_>, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__matmul__(py, o)
    }

    /// `self + other` (also a method: `add`, `sub`, `mul`, `div`).
    fn add(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__add__(o)
    }
    /// `self - other`.
    fn sub(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__sub__(o)
    }
    /// `self * other`.
    fn mul(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__mul__(o)
    }
    /// `self / other`.
    fn div(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.__truediv__(o)
    }
    /// The larger of the two, elementwise (broadcast).
    fn maximum(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Max, "maximum", o, false)
    }
    /// The smaller of the two, elementwise (broadcast).
    fn minimum(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Min, "minimum", o, false)
    }

    fn __lt__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Lt, "lt", o, false)
    }
    fn __le__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Le, "le", o, false)
    }
    fn __gt__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Gt, "gt", o, false)
    }
    fn __ge__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Ge, "ge", o, false)
    }
    /// Elementwise `==` as 1.0/0.0 (the `==` operator does the same).
    fn eq(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Eq, "eq", o, false)
    }
    /// Elementwise `!=` as 1.0/0.0.
    fn ne(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.binary(BinaryOp::Ne, "ne", o, false)
    }

    fn __eq__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.eq(o)
    }
    fn __ne__(&self, o: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        self.ne(o)
    }

    fn __hash__(slf: &Bound<'_, Self>) -> isize {
        slf.as_ptr() as isize
    }

    // in place: the storage is replaced, the `.grad` slot kept
    fn __iadd__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.in_place(BinaryOp::Add, "add_", o)
    }
    fn __isub__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.in_place(BinaryOp::Sub, "sub_", o)
    }
    fn __imul__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.in_place(BinaryOp::Mul, "mul_", o)
    }
    fn __itruediv__(&self, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.in_place(BinaryOp::Div, "div_", o)
    }

    /// In-place `self += other`; returns `self`.
    fn add_<'py>(slf: &Bound<'py, Self>, o: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        slf.get().in_place(BinaryOp::Add, "add_", o)?;
        Ok(slf.clone())
    }
    /// In-place `self -= other`; returns `self`.
    fn sub_<'py>(slf: &Bound<'py, Self>, o: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        slf.get().in_place(BinaryOp::Sub, "sub_", o)?;
        Ok(slf.clone())
    }
    /// In-place `self *= other`; returns `self`.
    fn mul_<'py>(slf: &Bound<'py, Self>, o: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        slf.get().in_place(BinaryOp::Mul, "mul_", o)?;
        Ok(slf.clone())
    }
    /// In-place `self /= other`; returns `self`.
    fn div_<'py>(slf: &Bound<'py, Self>, o: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        slf.get().in_place(BinaryOp::Div, "div_", o)?;
        Ok(slf.clone())
    }
    /// Sets every element to 0, in place; returns `self`.
    fn zero_<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Self>> {
        Self::fill_(slf, 0.0)
    }
    /// Sets every element to `value`, in place; returns `self`.
    fn fill_<'py>(slf: &Bound<'py, Self>, value: f64) -> PyResult<Bound<'py, Self>> {
        let me = slf.get();
        me.check_in_place("fill_")?;
        let d = me.data();
        me.store(map!(&d, t => ops::full_like(t, value)));
        Ok(slf.clone())
    }
    /// Copies `src`'s values (broadcast to this shape) in place; returns `self`.
    fn copy_<'py>(slf: &Bound<'py, Self>, src: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let me = slf.get();
        me.check_in_place("copy_")?;
        let d = me.data();
        let s = operand(src, &d)?.convert(d.place(), d.dtype())?;
        if !shape::broadcasts_to(s.dims(), d.dims()) {
            return Err(errors::shape_error("copy_", d.dims(), s.dims()));
        }
        let dims = d.dims().to_vec();
        let _g = volta::no_grad();
        me.store(guard(|| {
            Ok(map!(&s, t => ops::broadcast_to(t, &dims).contiguous()))
        })?);
        Ok(slf.clone())
    }

    // ---- elementwise math ----

    /// e^x.
    fn exp(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Exp)
    }
    /// The natural logarithm.
    fn log(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Log)
    }
    /// 2^x.
    fn exp2(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Exp2)
    }
    /// log₂ x.
    fn log2(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Log2)
    }
    /// √x.
    fn sqrt(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Sqrt)
    }
    /// 1/√x.
    fn rsqrt(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Sqrt)?.unary(UnaryOp::Recip)
    }
    /// 1/x.
    fn reciprocal(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Recip)
    }
    /// |x|.
    fn abs(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Abs)
    }
    /// −x.
    fn neg(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Neg)
    }
    /// max(x, 0).
    fn relu(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Relu)
    }
    /// 1/(1 + e^−x).
    fn sigmoid(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Sigmoid)
    }
    /// tanh x.
    fn tanh(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Tanh)
    }
    /// sin x.
    fn sin(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Sin)
    }
    /// cos x.
    fn cos(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Cos)
    }
    /// GELU (the erf form, as PyTorch's default).
    fn gelu(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Gelu)
    }
    /// x·sigmoid(x).
    fn silu(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Silu)
    }
    /// ⌊x⌋.
    fn floor(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Floor)
    }
    /// The error function.
    fn erf(&self) -> PyResult<Tensor> {
        self.unary(UnaryOp::Erf)
    }
    /// x².
    fn square(&self) -> PyResult<Tensor> {
        let d = self.data();
        guard(|| Ok(Tensor::result(map!(&d, t => t.binary(BinaryOp::Mul, t)))))
    }

    /// Each element limited to `[min, max]` (either may be `None`).
    #[pyo3(signature = (min=None, max=None))]
    fn clamp(&self, min: Option<f64>, max: Option<f64>) -> PyResult<Tensor> {
        if let (Some(lo), Some(hi)) = (min, max)
            && lo > hi
        {
            return Err(PyValueError::new_err(format!(
                "clamp: min {lo} is greater than max {hi}"
            )));
        }
        let d = self.data();
        guard(|| {
            let mut out = d.clone();
            if let Some(lo) = min {
                out = map!(&out, t => ops::scalar(t, BinaryOp::Max, lo));
            }
            if let Some(hi) = max {
                out = map!(&out, t => ops::scalar(t, BinaryOp::Min, hi));
            }
            Ok(Tensor::result(out))
        })
    }

    // ---- reductions ----

    /// The sum over `dim` (an int, a tuple, or `None` for all).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn sum(&self, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<Tensor> {
        self.reduce_with("sum", dim, keepdim, ReduceOp::Sum)
    }

    /// The mean over `dim` (an int, a tuple, or `None` for all).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn mean(&self, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<Tensor> {
        let d = self.data();
        let axes = dims_arg("mean", dim, d.dims().len())?;
        if axes.iter().any(|&a| d.dims()[a] == 0) {
            return Err(PyValueError::new_err(format!(
                "mean: the reduced axes of shape {:?} are empty",
                d.dims()
            )));
        }
        guard(|| Ok(Tensor::result(map!(&d, t => ops::mean(t, &axes, keepdim)))))
    }

    /// The variance over `dim`, with `correction` (1, Bessel's, by default; as
    /// PyTorch's `unbiased=True`).
    #[pyo3(signature = (dim=None, keepdim=false, *, correction=1.0, unbiased=None))]
    fn var(
        &self,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        correction: f64,
        unbiased: Option<bool>,
    ) -> PyResult<Tensor> {
        let d = self.data();
        let axes = dims_arg("var", dim, d.dims().len())?;
        let c = match unbiased {
            Some(u) => {
                if u {
                    1.0
                } else {
                    0.0
                }
            }
            None => correction,
        };
        guard(|| {
            Ok(Tensor::result(
                map!(&d, t => ops::var(t, &axes, c, keepdim)),
            ))
        })
    }

    /// The standard deviation (see `var`).
    #[pyo3(signature = (dim=None, keepdim=false, *, correction=1.0, unbiased=None))]
    fn std(
        &self,
        dim: Option<&Bound<'_, PyAny>>,
        keepdim: bool,
        correction: f64,
        unbiased: Option<bool>,
    ) -> PyResult<Tensor> {
        self.var(dim, keepdim, correction, unbiased)?
            .unary(UnaryOp::Sqrt)
    }

    /// The maximum over `dim` (an int, a tuple, or `None` for all).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amax(&self, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<Tensor> {
        self.reduce_with("amax", dim, keepdim, ReduceOp::Max)
    }

    /// The minimum over `dim` (an int, a tuple, or `None` for all).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn amin(&self, dim: Option<&Bound<'_, PyAny>>, keepdim: bool) -> PyResult<Tensor> {
        self.reduce_with("amin", dim, keepdim, ReduceOp::Min)
    }

    /// `max()`: the largest element; `max(dim)`: a `(values, indices)` pair along
    /// `dim`, as PyTorch; `max(other)`: the elementwise maximum.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn max<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.extreme(py, dim, keepdim, true)
    }

    /// `min()`, `min(dim)` → `(values, indices)`, `min(other)`: as `max`.
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn min<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.extreme(py, dim, keepdim, false)
    }

    /// The index of the largest element along `dim` (of the flattened tensor when
    /// `None`), as a float32 tensor on the same device (Volta's tensors are float).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmax(&self, py: Python<'_>, dim: Option<isize>, keepdim: bool) -> PyResult<Tensor> {
        self.arg_extreme(py, dim, keepdim, true)
    }

    /// The index of the smallest element (see `argmax`).
    #[pyo3(signature = (dim=None, keepdim=false))]
    fn argmin(&self, py: Python<'_>, dim: Option<isize>, keepdim: bool) -> PyResult<Tensor> {
        self.arg_extreme(py, dim, keepdim, false)
    }

    /// softmax along `dim`.
    fn softmax(&self, dim: isize) -> PyResult<Tensor> {
        let d = self.data();
        let a = shape::axis("softmax", dim, d.dims().len())?;
        // A 0-d tensor: its one element along its one (implicit) dim, as PyTorch.
        let one = d.dims().is_empty();
        guard(|| {
            Ok(Tensor::result(
                map!(&d, t => if one { t.reshape(&[1]).softmax(0).reshape(&[]) } else { t.softmax(a) }),
            ))
        })
    }

    /// log(softmax) along `dim`, computed stably.
    fn log_softmax(&self, dim: isize) -> PyResult<Tensor> {
        let d = self.data();
        let a = shape::axis("log_softmax", dim, d.dims().len())?;
        let one = d.dims().is_empty();
        guard(|| {
            Ok(Tensor::result(
                map!(&d, t => if one { t.reshape(&[1]).log_softmax(0).reshape(&[]) } else { t.log_softmax(a) }),
            ))
        })
    }

    // ---- movement ----

    /// The same elements with new dims (one may be −1): `reshape(2, -1)`.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<'_, PyTuple>) -> PyResult<Tensor> {
        let spec = int_args(shape)?;
        self.reshape_to(&spec)
    }

    /// `reshape`, under PyTorch's other name.
    #[pyo3(signature = (*shape))]
    fn view(&self, shape: &Bound<'_, PyTuple>) -> PyResult<Tensor> {
        self.reshape(shape)
    }

    /// Axes `start_dim..=end_dim` merged into one.
    #[pyo3(signature = (start_dim=0, end_dim=-1))]
    fn flatten(&self, start_dim: isize, end_dim: isize) -> PyResult<Tensor> {
        let dims = self.dims();
        if dims.is_empty() {
            return self.reshape_to(&[1]);
        }
        let s = shape::axis("flatten", start_dim, dims.len())?;
        let e = shape::axis("flatten", end_dim, dims.len())?;
        if s > e {
            return Err(PyValueError::new_err(format!(
                "flatten: start_dim {start_dim} comes after end_dim {end_dim}"
            )));
        }
        let mut spec: Vec<isize> = dims[..s].iter().map(|&d| d as isize).collect();
        spec.push(dims[s..=e].iter().product::<usize>() as isize);
        spec.extend(dims[e + 1..].iter().map(|&d| d as isize));
        self.reshape_to(&spec)
    }

    /// Axes in a new order: `permute(2, 0, 1)`.
    #[pyo3(signature = (*dims))]
    fn permute(&self, dims: &Bound<'_, PyTuple>) -> PyResult<Tensor> {
        let d = self.data();
        let perm = shape::permutation("permute", &int_args(dims)?, d.dims().len())?;
        guard(|| Ok(Tensor::result(map!(&d, t => t.permute(&perm)))))
    }

    /// Two axes swapped.
    fn transpose(&self, dim0: isize, dim1: isize) -> PyResult<Tensor> {
        let d = self.data();
        let r = d.dims().len();
        let (a, b) = (
            shape::axis("transpose", dim0, r)?,
            shape::axis("transpose", dim1, r)?,
        );
        if r == 0 {
            // dims 0/−1 of a 0-d tensor: nothing to swap (as PyTorch).
            return Ok(self.alias());
        }
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(a, b);
        guard(|| Ok(Tensor::result(map!(&d, t => t.permute(&perm)))))
    }

    /// The transpose of a matrix (a vector unchanged).
    fn t(&self) -> PyResult<Tensor> {
        match self.dims().len() {
            0 | 1 => Ok(self.alias()),
            2 => self.transpose(0, 1),
            r => Err(PyValueError::new_err(format!(
                "t() expects a tensor of rank ≤ 2, got rank {r}; use transpose or mT"
            ))),
        }
    }

    /// Every axis reversed.
    #[getter(T)]
    fn big_t(&self) -> PyResult<Tensor> {
        let d = self.data();
        let perm: Vec<usize> = (0..d.dims().len()).rev().collect();
        guard(|| Ok(Tensor::result(map!(&d, t => t.permute(&perm)))))
    }

    /// The last two axes swapped (a batch of matrices transposed).
    #[getter(mT)]
    fn m_t(&self) -> PyResult<Tensor> {
        if self.dims().len() < 2 {
            return Err(PyValueError::new_err("mT needs a tensor of rank ≥ 2"));
        }
        self.transpose(-2, -1)
    }

    /// Size-1 axes removed: all of them, or `dim` (left alone when not size 1).
    #[pyo3(signature = (dim=None))]
    fn squeeze(&self, dim: Option<&Bound<'_, PyAny>>) -> PyResult<Tensor> {
        let dims = self.dims();
        let axes = dims_arg("squeeze", dim, dims.len())?;
        let spec: Vec<isize> = dims
            .iter()
            .enumerate()
            .filter(|&(i, &d)| !(d == 1 && axes.contains(&i)))
            .map(|(_, &d)| d as isize)
            .collect();
        self.reshape_to(&spec)
    }

    /// A size-1 axis inserted at `dim` (−1: last).
    fn unsqueeze(&self, dim: isize) -> PyResult<Tensor> {
        let dims = self.dims();
        let a = shape::axis("unsqueeze", dim, dims.len() + 1)?;
        let mut spec: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
        spec.insert(a, 1);
        self.reshape_to(&spec)
    }

    /// A broadcast view with larger dims (−1 keeps a dim): `expand(4, -1, 3)`.
    #[pyo3(signature = (*sizes))]
    fn expand(&self, sizes: &Bound<'_, PyTuple>) -> PyResult<Tensor> {
        let spec = int_args(sizes)?;
        let d = self.data();
        let dims = d.dims();
        if spec.len() < dims.len() {
            return Err(errors::shape_error(
                "expand",
                dims,
                &spec.iter().map(|&s| s.max(0) as usize).collect::<Vec<_>>(),
            ));
        }
        let pad = spec.len() - dims.len();
        let mut out = Vec::with_capacity(spec.len());
        for (i, &s) in spec.iter().enumerate() {
            let cur = if i >= pad { Some(dims[i - pad]) } else { None };
            let size = match (s, cur) {
                (-1, Some(c)) => c,
                (s, _) if s >= 0 => s as usize,
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "expand: size {s} at position {i} is invalid (−1 keeps an existing dim; others must be ≥ 0)"
                    )));
                }
            };
            if let Some(c) = cur
                && c != size
                && c != 1
            {
                return Err(errors::error(
                    errors::Kind::Shape,
                    format!(
                        "expand: shape {dims:?} cannot expand to {spec:?} (axis {i} has size {c}, not 1)"
                    ),
                ));
            }
            out.push(size);
        }
        guard(|| Ok(Tensor::result(map!(&d, t => ops::broadcast_to(t, &out)))))
    }

    /// `expand` to `other`'s shape.
    fn expand_as(&self, other: &Bound<'_, Tensor>) -> PyResult<Tensor> {
        let py = other.py();
        let dims = PyTuple::new(py, other.get().dims())?;
        self.expand(&dims)
    }

    /// The elements in row-major order in memory of their own.
    fn contiguous(&self) -> PyResult<Tensor> {
        let d = self.data();
        guard(|| Ok(Tensor::result(map!(&d, t => t.contiguous()))))
    }

    /// `length` elements from `start` along `dim` (a view).
    fn narrow(&self, dim: isize, start: isize, length: isize) -> PyResult<Tensor> {
        if length < 0 {
            return Err(PyValueError::new_err(format!(
                "narrow: length must be ≥ 0, got {length}"
            )));
        }
        let d = self.data();
        let a = shape::real_axis("narrow", dim, d.dims().len())?;
        let n = d.dims()[a] as isize;
        let s = if start < 0 { start + n } else { start };
        // `length > n − s`, not `s + length > n`, which can overflow.
        if s < 0 || s > n || length > n - s {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "narrow: {start}..{start}+{length} is out of range for dim {dim} of size {n}"
            )));
        }
        let length = length as usize;
        guard(|| {
            Ok(Tensor::result(
                map!(&d, t => t.narrow(a, s as usize, length)),
            ))
        })
    }

    /// Splits into pieces of `split_size` along `dim` (the last may be smaller).
    #[pyo3(signature = (split_size, dim=0))]
    fn split(&self, split_size: isize, dim: isize) -> PyResult<Vec<Tensor>> {
        if split_size <= 0 {
            return Err(PyValueError::new_err(format!(
                "split: split_size must be positive, got {split_size}"
            )));
        }
        let split_size = split_size as usize;
        let n = self.dims()[shape::real_axis("split", dim, self.dims().len())?];
        (0..n)
            .step_by(split_size)
            .map(|s| self.narrow(dim, s as isize, split_size.min(n - s) as isize))
            .collect()
    }

    /// `chunks` pieces of (nearly) equal size along `dim`.
    #[pyo3(signature = (chunks, dim=0))]
    fn chunk(&self, chunks: isize, dim: isize) -> PyResult<Vec<Tensor>> {
        if chunks <= 0 {
            return Err(PyValueError::new_err(format!(
                "chunk: chunks must be positive, got {chunks}"
            )));
        }
        let n = self.dims()[shape::real_axis("chunk", dim, self.dims().len())?];
        self.split(n.div_ceil(chunks as usize).max(1) as isize, dim)
    }

    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        index::get(self, key)
    }

    fn __setitem__(&self, _key: &Bound<'_, PyAny>, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(PyTypeError::new_err(
            "volta tensors do not support item assignment (their memory is shared with the \
             graph); build the new tensor with volta.where, volta.cat or arithmetic",
        ))
    }
}

impl Tensor {
    fn set_tracking(&self, requires_grad: bool) -> PyResult<()> {
        if !self.leaf {
            return Err(PyRuntimeError::new_err(
                "requires_grad can only be changed on leaf tensors (made by volta.tensor, zeros, …); \
                 use .detach() for a non-leaf",
            ));
        }
        let mut data = self.data.write().unwrap_or_else(|p| p.into_inner());
        if requires_grad && !data.is_tracked() {
            *data = track(&data);
            grad::register(data.id(), &self.grad);
        } else if !requires_grad && data.is_tracked() {
            grad::unregister(data.id());
            *data = untrack(&data);
        }
        Ok(())
    }

    /// Another handle on the same storage: a result of this tensor's graph.
    fn alias(&self) -> Tensor {
        Tensor::result(self.data())
    }

    /// `slf` on `place` as `dtype` (its own dtype when `None`; float64 becomes
    /// float32 on the GPU): `slf` itself when nothing changes, as PyTorch.
    fn moved<'py>(
        slf: &Bound<'py, Self>,
        place: Where,
        dtype: Option<DType>,
    ) -> PyResult<Bound<'py, Self>> {
        let me = slf.get();
        let d = me.data();
        let dtype = match dtype {
            Some(t) => t,
            None if place == Where::Gpu && d.dtype() == DType::F64 => DType::F32,
            None => d.dtype(),
        };
        if d.place() == place && d.dtype() == dtype {
            return Ok(slf.clone());
        }
        let moved = guard(|| d.convert(place, dtype))?;
        Bound::new(slf.py(), Tensor::leaf(moved, d.is_tracked() && me.leaf))
    }

    pub(crate) fn reshape_to(&self, spec: &[isize]) -> PyResult<Tensor> {
        let d = self.data();
        let dims = shape::reshape("reshape", d.dims(), spec)?;
        guard(|| Ok(Tensor::result(map!(&d, t => t.reshape(&dims)))))
    }

    /// Refuses to change a leaf that requires grad while gradients are recorded. A
    /// tensor an op made may change in place (`h = x @ w; h += b`): the update is
    /// recorded like any op.
    /// Puts `new` in place of the values: a leaf keeps its `.grad` slot and its
    /// `requires_grad` (`replace`); a tensor an op made takes `new` as it is (the
    /// recorded result of an in-place op, or values that no longer depend on the
    /// graph), never becoming a leaf that gradients collect in.
    fn store(&self, new: Data) {
        if self.leaf {
            self.replace(new);
        } else {
            *self.data.write().unwrap_or_else(|p| p.into_inner()) = new;
        }
    }

    fn check_in_place(&self, op: &str) -> PyResult<()> {
        if self.leaf && self.data().is_tracked() && volta::grad_enabled() {
            return Err(PyRuntimeError::new_err(format!(
                "{op}: a leaf that requires grad cannot be changed in place while gradients are \
                 recorded; wrap the update in `with volta.no_grad():`"
            )));
        }
        Ok(())
    }

    fn in_place(&self, op: BinaryOp, name: &str, o: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_in_place(name)?;
        let d = self.data();
        let out = self.binary(op, name, o, false)?.data();
        if out.dims() != d.dims() {
            return Err(errors::error(
                errors::Kind::Shape,
                format!(
                    "{name}: the result of shape {:?} does not fit in place into shape {:?}",
                    out.dims(),
                    d.dims()
                ),
            ));
        }
        self.store(out);
        Ok(())
    }

    fn extreme<'py>(
        &self,
        py: Python<'py>,
        dim: Option<&Bound<'py, PyAny>>,
        keepdim: bool,
        max: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let op = if max { ReduceOp::Max } else { ReduceOp::Min };
        let name = if max { "max" } else { "min" };
        match dim {
            Some(o) if o.is_instance_of::<Tensor>() => {
                let b = if max { BinaryOp::Max } else { BinaryOp::Min };
                Ok(Bound::new(py, self.binary(b, name, o, false)?)?.into_any())
            }
            None => Ok(Bound::new(py, self.reduce_with(name, None, false, op)?)?.into_any()),
            Some(d) => {
                let axis: isize = d.extract()?;
                let values = self.reduce_with(name, Some(d), keepdim, op)?;
                let indices = self.arg_extreme(py, Some(axis), keepdim, max)?;
                Ok(PyTuple::new(
                    py,
                    [
                        Bound::new(py, values)?.into_any(),
                        Bound::new(py, indices)?.into_any(),
                    ],
                )?
                .into_any())
            }
        }
    }

    fn arg_extreme(
        &self,
        py: Python<'_>,
        dim: Option<isize>,
        keepdim: bool,
        max: bool,
    ) -> PyResult<Tensor> {
        let d = self.data();
        let dims = d.dims().to_vec();
        let values = py.detach(|| d.to_f64())?;
        let (axis, outer, len, inner) = match dim {
            None => (None, 1, values.len(), 1),
            // A 0-d tensor's dim 0/−1: its one element, index 0 (as PyTorch).
            Some(a) if dims.is_empty() => {
                shape::axis("argmax", a, 0)?;
                (None, 1, values.len(), 1)
            }
            Some(a) => {
                let a = shape::axis("argmax", a, dims.len())?;
                (
                    Some(a),
                    dims[..a].iter().product(),
                    dims[a],
                    dims[a + 1..].iter().product(),
                )
            }
        };
        if len == 0 {
            return Err(PyValueError::new_err(format!(
                "argmax/argmin of an empty axis (shape {dims:?})"
            )));
        }
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| values[(o * len + k) * inner + i];
                let mut best = 0;
                for k in 1..len {
                    let better = if max {
                        at(k) > at(best)
                    } else {
                        at(k) < at(best)
                    };
                    // NaN wins, as numpy's argmax.
                    if better || (at(k).is_nan() && !at(best).is_nan()) {
                        best = k;
                    }
                }
                out.push(best as f64);
            }
        }
        let out_dims: Vec<usize> = match axis {
            None if keepdim => vec![1; dims.len()],
            None => vec![],
            Some(a) => dims
                .iter()
                .enumerate()
                .filter_map(|(i, &n)| {
                    if i == a {
                        keepdim.then_some(1)
                    } else {
                        Some(n)
                    }
                })
                .collect(),
        };
        Ok(Tensor::leaf(
            Data::from_f64(
                &out,
                &out_dims,
                d.place(),
                if d.place() == Where::Gpu {
                    DType::F32
                } else {
                    d.dtype()
                },
            )?,
            false,
        ))
    }
}

/// `a @ b` with numpy's rules: 1-D operands promoted and the promoted axis dropped,
/// batch dims broadcast.
pub fn matmul(a: &Data, b: &Data) -> PyResult<Data> {
    let out = shape::matmul(a.dims(), b.dims())?;
    let (ad, bd) = (a.dims().to_vec(), b.dims().to_vec());
    guard(|| {
        zip!("matmul", (a, b), |x, y| {
            if ad.len() <= 2 || bd.len() <= 2 {
                if ad.len() <= 2 && bd.len() > 2 {
                    // (M, K) or (K,) × (…, K, N): broadcast the matrix (a vector as
                    // one row, dropped after) over the batch; Volta's matmul shares
                    // only a right operand across a batch.
                    let row = if ad.len() == 1 {
                        vec![1, ad[0]]
                    } else {
                        ad.clone()
                    };
                    let mut dims = bd[..bd.len() - 2].to_vec();
                    dims.extend_from_slice(&row);
                    let x = if ad.len() == 1 {
                        x.reshape(&row)
                    } else {
                        x.clone()
                    };
                    let y = ops::broadcast_to(&x, &dims).matmul(y);
                    if ad.len() == 1 { y.reshape(&out) } else { y }
                } else {
                    x.matmul(y)
                }
            } else {
                let batch = &out[..out.len() - 2];
                let mut da = batch.to_vec();
                da.extend_from_slice(&ad[ad.len() - 2..]);
                let mut db = batch.to_vec();
                db.extend_from_slice(&bd[bd.len() - 2..]);
                ops::broadcast_to(x, &da).matmul(&ops::broadcast_to(y, &db))
            }
        })
    })
}

/// Nested Python lists of `values` with `dims` (a float for a 0-d tensor).
fn nested<'py>(py: Python<'py>, values: &[f64], dims: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    if dims.is_empty() {
        return Ok(values[0].into_pyobject(py)?.into_any());
    }
    let step: usize = dims[1..].iter().product();
    let items = (0..dims[0])
        .map(|i| nested(py, &values[i * step..(i + 1) * step], &dims[1..]))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.into_any())
}
