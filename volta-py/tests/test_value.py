"""`volta.Value` and `volta.nn`'s Neuron/Layer/MLP against micrograd 0.1.0 (PyPI).

micrograd keeps a node's operands in a Python `set`, whose iteration order follows
memory addresses, and its backward pass visits them in that order; Volta visits them in
operand order (self, then other). The order changes only how three or more gradient
terms are summed, so the main property test runs micrograd with its `_prev` made
insertion-ordered (`ordered_micrograd`): then every node must agree to the last bit,
repr for repr (ints staying ints, the same exceptions). A second property compares with
stock micrograd to 1e-12, on graphs whose gradient terms are all positive (so the
last-bit differences of a different summation order cannot be amplified by
cancellation).

micrograd 0.1.0 has no `tanh`/`exp` (they come from the lecture version); the
reference ones below are the lecture's, with `math.tanh` for its
`(e^2x - 1)/(e^2x + 1)`, as Volta computes it.
"""

import contextlib
import math
import random
import sys

import micrograd.engine as mg
import micrograd.nn as mg_nn
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from volta import Device, Value
from volta.nn import MLP, Layer, Neuron
from volta.nn.micrograd import Module

# --- references --------------------------------------------------------------------


def mg_tanh(self):
    """The lecture's `Value.tanh`, with t = math.tanh(x)."""
    t = math.tanh(self.data)
    out = mg.Value(t, (self,), "tanh")

    def _backward():
        self.grad += (1 - t**2) * out.grad

    out._backward = _backward
    return out


def mg_exp(self):
    """The lecture's `Value.exp`."""
    out = mg.Value(math.exp(self.data), (self,), "exp")

    def _backward():
        self.grad += out.data * out.grad

    out._backward = _backward
    return out


@contextlib.contextmanager
def ordered_micrograd():
    """micrograd whose `_prev` iterates in operand order (a dict used as a set)."""
    init = mg.Value.__init__

    def ordered_init(self, data, _children=(), _op=""):
        init(self, data, _children, _op)
        self._prev = dict.fromkeys(_children)

    mg.Value.__init__ = ordered_init
    try:
        yield
    finally:
        mg.Value.__init__ = init


VOLTA = (Value, Value.tanh, Value.exp)
MICROGRAD = (mg.Value, mg_tanh, mg_exp)


def run(engine, leaves, program):
    """Builds the graph `program` describes; returns every node, the root last."""
    V, tanh, exp = engine
    nodes = [V(x) for x in leaves]
    for op, i, j, c in program:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        r = {
            "add": lambda: a + b,
            "addc": lambda: a + c,
            "radd": lambda: c + a,
            "sub": lambda: a - b,
            "subc": lambda: a - c,
            "rsub": lambda: c - a,
            "mul": lambda: a * b,
            "mulc": lambda: a * c,
            "rmul": lambda: c * a,
            "div": lambda: a / b,
            "divc": lambda: a / c,
            "rdiv": lambda: c / a,
            "neg": lambda: -a,
            "pow": lambda: a**c,
            "relu": lambda: a.relu(),
            "tanh": lambda: tanh(a),
            "exp": lambda: exp(a),
        }[op]()
        nodes.append(r)
    return nodes


def safe_repr(v):
    try:
        return repr(v)
    except ValueError as e:  # an int past Python's 4300-digit str limit
        return type(e).__name__


def outcome(engine, leaves, program):
    """What a run gives: the reprs of all nodes after backward, or where it raised."""
    try:
        nodes = run(engine, leaves, program)
    except Exception as e:  # noqa: BLE001 - the exception's type is the outcome
        return ("forward raised", type(e))
    try:
        nodes[-1].backward()
    except Exception as e:  # noqa: BLE001
        return ("backward raised", type(e))
    return [safe_repr(n) for n in nodes]


# --- strategies --------------------------------------------------------------------

numbers = st.one_of(
    st.integers(-3, 3),
    st.floats(-3, 3, allow_nan=False),
    st.sampled_from([0.0, -0.0, 0.5, 1e-300, 1e300]),
)
exponents = st.one_of(
    st.integers(-2, 3),
    st.floats(-2, 3, allow_nan=False),
    st.sampled_from([0.5, -0.5, 1.5, 2.0]),
)
ops = st.sampled_from(
    "add addc radd sub subc rsub mul mulc rmul div divc rdiv neg pow relu tanh exp".split()
)


@st.composite
def step(draw):
    op = draw(ops)
    c = draw(exponents if op == "pow" else numbers)
    return op, draw(st.integers(0, 100)), draw(st.integers(0, 100)), c


@settings(max_examples=400, deadline=None)
@given(leaves=st.lists(numbers, min_size=1, max_size=4), program=st.lists(step(), max_size=12))
def test_matches_micrograd_bit_for_bit(leaves, program):
    ours = outcome(VOLTA, leaves, program)
    with ordered_micrograd():
        theirs = outcome(MICROGRAD, leaves, program)
    assert ours == theirs


@st.composite
def positive_step(draw):
    op = draw(st.sampled_from("add addc radd mul mulc rmul pow relu tanh exp".split()))
    if op == "pow":
        c = draw(st.one_of(st.integers(1, 3), st.floats(1, 3)))
    else:
        c = draw(st.floats(0.1, 2.0))
    return op, draw(st.integers(0, 100)), draw(st.integers(0, 100)), c


@settings(max_examples=300, deadline=None)
@given(
    leaves=st.lists(st.floats(0.1, 2.0), min_size=1, max_size=4),
    program=st.lists(positive_step(), min_size=1, max_size=16),
)
def test_matches_stock_micrograd_to_1e_12(leaves, program):
    try:
        theirs = run(MICROGRAD, leaves, program)
        theirs[-1].backward()
    except OverflowError:
        assume(False)
    assume(all(math.isfinite(v.data) and math.isfinite(v.grad) for v in theirs))
    ours = run(VOLTA, leaves, program)
    ours[-1].backward()
    for a, b in zip(ours, theirs):
        assert math.isclose(a.data, b.data, rel_tol=1e-12, abs_tol=1e-300)
        assert math.isclose(a.grad, b.grad, rel_tol=1e-12, abs_tol=1e-300)


# --- micrograd's README and tests --------------------------------------------------


def readme_example(V):
    a = V(-4.0)
    b = V(2.0)
    c = a + b
    d = a * b + b**3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    g.backward()
    return a, b, g


def test_readme_example():
    a, b, g = readme_example(Value)
    assert f"{g.data:.4f}" == "24.7041"
    assert f"{a.grad:.4f}" == "138.8338"
    assert f"{b.grad:.4f}" == "645.5773"
    ma, mb, mg_ = readme_example(mg.Value)
    assert g.data == mg_.data
    assert math.isclose(a.grad, ma.grad, rel_tol=1e-12)
    assert math.isclose(b.grad, mb.grad, rel_tol=1e-12)


def test_sanity_check():  # micrograd's test_engine.py, against micrograd itself
    def sanity(V):
        x = V(-4.0)
        z = 2 * x + 2 + x
        q = z.relu() + z * x
        h = (z * z).relu()
        y = h + q + q * x
        y.backward()
        return x, y

    (x, y), (mx, my) = sanity(Value), sanity(mg.Value)
    assert (y.data, x.grad) == (my.data, mx.grad) == (-20.0, 46.0)


# --- repr, ints and other numbers --------------------------------------------------


def test_repr_keeps_ints():
    assert repr(Value(2)) == "Value(data=2, grad=0)"
    assert repr(Value(2.0)) == "Value(data=2.0, grad=0)"
    x = Value(3)
    y = x * x + 1
    y.backward()
    assert repr(x) == repr(mg_square_plus_one()) == "Value(data=3, grad=6)"
    assert repr(y) == "Value(data=10, grad=1)"
    assert type(x.data) is int and type(x.grad) is int


def mg_square_plus_one():
    x = mg.Value(3)
    (x * x + 1).backward()
    return x


@pytest.mark.parametrize(
    "make",
    [
        lambda V: V(True) + 1,
        lambda V: V(2**70) * 3,
        lambda V: V(2) ** 70,
        lambda V: V(-8.0) ** 0.5,
        lambda V: V(1e-320) * 1e-10,
        lambda V: V(float("inf")) - V(float("inf")),
        lambda V: V(-0.0).relu(),
        lambda V: (V(2) / 4) ** -1,
        lambda V: V(np.float64(1.5)) * np.float64(2.0),
        lambda V: V(0.1) + 0.2,
    ],
)
def test_repr_matches_micrograd(make):
    def build(V):
        out = make(V)
        nodes = [out, *out._prev]
        with contextlib.suppress(TypeError):  # complex has no ReLU order
            out.backward()
        return [repr(n) for n in nodes]

    with ordered_micrograd():
        theirs = build(mg.Value)
    assert sorted(build(Value)) == sorted(theirs)


def test_numpy_scalars_are_numbers():
    v = Value(np.float64(1.25))
    assert type(v.data) is float and v.data == 1.25
    w = np.int64(-1) * v  # numpy hands the Value to Python's int * Value
    assert isinstance(w, Value) and w.data == -1.25
    assert isinstance(np.float64(2.0) * v, Value)


@pytest.mark.parametrize(
    "expr, exc",
    [
        (lambda: Value(0.0) ** -1, ZeroDivisionError),
        (lambda: Value(1) / 0, ZeroDivisionError),
        (lambda: Value(1e200) ** 2, OverflowError),
        (lambda: Value(1000.0).exp(), OverflowError),
        (lambda: (Value(-8.0) ** 0.5).relu(), TypeError),
    ],
)
def test_python_errors(expr, exc):
    with pytest.raises(exc):
        expr()


def test_non_numbers_raise_type_error():
    v = Value(1.0)
    for bad in ["x", None, [1.0], object()]:
        with pytest.raises(TypeError):
            v + bad
        with pytest.raises(TypeError):
            bad * v
        with pytest.raises(TypeError):
            v - bad
        with pytest.raises(TypeError):
            bad / v
        with pytest.raises(TypeError):
            Value(bad)
    with pytest.raises(TypeError, match="only supporting int/float powers"):
        v ** Value(2.0)
    with pytest.raises(TypeError, match="only supporting int/float powers"):
        v ** np.int64(2)  # not an int, as micrograd's assert sees it
    with pytest.raises(TypeError):
        2**v  # micrograd has no __rpow__
    with pytest.raises(TypeError):
        pow(v, 2, 3)
    with pytest.raises(TypeError):
        v.data = "x"
    with pytest.raises(TypeError):
        v.grad = None
    with pytest.raises(TypeError):
        Value()


# --- the graph -----------------------------------------------------------------------


def test_data_and_grad_are_settable():
    a, b = Value(2.0), Value(3.0)
    c = a * b
    a.data = 5  # micrograd reads operands' data at backward time
    c.backward()
    assert b.grad == 5 and a.grad == 3.0
    a.grad = 0
    assert repr(a) == "Value(data=5, grad=0)"


def test_backward_accumulates_and_resets_root():
    x = Value(2.0)
    y = x * x
    y.backward()
    y.backward()
    assert x.grad == 8.0 and y.grad == 1


def test_prev_and_op():
    a, b = Value(1.0), Value(2.0)
    assert a._prev == set() and a._op == ""
    assert (a + b)._prev == {a, b} and (a + b)._op == "+"
    assert (a * b)._op == "*"
    assert (a**2)._op == "**2" and (a**0.5)._op == "**0.5"
    assert a.relu()._op == "ReLU" and a.tanh()._op == "tanh" and a.exp()._op == "exp"
    assert (a + a)._prev == {a}


def test_tanh_and_exp():
    x = Value(0.5)
    y = x.tanh() * x.exp()
    y.backward()
    t, e = math.tanh(0.5), math.exp(0.5)
    assert y.data == t * e
    assert x.grad == (1 - t**2) * e + e * t


def test_deep_graph():
    # micrograd's recursive topological sort stops at Python's recursion limit; this
    # one does not, and freeing the chain does not recurse either.
    x = Value(1.0)
    refs = sys.getrefcount(x)
    y = x
    for _ in range(200_000):
        y = y + x
    y.backward()
    assert y.data == 200_001.0 and x.grad == 200_001
    del y
    assert sys.getrefcount(x) == refs


# --- devices -----------------------------------------------------------------------


def test_device_defaults_to_cpu_and_is_kept():
    assert Value(1.0).device == Device.cpu()
    v = Value(1.0, device="cpu")
    w = Value(2.0, device=Device.cpu())
    assert (v * w + 1).device == Device.cpu()
    with pytest.raises(ValueError):
        Value(1.0, device="tpu")
    with pytest.raises(TypeError):
        Value(1.0, device=3)


@pytest.mark.skipif(not Device.is_gpu_available(), reason="no GPU adapter")
def test_gpu_values_compute_like_cpu_ones():
    def grads(device):
        a, b = Value(-4.0, device=device), Value(2.0, device=device)
        c = (a * b + b**3).relu() / (a - 1)
        c.backward()
        return c, (c.data, a.grad, b.grad)

    c, on_gpu = grads(Device.gpu())
    assert c.device == Device.gpu() and (c + Value(1.0)).device == Device.gpu()
    assert on_gpu == grads("cpu")[1]
    mlp = MLP(2, [3, 1], device="gpu")
    assert mlp.device == Device.gpu()
    assert all(p.device == Device.gpu() for p in mlp.parameters())


# --- nn ------------------------------------------------------------------------------


def test_mlp_matches_micrograd():
    random.seed(1234)
    ours = MLP(3, [4, 4, 1])
    random.seed(1234)
    theirs = mg_nn.MLP(3, [4, 4, 1])
    assert repr(ours) == repr(theirs)
    assert [p.data for p in ours.parameters()] == [p.data for p in theirs.parameters()]
    assert [repr(p) for p in ours.parameters()] == [repr(p) for p in theirs.parameters()]

    x = [1.0, -2.0, 3.0]
    out, mout = ours(x), theirs(x)
    assert isinstance(out, Value) and out.data == mout.data
    out.backward()
    mout.backward()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert math.isclose(p.grad, q.grad, rel_tol=1e-12, abs_tol=1e-300)
    ours.zero_grad()
    assert all(repr(p.grad) == "0" for p in ours.parameters())


def test_neuron_and_layer():
    random.seed(7)
    n = Neuron(2, nonlin=False)
    assert repr(n) == "LinearNeuron(2)" and n.nonlin is False
    assert len(n.parameters()) == 3 and repr(n.b) == "Value(data=0, grad=0)"
    assert n([Value(1.0), 2.0]).data == n.w[0].data + 2.0 * n.w[1].data
    layer = Layer(2, 3)
    assert repr(layer) == "Layer of [ReLUNeuron(2), ReLUNeuron(2), ReLUNeuron(2)]"
    out = layer([1.0, 1.0])
    assert isinstance(out, list) and len(out) == 3
    assert all(v.data >= 0 for v in out)
    assert isinstance(Layer(2, 1)([1.0, 1.0]), Value)
    assert Module().parameters() == []
    assert layer.device == Device.cpu() and n.device == Device.cpu()
