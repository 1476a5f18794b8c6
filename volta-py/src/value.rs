//! `volta.Value`: micrograd's scalar autograd engine, its graph and backward pass in
//! Rust.
//!
//! Each `Value` is one node of the graph, as in micrograd: the Python object *is* the
//! node, so `_prev` hands back the very objects an expression was built from. Data and
//! gradients are kept as Python keeps them (micrograd's `Value(2)` holds the int 2, and
//! every gradient starts as the int 0), in [`Num`]: 64-bit ints and floats are computed
//! here with Python's rules, to the bit; anything else (big ints, bools, complex,
//! `Fraction`) is handed to Python.
//!
//! The backward pass is micrograd's: a depth-first topological sort, then each node's
//! chain rule in reverse order, accumulating into its operands' gradients with the same
//! expressions. micrograd visits a node's operands in the order of a Python `set` (which
//! depends on memory addresses); this file visits them in operand order (`self`, then
//! `other`). Where a gradient sums three or more terms the two orders may round
//! differently in the last bit; with micrograd's sets made ordered the same way, the
//! results are identical (see `tests/test_value.py`).
use crate::device::{self, Device, Where};
use crate::errors;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PySet, PyType};
use pyo3::{PyTraverseError, intern};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// A number as Python computes it.
enum Num {
    /// A Python `int` that fits 64 bits.
    Int(i64),
    /// A Python `float` (and float subclasses such as `numpy.float64`, whose arithmetic
    /// is the same IEEE double arithmetic).
    Float(f64),
    /// Any other number (bool, big int, complex, `Fraction`, `Decimal`, other numpy
    /// scalars): computed by Python, so results are exactly what micrograd would get.
    Obj(Py<PyAny>),
}

/// `numbers.Number`, the test for operands that are neither int nor float.
fn number_abc(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static NUMBER: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    NUMBER.import(py, "numbers", "Number")
}

impl Num {
    /// `obj` as a number; `None` when it is not one.
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Num>> {
        if let Ok(f) = obj.cast::<PyFloat>() {
            return Ok(Some(Num::Float(f.value())));
        }
        // bool is an int, but micrograd would show `True`, so Python keeps it.
        if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
            return Ok(Some(match obj.extract::<i64>() {
                Ok(i) => Num::Int(i),
                Err(_) => Num::Obj(obj.clone().unbind()),
            }));
        }
        if obj.is_instance_of::<PyBool>() || obj.is_instance(number_abc(obj.py())?)? {
            return Ok(Some(Num::Obj(obj.clone().unbind())));
        }
        Ok(None)
    }

    /// The result of a computation Python did.
    fn from_result(obj: Bound<'_, PyAny>) -> PyResult<Num> {
        Ok(Num::from_py(&obj)?.unwrap_or_else(|| Num::Obj(obj.unbind())))
    }

    /// The number as a Python object.
    fn to_py<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        match self {
            Num::Int(i) => {
                let Ok(i) = i.into_pyobject(py);
                i.into_any()
            }
            Num::Float(f) => PyFloat::new(py, *f).into_any(),
            Num::Obj(o) => o.bind(py).clone(),
        }
    }

    fn clone_ref(&self, py: Python<'_>) -> Num {
        match self {
            Num::Int(i) => Num::Int(*i),
            Num::Float(f) => Num::Float(*f),
            Num::Obj(o) => Num::Obj(o.clone_ref(py)),
        }
    }
}

/// A binary operator with Python's semantics: `int` with `int` stays exact (Python's
/// ints do not overflow, so an overflowing result is left to Python), `float` with
/// `int` converts the int to the nearest double first, as CPython does; anything else
/// is computed by Python.
fn arith(
    py: Python<'_>,
    a: &Num,
    b: &Num,
    int: fn(i64, i64) -> Option<i64>,
    float: fn(f64, f64) -> f64,
    python: fn(&Bound<'_, PyAny>, &Bound<'_, PyAny>) -> PyResult<Num>,
) -> PyResult<Num> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => {
            if let Some(r) = int(*x, *y) {
                return Ok(Num::Int(r));
            }
        }
        (Num::Float(x), Num::Float(y)) => return Ok(Num::Float(float(*x, *y))),
        (Num::Float(x), Num::Int(y)) => return Ok(Num::Float(float(*x, *y as f64))),
        (Num::Int(x), Num::Float(y)) => return Ok(Num::Float(float(*x as f64, *y))),
        _ => {}
    }
    python(&a.to_py(py), &b.to_py(py))
}

/// Python's `a + b`.
fn add(py: Python<'_>, a: &Num, b: &Num) -> PyResult<Num> {
    arith(
        py,
        a,
        b,
        i64::checked_add,
        |x, y| x + y,
        |a, b| Num::from_result(a.add(b)?),
    )
}

/// Python's `a - b`.
fn sub(py: Python<'_>, a: &Num, b: &Num) -> PyResult<Num> {
    arith(
        py,
        a,
        b,
        i64::checked_sub,
        |x, y| x - y,
        |a, b| Num::from_result(a.sub(b)?),
    )
}

/// Python's `a * b`.
fn mul(py: Python<'_>, a: &Num, b: &Num) -> PyResult<Num> {
    arith(
        py,
        a,
        b,
        i64::checked_mul,
        |x, y| x * y,
        |a, b| Num::from_result(a.mul(b)?),
    )
}

/// Python's `-a`.
fn neg(py: Python<'_>, a: &Num) -> PyResult<Num> {
    match a {
        Num::Int(x) if *x != i64::MIN => Ok(Num::Int(-x)),
        Num::Float(x) => Ok(Num::Float(-x)),
        _ => Num::from_result(a.to_py(py).neg()?),
    }
}

/// Python's `a ** b`.
fn pow(py: Python<'_>, a: &Num, b: &Num) -> PyResult<Num> {
    let floats = match (a, b) {
        // int ** non-negative int is an exact int; int ** negative int is a float power.
        (Num::Int(x), Num::Int(y)) if *y >= 0 => {
            if let Some(r) = u32::try_from(*y).ok().and_then(|e| x.checked_pow(e)) {
                return Ok(Num::Int(r));
            }
            None
        }
        (Num::Int(x), Num::Int(y)) => Some((*x as f64, *y as f64)),
        (Num::Float(x), Num::Float(y)) => Some((*x, *y)),
        (Num::Float(x), Num::Int(y)) => Some((*x, *y as f64)),
        (Num::Int(x), Num::Float(y)) => Some((*x as f64, *y)),
        _ => None,
    };
    if let Some(r) = floats.and_then(|(x, y)| float_pow(x, y)) {
        return Ok(Num::Float(r));
    }
    // Errors (0 ** -1, overflow), complex results and big ints: Python's own answer.
    Num::from_result(a.to_py(py).pow(b.to_py(py), py.None())?)
}

/// CPython's `float ** float` (`float_pow` in `Objects/floatobject.c`), or `None`
/// where Python raises, returns a complex number, or takes an infinite operand (then
/// Python computes it). The special cases come first, as there, so that the libm
/// `pow` both call sees the same arguments.
fn float_pow(iv: f64, iw: f64) -> Option<f64> {
    let odd = |x: f64| x.abs() % 2.0 == 1.0;
    if iw == 0.0 {
        return Some(1.0);
    }
    if iv.is_nan() {
        return Some(iv);
    }
    if iw.is_nan() {
        return Some(if iv == 1.0 { 1.0 } else { iw });
    }
    if iv.is_infinite() || iw.is_infinite() {
        return None;
    }
    if iv == 0.0 {
        // 0 ** negative raises ZeroDivisionError.
        return (iw > 0.0).then(|| if odd(iw) { iv } else { 0.0 });
    }
    let (base, negate) = if iv < 0.0 {
        if iw != iw.floor() {
            return None;
        }
        (-iv, odd(iw))
    } else {
        (iv, false)
    };
    if base == 1.0 {
        return Some(if negate { -1.0 } else { 1.0 });
    }
    let r = base.powf(iw);
    // An infinite result from finite operands is Python's OverflowError.
    (!r.is_infinite()).then_some(if negate { -r } else { r })
}

/// Python's `a < 0` (micrograd's ReLU test).
fn is_negative(py: Python<'_>, a: &Num) -> PyResult<bool> {
    match a {
        Num::Int(x) => Ok(*x < 0),
        Num::Float(x) => Ok(*x < 0.0),
        Num::Obj(o) => o.bind(py).lt(0),
    }
}

/// Python's `a > 0`.
fn is_positive(py: Python<'_>, a: &Num) -> PyResult<bool> {
    match a {
        Num::Int(x) => Ok(*x > 0),
        Num::Float(x) => Ok(*x > 0.0),
        Num::Obj(o) => o.bind(py).gt(0),
    }
}

/// Python's `b * g` for a bool `b` (ReLU's backward: `(out.data > 0) * out.grad`).
/// `False * g` is not always 0: it is `-0.0` for negative `g` and NaN for infinite `g`.
fn bool_times(py: Python<'_>, b: bool, g: &Num) -> PyResult<Num> {
    match g {
        Num::Int(x) => Ok(Num::Int(if b { *x } else { 0 })),
        Num::Float(x) => Ok(Num::Float(if b { 1.0 } else { 0.0 } * x)),
        Num::Obj(o) => Num::from_result(PyBool::new(py, b).mul(o.bind(py))?),
    }
}

/// `math.<name>(x)` for a number Python holds (a float result, or Python's error).
fn math_of(py: Python<'_>, name: &str, x: &Py<PyAny>) -> PyResult<f64> {
    py.import("math")?.getattr(name)?.call1((x,))?.extract()
}

/// What made a node, with what its backward pass needs besides the operands.
enum Op {
    /// Made by `Value(data)`.
    Leaf,
    Add,
    Mul,
    /// `** exponent` (an int or float, as micrograd asserts).
    Pow(Num),
    Relu,
    /// `tanh`, keeping `t = tanh(x)` for the backward pass as micrograd's lecture does.
    Tanh(f64),
    Exp,
}

/// A scalar value and its gradient: micrograd's `Value`, computed in Rust.
///
/// `Value(data)` takes an int or a float (or another number Python computes with);
/// `+ - * / **`, their reflected forms, `-v`, `relu()`, `tanh()` and `exp()` build the
/// graph; `backward()` fills in `.grad` of every node that `self` depends on.
/// `.data` and `.grad` are settable, as in micrograd, and ints stay ints:
/// `repr(Value(2))` is `Value(data=2, grad=0)`.
///
/// `device=` (a `Device`, `'cpu'` or `'gpu'`) is kept and reported by `.device`, as in
/// micrograd_rs, but scalar values always compute on the CPU, whatever the device
/// says: one number per kernel launch would only be slower. A GPU pays off on tensors.
#[pyclass(module = "volta._volta", name = "Value", subclass)]
pub struct Value {
    data: Num,
    grad: Num,
    op: Op,
    /// The operands, in micrograd's order (`self`, then `other`); `None` past the end.
    prev: [Option<Py<Value>>; 2],
    device: Where,
}

/// The device of a result: the GPU if either operand says GPU.
fn join(a: Where, b: Where) -> Where {
    if a == Where::Gpu || b == Where::Gpu {
        Where::Gpu
    } else {
        Where::Cpu
    }
}

fn node<'py>(
    py: Python<'py>,
    data: Num,
    op: Op,
    prev: [Option<Py<Value>>; 2],
    device: Where,
) -> PyResult<Bound<'py, Value>> {
    let v = Bound::new(
        py,
        Value {
            data,
            grad: Num::Int(0),
            op,
            prev,
            device,
        },
    )?;
    // A node refers only to its operands, which existed before it, and to numbers, so
    // no reference cycle runs through it: the cycle collector need not scan it. Scanning
    // the 60 000 nodes each step of micrograd's demo makes took 80% of its forward pass.
    // SAFETY: `v` is a live object of a GC type (pyo3 gives every pyclass GC support);
    // its deallocator untracks it again, which CPython allows.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(v.as_ptr().cast()) };
    Ok(v)
}

fn leaf(py: Python<'_>, data: Num, device: Where) -> PyResult<Bound<'_, Value>> {
    node(py, data, Op::Leaf, [None, None], device)
}

/// The other operand of a binary operator.
enum Operand<'py> {
    Node(Bound<'py, Value>),
    Num(Num),
}

/// `obj` as an operand; `None` when it is neither a `Value` nor a number (then the
/// operator returns `NotImplemented` and Python raises its `TypeError`).
fn operand<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Operand<'py>>> {
    if let Ok(v) = obj.cast::<Value>() {
        return Ok(Some(Operand::Node(v.clone())));
    }
    Ok(Num::from_py(obj)?.map(Operand::Num))
}

/// micrograd's `other if isinstance(other, Value) else Value(other)`; a new value
/// takes the device of `this`, the operand it is combined with.
fn lift<'py>(this: &Bound<'py, Value>, other: Operand<'py>) -> PyResult<Bound<'py, Value>> {
    match other {
        Operand::Node(v) => Ok(v),
        Operand::Num(n) => leaf(this.py(), n, device_of(this)?),
    }
}

fn device_of(v: &Bound<'_, Value>) -> PyResult<Where> {
    Ok(v.try_borrow()?.device)
}

/// `a + b` (`Op::Add`) or `a * b` (`Op::Mul`).
fn binary<'py>(
    op: Op,
    a: &Bound<'py, Value>,
    b: &Bound<'py, Value>,
) -> PyResult<Bound<'py, Value>> {
    let py = a.py();
    let (data, device) = {
        let (x, y) = (a.try_borrow()?, b.try_borrow()?);
        let data = match op {
            Op::Mul => mul(py, &x.data, &y.data)?,
            _ => add(py, &x.data, &y.data)?,
        };
        (data, join(x.device, y.device))
    };
    let prev = [Some(a.clone().unbind()), Some(b.clone().unbind())];
    node(py, data, op, prev, device)
}

/// `a ** exponent`.
fn power<'py>(a: &Bound<'py, Value>, exponent: Num) -> PyResult<Bound<'py, Value>> {
    let py = a.py();
    let (data, device) = {
        let x = a.try_borrow()?;
        (pow(py, &x.data, &exponent)?, x.device)
    };
    node(
        py,
        data,
        Op::Pow(exponent),
        [Some(a.clone().unbind()), None],
        device,
    )
}

/// An op of one operand whose result is `data`.
fn unary<'py>(a: &Bound<'py, Value>, op: Op, data: Num) -> PyResult<Bound<'py, Value>> {
    let device = device_of(a)?;
    node(a.py(), data, op, [Some(a.clone().unbind()), None], device)
}

/// micrograd's `__neg__`: `self * -1`.
fn negate<'py>(a: &Bound<'py, Value>) -> PyResult<Bound<'py, Value>> {
    let minus_one = leaf(a.py(), Num::Int(-1), device_of(a)?)?;
    binary(Op::Mul, a, &minus_one)
}

/// Hashes node addresses for the visited set: a folded multiply, because addresses are
/// 16-byte aligned and the table indexes by the low bits.
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let p = u128::from(n) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// micrograd's `build_topo`: post-order depth-first search from `root`, operands in
/// order. Iterative, so a graph deeper than Python's recursion limit works.
fn topological_order<'py>(root: &Bound<'py, Value>) -> PyResult<Vec<Bound<'py, Value>>> {
    let py = root.py();
    // Each node's operands are read once, when it is first reached.
    let operands = |v: &Bound<'py, Value>| -> PyResult<[Option<Bound<'py, Value>>; 2]> {
        let v = v.try_borrow()?;
        Ok([&v.prev[0], &v.prev[1]].map(|c| c.as_ref().map(|c| c.bind(py).clone())))
    };
    let mut topo = Vec::new();
    let mut visited: HashSet<usize, BuildHasherDefault<AddressHasher>> = HashSet::default();
    visited.insert(root.as_ptr() as usize);
    let mut stack = vec![(root.clone(), operands(root)?, 0usize)];
    while let Some((_, pending, next)) = stack.last_mut() {
        let child = pending.get_mut(*next).and_then(Option::take);
        *next += 1;
        match child {
            Some(child) => {
                if visited.insert(child.as_ptr() as usize) {
                    let grandchildren = operands(&child)?;
                    stack.push((child, grandchildren, 0));
                }
            }
            None => {
                if let Some((done, _, _)) = stack.pop() {
                    topo.push(done);
                }
            }
        }
    }
    Ok(topo)
}

/// micrograd's `v.grad += delta`.
fn accumulate(v: &Bound<'_, Value>, delta: &Num) -> PyResult<()> {
    let mut v = v.try_borrow_mut()?;
    v.grad = add(v.py(), &v.grad, delta)?;
    Ok(())
}

/// One node's `_backward`: micrograd's expressions, evaluated in micrograd's order.
fn backward_step(py: Python<'_>, v: &Bound<'_, Value>) -> PyResult<()> {
    let out = v.try_borrow()?;
    let [a, b] = &out.prev;
    let (Some(a), b) = (
        a.as_ref().map(|a| a.bind(py)),
        b.as_ref().map(|b| b.bind(py)),
    ) else {
        return Ok(()); // a leaf
    };
    match &out.op {
        Op::Leaf => {}
        Op::Add => {
            accumulate(a, &out.grad)?;
            if let Some(b) = b {
                accumulate(b, &out.grad)?;
            }
        }
        Op::Mul => {
            if let Some(b) = b {
                // self.grad += other.data * out.grad; other.grad += self.data * out.grad
                let delta = mul(py, &b.try_borrow()?.data, &out.grad)?;
                accumulate(a, &delta)?;
                let delta = mul(py, &a.try_borrow()?.data, &out.grad)?;
                accumulate(b, &delta)?;
            }
        }
        Op::Pow(e) => {
            // self.grad += (other * self.data**(other-1)) * out.grad
            let local = {
                let x = a.try_borrow()?;
                mul(py, e, &pow(py, &x.data, &sub(py, e, &Num::Int(1))?)?)?
            };
            accumulate(a, &mul(py, &local, &out.grad)?)?;
        }
        Op::Relu => {
            // self.grad += (out.data > 0) * out.grad
            let delta = bool_times(py, is_positive(py, &out.data)?, &out.grad)?;
            accumulate(a, &delta)?;
        }
        Op::Tanh(t) => {
            // self.grad += (1 - t**2) * out.grad; t**2 is finite for t = tanh(x).
            let t2 = float_pow(*t, 2.0).unwrap_or(f64::NAN);
            accumulate(a, &mul(py, &Num::Float(1.0 - t2), &out.grad)?)?;
        }
        Op::Exp => {
            // self.grad += out.data * out.grad
            accumulate(a, &mul(py, &out.data, &out.grad)?)?;
        }
    }
    Ok(())
}

/// The error for a `Value(data)` that is not a number.
fn not_a_number(what: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    let ty = obj
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string());
    errors::type_error(format!("{what} must be a number (int or float), not {ty}"))
}

#[pymethods]
impl Value {
    #[new]
    #[pyo3(signature = (data, *, device = None))]
    fn new(data: &Bound<'_, PyAny>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(num) = Num::from_py(data)? else {
            return Err(not_a_number("Value data", data));
        };
        Ok(Value {
            data: num,
            grad: Num::Int(0),
            op: Op::Leaf,
            prev: [None, None],
            device: device::parse(device)?,
        })
    }

    /// The value (an int stays an int, as in micrograd). Settable.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.data.to_py(py)
    }

    #[setter]
    fn set_data(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.data = Num::from_py(value)?.ok_or_else(|| not_a_number("data", value))?;
        Ok(())
    }

    /// d(root)/d(self) after `root.backward()`; the int 0 before. Settable.
    #[getter]
    fn grad<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.grad.to_py(py)
    }

    #[setter]
    fn set_grad(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.grad = Num::from_py(value)?.ok_or_else(|| not_a_number("grad", value))?;
        Ok(())
    }

    /// The device given at creation (or the GPU if an operand had it). The value
    /// computes on the CPU either way.
    #[getter]
    fn device(&self) -> Device {
        Device { place: self.device }
    }

    /// The operands this value was computed from, as in micrograd (a `set`).
    #[getter]
    fn _prev<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PySet>> {
        PySet::new(py, self.prev.iter().flatten())
    }

    /// The op that made this value, as micrograd names it (`''` for a leaf).
    #[getter]
    fn _op(&self, py: Python<'_>) -> PyResult<String> {
        Ok(match &self.op {
            Op::Leaf => String::new(),
            Op::Add => "+".into(),
            Op::Mul => "*".into(),
            Op::Pow(e) => format!("**{}", e.to_py(py).str()?),
            Op::Relu => "ReLU".into(),
            Op::Tanh(_) => "tanh".into(),
            Op::Exp => "exp".into(),
        })
    }

    /// `Value(data=..., grad=...)`, each formatted as Python's f-string would.
    fn __repr__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        intern!(py, "Value(data={}, grad={})").call_method1(
            intern!(py, "format"),
            (self.data.to_py(py), self.grad.to_py(py)),
        )
    }

    fn __add__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(other) = operand(other)? else {
            return Ok(py.NotImplemented());
        };
        let other = lift(slf, other)?;
        Ok(binary(Op::Add, slf, &other)?.into_any().unbind())
    }

    /// `other + self`, computed as micrograd does: `self + other`.
    fn __radd__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        Self::__add__(slf, other)
    }

    fn __mul__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(other) = operand(other)? else {
            return Ok(py.NotImplemented());
        };
        let other = lift(slf, other)?;
        Ok(binary(Op::Mul, slf, &other)?.into_any().unbind())
    }

    /// `other * self`, computed as micrograd does: `self * other`.
    fn __rmul__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        Self::__mul__(slf, other)
    }

    /// `self ** other` for an int or float `other` only, as micrograd asserts (here a
    /// `TypeError`). There is no `other ** self`, as in micrograd.
    fn __pow__<'py>(
        slf: &Bound<'py, Self>,
        other: &Bound<'py, PyAny>,
        modulo: &Bound<'py, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        if !modulo.is_none() {
            return Err(PyTypeError::new_err(
                "pow() with a modulus is not supported by Value",
            ));
        }
        let exponent = if other.is_instance_of::<PyInt>() || other.is_instance_of::<PyFloat>() {
            Num::from_py(other)?
        } else {
            None
        };
        let Some(exponent) = exponent else {
            return Err(PyTypeError::new_err(
                "only supporting int/float powers for now",
            ));
        };
        Ok(power(slf, exponent)?.into_any().unbind())
    }

    /// `-self`: micrograd's `self * -1`.
    fn __neg__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Value>> {
        negate(slf)
    }

    /// `self - other`: micrograd's `self + (-other)`.
    fn __sub__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let negated = match operand(other)? {
            None => return Ok(py.NotImplemented()),
            Some(Operand::Node(v)) => negate(&v)?,
            Some(Operand::Num(n)) => leaf(py, neg(py, &n)?, device_of(slf)?)?,
        };
        Ok(binary(Op::Add, slf, &negated)?.into_any().unbind())
    }

    /// `other - self`: micrograd's `other + (-self)`, which Python turns into
    /// `(-self) + other`.
    fn __rsub__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(other) = operand(other)? else {
            return Ok(py.NotImplemented());
        };
        let negated = negate(slf)?;
        let other = lift(slf, other)?;
        Ok(binary(Op::Add, &negated, &other)?.into_any().unbind())
    }

    /// `self / other`: micrograd's `self * other**-1`.
    fn __truediv__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let inverse = match operand(other)? {
            None => return Ok(py.NotImplemented()),
            Some(Operand::Node(v)) => power(&v, Num::Int(-1))?,
            Some(Operand::Num(n)) => leaf(py, pow(py, &n, &Num::Int(-1))?, device_of(slf)?)?,
        };
        Ok(binary(Op::Mul, slf, &inverse)?.into_any().unbind())
    }

    /// `other / self`: micrograd's `other * self**-1`, which Python turns into
    /// `self**-1 * other`.
    fn __rtruediv__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let Some(other) = operand(other)? else {
            return Ok(py.NotImplemented());
        };
        let inverse = power(slf, Num::Int(-1))?;
        let other = lift(slf, other)?;
        Ok(binary(Op::Mul, &inverse, &other)?.into_any().unbind())
    }

    /// `max(0, self)`: micrograd's `0 if self.data < 0 else self.data`.
    fn relu<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Value>> {
        let py = slf.py();
        let data = {
            let x = slf.try_borrow()?;
            if is_negative(py, &x.data)? {
                Num::Int(0)
            } else {
                x.data.clone_ref(py)
            }
        };
        unary(slf, Op::Relu, data)
    }

    /// `tanh(self)`, as `math.tanh` computes it (micrograd's lecture writes
    /// `(e^2x - 1)/(e^2x + 1)`, which overflows above x ≈ 355); gradient `1 - t**2`.
    fn tanh<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Value>> {
        let py = slf.py();
        let t = match &slf.try_borrow()?.data {
            Num::Int(i) => (*i as f64).tanh(),
            Num::Float(x) => x.tanh(),
            Num::Obj(o) => math_of(py, "tanh", o)?,
        };
        unary(slf, Op::Tanh(t), Num::Float(t))
    }

    /// `e**self`, as `math.exp` computes it (an `OverflowError` past ~709.78, as there);
    /// gradient `out.data * out.grad`.
    fn exp<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Value>> {
        let py = slf.py();
        let e = match &slf.try_borrow()?.data {
            Num::Int(i) => checked_exp(*i as f64)?,
            Num::Float(x) => checked_exp(*x)?,
            Num::Obj(o) => math_of(py, "exp", o)?,
        };
        unary(slf, Op::Exp, Num::Float(e))
    }

    /// Backpropagation from this value: sets `self.grad = 1` and adds, into the `.grad`
    /// of every value this one depends on, its derivative. Gradients accumulate across
    /// calls, as in micrograd (`zero_grad()` resets a module's).
    fn backward(slf: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let topo = topological_order(slf)?;
        slf.try_borrow_mut()?.grad = Num::Int(1);
        for v in topo.iter().rev() {
            backward_step(py, v)?;
        }
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for child in &self.prev {
            visit.call(child)?;
        }
        for n in [&self.data, &self.grad] {
            if let Num::Obj(o) = n {
                visit.call(o)?;
            }
        }
        if let Op::Pow(Num::Obj(o)) = &self.op {
            visit.call(o)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.prev = [None, None];
    }
}

/// `math.exp(x)`: an infinite result from a finite `x` is an `OverflowError`.
fn checked_exp(x: f64) -> PyResult<f64> {
    let e = x.exp();
    if e.is_infinite() && x.is_finite() {
        return Err(PyOverflowError::new_err("math range error"));
    }
    Ok(e)
}

/// Operands of nodes being freed, waiting their turn (see `Drop for Value`).
struct Unlink {
    pending: RefCell<Vec<Py<Value>>>,
    draining: Cell<bool>,
}

thread_local! {
    static UNLINK: Unlink = const {
        Unlink { pending: RefCell::new(Vec::new()), draining: Cell::new(false) }
    };
}

impl Drop for Value {
    /// Frees a graph iteratively. Dropping the last reference to the root of a chain
    /// (a `sum` of 100 000 values) would otherwise free each node from inside its
    /// parent's deallocator, one C stack frame per node, and overflow the stack; here
    /// the outermost drop frees the operands one by one from a queue.
    fn drop(&mut self) {
        let [a, b] = std::mem::take(&mut self.prev);
        if a.is_none() {
            return;
        }
        // During thread teardown the queue may be gone: then the operands drop here.
        let _ = UNLINK.try_with(move |u| {
            u.pending.borrow_mut().extend(a.into_iter().chain(b));
            if u.draining.replace(true) {
                return; // an outer drop is draining the queue
            }
            loop {
                let next = u.pending.borrow_mut().pop();
                match next {
                    Some(v) => drop(v),
                    None => break,
                }
            }
            u.draining.set(false);
        });
    }
}
