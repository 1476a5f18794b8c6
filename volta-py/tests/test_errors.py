"""Every documented bad input raises its documented exception, never pyo3's bare
`PanicException` and never a crash:

- shapes that do not fit → `volta.ShapeError` (a `ValueError`) naming the op and
  both shapes;
- a wrong dtype, float64 on the GPU, an unsupported operand → `TypeError`;
- CPU and GPU tensors mixed → `ValueError`;
- dims out of range → `IndexError`;
- malformed safetensors files → `volta.FileFormatError` naming the file and an offset;
- bad hyperparameters → `ValueError`;
- `backward()` without grad or of a non-scalar, in-place updates of leaves that
  require grad → `RuntimeError`.

A `VoltaError` that is not one of its subclasses means a panic inside Volta that
input checking should have prevented, so the property tests at the end refuse it too.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import volta
import volta.functional as F
import volta.nn as nn
import volta.optim as optim
from conftest import fast, requires_gpu

# ---- the exception classes -------------------------------------------------------------


def test_exception_hierarchy():
    assert issubclass(volta.ShapeError, volta.VoltaError) and issubclass(volta.ShapeError, ValueError)
    assert issubclass(volta.FileFormatError, volta.VoltaError) and issubclass(volta.FileFormatError, ValueError)
    assert issubclass(volta.GpuError, volta.VoltaError) and issubclass(volta.GpuError, RuntimeError)
    assert issubclass(volta.OutOfMemoryError, volta.GpuError) and issubclass(volta.OutOfMemoryError, MemoryError)
    assert issubclass(volta.DeviceLostError, volta.GpuError)
    assert issubclass(volta.VoltaError, Exception)
    # The same classes from volta.errors, where the Rust side raises them from.
    import volta.errors as errors

    assert errors.OutOfMemoryError is volta.OutOfMemoryError
    assert errors.ShapeError is volta.ShapeError
    err = volta.OutOfMemoryError("GPU out of memory")
    assert isinstance(err, MemoryError) and isinstance(err, volta.GpuError) and isinstance(err, volta.VoltaError)


def shape_error(fn, op, *shapes):
    """`fn()` raises `ShapeError` whose message names `op` and every shape."""
    with pytest.raises(volta.ShapeError) as info:
        fn()
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert op in msg, msg
    for s in shapes:
        assert str(list(s)) in msg, f"{list(s)} not in {msg!r}"
    return msg


# ---- shapes ------------------------------------------------------------------------------

BINARY_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "remainder": lambda a, b: a % b,
    "pow": lambda a, b: a**b,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


@pytest.mark.parametrize("op", sorted(BINARY_OPS))
def test_binary_shape_mismatch(op, device):
    a, b = volta.ones(2, 3, device=device), volta.ones(4, device=device)
    shape_error(lambda: BINARY_OPS[op](a, b), op, (2, 3), (4,))
    shape_error(lambda: BINARY_OPS[op](volta.ones(2, 1, 3, device=device), volta.ones(5, 2, device=device)), op, (2, 1, 3), (5, 2))
    # A list operand is checked the same way.
    shape_error(lambda: BINARY_OPS[op](a, [1.0, 2.0]), op, (2, 3), (2,))


def test_movement_and_joining_shape_errors(device):
    t = volta.ones(2, 3, device=device)
    shape_error(lambda: t @ volta.ones(4, 5, device=device), "matmul", (2, 3), (4, 5))
    shape_error(lambda: volta.ones(2, 2, 3, device=device) @ volta.ones(3, 3, 4, device=device), "matmul", (2, 2, 3), (3, 3, 4))
    shape_error(lambda: volta.ones(3, device=device) @ volta.ones(4, device=device), "matmul", (3,), (4,))
    shape_error(lambda: volta.tensor(1.0, device=device) @ t, "matmul", (), (2, 3))
    shape_error(lambda: t.reshape(4, 2), "reshape", (2, 3))
    shape_error(lambda: t.reshape(-1, 4), "reshape", (2, 3))
    shape_error(lambda: t.reshape(-1, -1), "reshape", (2, 3))
    shape_error(lambda: t.view(7), "reshape", (2, 3))
    shape_error(lambda: t.expand(4, 3), "expand", (2, 3))
    shape_error(lambda: t.expand(3), "expand", (2, 3))
    shape_error(lambda: t.expand_as(volta.ones(3, 3)), "expand", (2, 3))
    shape_error(lambda: volta.cat([t, volta.ones(3, 2, device=device)], 0), "cat", (2, 3), (3, 2))
    shape_error(lambda: volta.cat([t, volta.ones(3, device=device)]), "cat", (2, 3), (3,))
    shape_error(lambda: volta.stack([t, volta.ones(3, 2, device=device)]), "stack", (2, 3), (3, 2))
    shape_error(lambda: volta.where(volta.ones(2, device=device), t, 0.0), "where", (2,), (2, 3))
    shape_error(lambda: t.__iadd__(volta.ones(4, 2, 3, device=device)), "add_", (4, 2, 3), (2, 3))
    shape_error(lambda: t.copy_(volta.ones(3, 3, device=device)), "copy_", (2, 3), (3, 3))
    p = volta.ones(2, 3, device=device, requires_grad=True)
    shape_error(lambda: setattr(p, "grad", volta.ones(3, 2, device=device)), "grad", (3, 2), (2, 3))
    shape_error(lambda: setattr(p, "data", volta.ones(3, device=device)), "data", (3,), (2, 3))
    shape_error(lambda: (p * 2).backward(volta.ones(3, device=device)), "backward", (2, 3), (3,))


def test_functional_shape_errors(device):
    t = lambda *s: volta.ones(*s, device=device)  # noqa: E731
    x = t(1, 2, 5, 5)
    shape_error(lambda: F.conv2d(x, t(3, 3, 3, 3)), "conv2d", (1, 2, 5, 5), (3, 3, 3, 3))
    shape_error(lambda: F.conv2d(x, t(3, 2, 3)), "conv2d", (3, 2, 3))
    shape_error(lambda: F.conv2d(t(2, 5, 5), t(3, 2, 3, 3)), "conv2d", (2, 5, 5))
    shape_error(lambda: F.conv2d(x, t(3, 2, 3, 3), t(2)), "conv2d", (2,), (3,))
    shape_error(lambda: F.conv2d(x, t(3, 1, 3, 3), groups=2), "conv2d", (1, 2, 5, 5), (3, 1, 3, 3))
    shape_error(lambda: F.conv2d(x, t(2, 2, 6, 6)), "conv2d", (6, 6), (1, 2, 5, 5))
    shape_error(lambda: F.conv2d(x, t(2, 2, 3, 3), stride=0), "conv2d", (1, 2, 5, 5))
    shape_error(lambda: F.conv2d(x, t(2, 2, 3, 3), dilation=0), "conv2d", (1, 2, 5, 5))
    shape_error(lambda: F.max_pool2d(t(2, 5, 5), 2), "max_pool2d", (2, 5, 5))
    shape_error(lambda: F.avg_pool2d(x, 6), "avg_pool2d", (6, 6), (1, 2, 5, 5))
    shape_error(lambda: F.max_pool2d(x, 2, stride=0), "max_pool2d", (1, 2, 5, 5))
    shape_error(lambda: F.max_pool2d(x, 0), "max_pool2d", (1, 2, 5, 5))
    shape_error(lambda: F.layer_norm(t(2, 3), 4), "layer_norm", (4,), (2, 3))
    shape_error(lambda: F.layer_norm(t(2, 3), (2, 3, 1)), "layer_norm", (2, 3, 1), (2, 3))
    shape_error(lambda: F.layer_norm(t(2, 3), ()), "layer_norm", (), (2, 3))
    shape_error(lambda: F.layer_norm(t(2, 3), 3, t(4)), "layer_norm", (4,), (3,))
    shape_error(lambda: F.layer_norm(t(2, 3), 3, t(3), t(2)), "layer_norm", (2,), (3,))
    shape_error(lambda: F.rms_norm(t(2, 3), 3, t(3, 1)), "rms_norm", (3, 1), (3,))
    shape_error(lambda: F.batch_norm(t(2, 3), None, None, training=True), "batch_norm", (2, 3))
    shape_error(lambda: F.batch_norm(x, t(3), t(2), training=True), "batch_norm", (3,), (2,))
    shape_error(lambda: F.batch_norm(x, None, None, t(2), t(5), training=True), "batch_norm", (5,), (2,))
    shape_error(lambda: F.embedding([0, 1], t(4)), "embedding", (4,))
    shape_error(lambda: F.cross_entropy(t(2, 3, 4), [0, 1]), "cross_entropy", (2, 3, 4))
    shape_error(lambda: F.cross_entropy(t(2, 3), [0, 1, 2]), "cross_entropy", (2, 3), (3,))
    shape_error(lambda: F.nll_loss(t(2, 3), [[0], [1]]), "nll_loss", (2, 3), (2, 1))
    shape_error(lambda: F.mse_loss(t(2, 3), t(3, 2)), "mse_loss", (2, 3), (3, 2))
    shape_error(lambda: F.l1_loss(t(2, 3), t(3)), "l1_loss", (2, 3), (3,))
    shape_error(lambda: F.linear(t(2, 3), t(4, 2)), "linear", (2, 3), (4, 2))
    shape_error(lambda: F.linear(t(2, 3), t(3)), "linear", (2, 3), (3,))
    shape_error(lambda: F.linear(t(2, 3), t(4, 3), t(3)), "linear", (3,), (4,))


def test_load_state_dict_shape_mismatch():
    net = nn.Linear(3, 2)
    state = {"weight": volta.ones(2, 4), "bias": volta.ones(2)}
    shape_error(lambda: net.load_state_dict(state), "weight", (2, 4), (2, 3))
    with pytest.raises(KeyError, match="missing keys"):
        net.load_state_dict({"weight": volta.ones(2, 3)})


# ---- dtypes, devices, operands ------------------------------------------------------------


def test_mixed_dtypes_are_a_type_error():
    a, b = volta.ones(2), volta.ones(2, dtype="float64")
    for fn in [lambda: a + b, lambda: a @ b, lambda: volta.cat([a, b]), lambda: volta.where(a, a, b), lambda: F.mse_loss(a, b)]:
        with pytest.raises(TypeError, match="float32 and float64"):
            fn()
    with pytest.raises(TypeError, match="dtype"):
        volta.ones(2, dtype="float16") * volta.ones(2)
    p = volta.ones(2, requires_grad=True)
    with pytest.raises(TypeError):
        p.grad = b
    with pytest.raises(TypeError):
        F.layer_norm(volta.ones(2, 3), 3, volta.ones(3, dtype="float64"))
    with pytest.raises(TypeError):
        F.conv2d(volta.ones(1, 1, 3, 3), volta.ones(1, 1, 2, 2, dtype="float64"))


@pytest.mark.parametrize(
    "make",
    [
        lambda: volta.zeros(2, dtype="int32"),
        lambda: volta.tensor([1, 2], dtype=np.int64),
        lambda: volta.tensor(["a", "b"]),
        lambda: volta.tensor(None),
        lambda: volta.tensor([1j]),
        lambda: volta.tensor({"a": 1}),
        lambda: volta.ones(2).to(dtype="int8"),
        lambda: volta.randn(2.5),
        lambda: volta.ones(2) + "abc",
        lambda: volta.ones(2) * object(),
        lambda: "abc" - volta.ones(2),
        lambda: volta.ones(2) @ "x",
        lambda: volta.where(1.0, 2.0, 3.0),
        lambda: volta.ones(2).sum(dim="a"),
        lambda: volta.ones(2, 2)[True],
        lambda: volta.ones(3)[0.5],
        lambda: volta.ones(3)[[0.5]],
        lambda: volta.ones(3)[volta.tensor([0.5])],
        lambda: volta.ones(3).__setitem__(0, 1.0),
        lambda: len(volta.tensor(1.0)),
        lambda: volta.ones(2, device=3),
        lambda: volta.ones(2).to(5),
        lambda: volta.from_numpy([1.0, 2.0]),
        lambda: volta.save_file({"a": [1.0]}, "/tmp/never-written.safetensors"),
        lambda: volta.save_file({1: volta.ones(1)}, "/tmp/never-written.safetensors"),
        lambda: optim.SGD([np.ones(2)], lr=0.1),
    ],
)
def test_type_errors(make):
    with pytest.raises(TypeError):
        make()


@requires_gpu
def test_float64_on_the_gpu_is_a_type_error():
    for make in [
        lambda: volta.zeros(2, dtype="float64", device="gpu"),
        lambda: volta.tensor([1.0], dtype="float64", device="gpu"),
        lambda: volta.randn(2, dtype=np.float64, device="gpu"),
        lambda: volta.ones(2).to("gpu", "float64"),
        lambda: volta.ones(2, device="gpu").to(dtype="float64"),
        lambda: volta.ones(2, device="gpu").double(),
        lambda: volta.arange(3, dtype="float64", device="gpu"),
    ]:
        with pytest.raises(TypeError, match="float64"):
            make()
    # Without asking for float64, float64 data goes to the GPU as float32.
    assert volta.tensor(np.ones(2), device="gpu").dtype == "float32"
    assert volta.ones(2, dtype="float64").gpu().dtype == "float32"
    assert volta.ones(2, dtype="float64").to("gpu").dtype == "float32"


@requires_gpu
def test_mixing_devices_is_a_value_error():
    c, g = volta.ones(2, 3), volta.ones(2, 3, device="gpu")
    for fn in [
        lambda: c + g,
        lambda: g * c,
        lambda: c @ g.T,
        lambda: volta.cat([c, g]),
        lambda: volta.stack([g, c]),
        lambda: volta.where(c, g, 0.0),
        lambda: F.mse_loss(c, g),
        lambda: F.linear(c, g),
        lambda: F.conv2d(volta.ones(1, 1, 3, 3), volta.ones(1, 1, 2, 2, device="gpu")),
        lambda: F.layer_norm(c, 3, volta.ones(3, device="gpu")),
        lambda: F.batch_norm(volta.ones(2, 3, 2, 2), volta.zeros(3, device="gpu"), volta.ones(3), training=True),
    ]:
        with pytest.raises(ValueError, match="different devices") as info:
            fn()
        assert not isinstance(info.value, TypeError)
    p = volta.ones(2, 3, requires_grad=True)
    with pytest.raises(ValueError):
        p.grad = g
    with pytest.raises(ValueError, match="unknown device"):
        volta.ones(2, device="tpu")


# ---- dims out of range -----------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.sum(2),
        lambda t: t.sum(-3),
        lambda t: t.sum((0, 5)),
        lambda t: t.mean(3),
        lambda t: t.var(-4),
        lambda t: t.std(2),
        lambda t: t.amax(2),
        lambda t: t.amin(-3),
        lambda t: t.max(2),
        lambda t: t.min(-3),
        lambda t: t.argmax(2),
        lambda t: t.argmin(-3),
        lambda t: t.softmax(2),
        lambda t: t.log_softmax(-3),
        lambda t: t.transpose(0, 2),
        lambda t: t.permute(0, 2),
        lambda t: t.unsqueeze(3),
        lambda t: t.unsqueeze(-4),
        lambda t: t.squeeze(2),
        lambda t: t.flatten(0, 2),
        lambda t: t.size(2),
        lambda t: t.narrow(2, 0, 1),
        lambda t: t.narrow(1, 2, 2),
        lambda t: t.narrow(0, -3, 1),
        lambda t: t.split(1, 2),
        lambda t: t.chunk(2, -3),
        lambda t: volta.cat([t, t], 2),
        lambda t: volta.stack([t, t], 3),
        lambda t: volta.stack([t, t], -4),
        lambda t: t[2],
        lambda t: t[-3],
        lambda t: t[:, 3],
        lambda t: t[0, 0, 0],
        lambda t: t[[0, 2]],
        lambda t: t[:, [-4]],
        lambda t: t[..., 0, ...],
        lambda t: F.embedding([0, 5], volta.ones(5, 2)),
        lambda t: F.embedding([-1], volta.ones(5, 2)),
        lambda t: F.cross_entropy(t, [0, 3]),
        lambda t: F.nll_loss(t, [-1, 0]),
        # A 0-d tensor has no dims to index (but dim 0/-1 reduces its one element).
        lambda t: volta.tensor(1.0).size(0),
        lambda t: volta.tensor(1.0).narrow(0, 0, 1),
        lambda t: volta.tensor(1.0).split(1),
        lambda t: volta.tensor(1.0).chunk(1),
        lambda t: volta.cat([volta.tensor(1.0), volta.tensor(2.0)]),
        lambda t: volta.tensor(1.0).sum(1),
        lambda t: volta.tensor(1.0)[0],
    ],
)
def test_index_errors(fn, device):
    with pytest.raises(IndexError):
        fn(volta.ones(2, 3, device=device))


def test_zero_dim_tensors_take_dim_0_and_minus_1():
    # As in PyTorch: reductions and softmax of the one element.
    s = volta.tensor(2.0)
    for dim in (0, -1):
        assert s.sum(dim).item() == 2.0 and s.sum(dim).shape == ()
        assert s.mean(dim, keepdim=True).shape == ()
        assert s.amax(dim).item() == 2.0
        values, indices = s.max(dim)
        assert values.item() == 2.0 and indices.item() == 0.0
        assert s.argmin(dim).item() == 0.0
        assert s.softmax(dim).item() == 1.0 and s.log_softmax(dim).item() == 0.0
        assert s.transpose(dim, 0).item() == 2.0
        assert s.squeeze(dim).shape == ()
    g = volta.tensor(2.0, requires_grad=True)
    (g.softmax(0) * 3 + g.sum(-1) * 2).backward()
    assert g.grad.item() == 2.0


# ---- malformed safetensors files -----------------------------------------------------------


def _valid_file(tmp_path):
    path = tmp_path / "ok.safetensors"
    volta.save_file({"a": volta.arange(6.0).reshape(2, 3), "b": volta.ones(4)}, path)
    return path.read_bytes()


def _with_header(header, data=b"\0" * 16):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def _bad_files(good):
    n = struct.unpack("<Q", good[:8])[0]
    f32 = lambda shape, offsets: {"a": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}  # noqa: E731
    return {
        "empty": b"",
        "shorter than the length prefix": b"\x01\x02\x03",
        "garbage": bytes(np.random.default_rng(0).integers(0, 256, 200, dtype=np.uint8)),
        "truncated data": good[:-5],
        "truncated header": good[: 8 + n // 2],
        "header length past the end": struct.pack("<Q", 10_000) + good[8:],
        "huge header length": struct.pack("<Q", 2**62) + good[8:],
        "bad JSON": _with_header(b"{not json at all"),
        "not UTF-8": _with_header(b'{"a": "\xff\xfe"}'),
        "JSON not an object": _with_header(b"[1, 2, 3]"),
        "unknown dtype": _with_header({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8),
        "missing field": _with_header({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8),
        "offsets past the data": _with_header(f32([2, 2], [0, 1000])),
        "offsets not matching the shape": _with_header(f32([2, 2], [0, 12]), b"\0" * 12),
        "offsets reversed": _with_header(f32([1], [8, 4])),
        "data left over": _with_header(f32([2], [0, 8]), b"\0" * 16),
        "overlapping tensors": _with_header(
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
            b"\0" * 12,
        ),
    }


@pytest.mark.parametrize("case", list(_bad_files(b"\0" * 64).keys()))
def test_malformed_safetensors(case, tmp_path):
    files = _bad_files(_valid_file(tmp_path))
    path = tmp_path / f"{case.replace(' ', '_')}.safetensors"
    path.write_bytes(files[case])
    for load in (volta.load_file, volta.load_metadata):
        with pytest.raises(volta.FileFormatError) as info:
            load(path)
        msg = str(info.value)
        assert isinstance(info.value, ValueError)
        assert str(path) in msg, msg
        assert "offset" in msg, msg


def test_unsupported_dtype_in_a_safetensors_file(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "i16.safetensors"
    st_numpy.save_file({"ok": np.ones(2, np.float32), "x": np.ones(3, np.int16)}, str(path))
    with pytest.raises(volta.FileFormatError, match="offset") as info:
        volta.load_file(path)
    assert str(path) in str(info.value) and "x" in str(info.value)


def test_missing_safetensors_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        volta.load_file(tmp_path / "nope.safetensors")
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        volta.load_metadata(tmp_path / "nope.safetensors")
    with pytest.raises(IsADirectoryError):
        volta.load_metadata(tmp_path)
    with pytest.raises(FileNotFoundError):
        volta.save_file({"a": volta.ones(1)}, tmp_path / "no" / "such" / "dir.safetensors")


# ---- bad hyperparameters and arguments ---------------------------------------------------

P = [volta.ones(2, requires_grad=True)]


@pytest.mark.parametrize(
    "make",
    [
        # optimisers
        lambda: optim.SGD(P, lr=-0.1),
        lambda: optim.SGD(P, lr=0.1, momentum=-0.5),
        lambda: optim.SGD(P, lr=0.1, weight_decay=-1.0),
        lambda: optim.SGD(P, lr=0.1, dampening=0.1),
        lambda: optim.SGD(P, lr=0.1, nesterov=True),
        lambda: optim.Adam(P, lr=-1e-3),
        lambda: optim.Adam(P, eps=-1e-8),
        lambda: optim.Adam(P, betas=(1.0, 0.999)),
        lambda: optim.Adam(P, betas=(0.9, -0.1)),
        lambda: optim.Adam(P, weight_decay=-0.1),
        lambda: optim.AdamW(P, lr=-1.0),
        lambda: optim.AdamW(P, betas=(0.9, 1.5)),
        lambda: optim.SGD([], lr=0.1),
        lambda: optim.Adam([volta.ones(2)]),
        # layers
        lambda: nn.Dropout(1.5),
        lambda: nn.Dropout(-0.1),
        lambda: nn.BatchNorm2d(3, eps=-1e-5),
        lambda: nn.BatchNorm2d(3, eps=float("nan")),
        lambda: nn.LayerNorm(3, eps=-1e-5),
        lambda: nn.LayerNorm(3, eps=float("inf")),
        lambda: nn.RMSNorm(3, eps=-1.0),
        lambda: nn.Conv2d(3, 4, 3, groups=2),
        lambda: nn.Conv2d(4, 4, 3, groups=0),
        # functional
        lambda: F.dropout(volta.ones(2), -0.1),
        lambda: F.dropout(volta.ones(2), 1.1),
        lambda: F.dropout(volta.ones(2), float("nan")),
        lambda: F.layer_norm(volta.ones(2, 3), 3, eps=-1e-5),
        lambda: F.layer_norm(volta.ones(2, 3), 3, eps=float("nan")),
        lambda: F.rms_norm(volta.ones(2, 3), 3, eps=-1.0),
        lambda: F.batch_norm(volta.ones(2, 3, 2, 2), None, None, training=True, eps=-1.0),
        lambda: F.batch_norm(volta.ones(2, 3, 2, 2), None, None, training=True, momentum=1.5),
        lambda: F.batch_norm(volta.ones(1, 3, 1, 1), None, None, training=True),
        lambda: F.batch_norm(volta.ones(2, 3, 2, 2), None, None, training=False),
        lambda: F.cross_entropy(volta.ones(2, 3), [0, 1], label_smoothing=-0.1),
        lambda: F.cross_entropy(volta.ones(2, 3), [0, 1], label_smoothing=1.5),
        lambda: F.cross_entropy(volta.ones(2, 3), [0, 1], reduction="avg"),
        lambda: F.mse_loss(volta.ones(2), volta.ones(2), reduction="max"),
        lambda: F.max_pool2d(volta.ones(1, 1, 4, 4), 2, padding=2),
        lambda: F.avg_pool2d(volta.ones(1, 1, 4, 4), 3, padding=2),
        lambda: F.max_pool2d(volta.ones(1, 1, 4, 4), 2, padding=-1),
        lambda: F.conv2d(volta.ones(1, 1, 4, 4), volta.ones(1, 1, 2, 2), padding=-1),
        lambda: F.conv2d(volta.ones(1, 1, 4, 4), volta.ones(1, 1, 2, 2), stride=(1, 1, 1)),
        lambda: F.layer_norm(volta.ones(2, 3), "3"),
        # tensors
        lambda: volta.zeros(-1),
        lambda: volta.ones(2, -3),
        lambda: volta.full((2, -1), 1.0),
        lambda: volta.zeros(2**40, 2**40),
        lambda: volta.arange(0, 1, 0),
        lambda: volta.arange(0, float("inf")),
        lambda: volta.arange(float("nan")),
        lambda: volta.linspace(0, 1, -1),
        lambda: volta.eye(-1),
        lambda: volta.eye(2, -2),
        lambda: volta.uniform((2,), 1.0, 0.0),
        lambda: volta.ones(3).clamp(1.0, 0.0),
        lambda: volta.ones(3).split(0),
        lambda: volta.ones(3).split(-1),
        lambda: volta.ones(3).chunk(0),
        lambda: volta.ones(3).narrow(0, 1, -1),
        lambda: volta.ones(3, 4).flatten(1, 0),
        lambda: volta.ones(3, 4).permute(0, 0),
        lambda: volta.ones(3, 4).permute(0),
        lambda: volta.ones(3, 4).sum((0, 0)),
        lambda: volta.ones(3, 4).sum((1, -1)),
        lambda: volta.ones(3, 4).expand(-2, 4),
        lambda: volta.ones(3, 4).expand(-1, 3, 4),
        lambda: volta.ones(2, 3, 4).t(),
        lambda: volta.ones(3).mT,
        lambda: volta.ones(3)[::-1],
        lambda: volta.ones(3)[::0],
        lambda: volta.ones(3).item(),
        lambda: bool(volta.ones(3)),
        lambda: float(volta.ones(2)),
        lambda: volta.zeros(0).mean(),
        lambda: volta.zeros(2, 0).mean(1),
        lambda: volta.zeros(0).amax(),
        lambda: volta.zeros(2, 0).max(1),
        lambda: volta.zeros(0).argmax(),
        lambda: volta.cat([]),
        lambda: volta.stack([]),
        lambda: volta.tensor([[1.0, 2.0], [3.0]]),
    ],
)
def test_value_errors(make):
    with pytest.raises(ValueError) as info:
        make()
    assert not isinstance(info.value, volta.FileFormatError)


@pytest.mark.parametrize("n", [2**50, 2**62])
def test_tensors_too_large_for_the_host_raise_memory_error(n):
    # Rust aborts the process when an allocation fails; Volta must raise instead.
    for make in [
        lambda: volta.zeros(n),
        lambda: volta.full((n,), 1.0),
        lambda: volta.randn(n),
        lambda: volta.arange(n),
        lambda: volta.arange(0, 1e30, 1e-30),
        lambda: volta.linspace(0, 1, n),
        lambda: volta.eye(n),
    ]:
        with pytest.raises((MemoryError, ValueError)):
            make()


# ---- autograd misuse ---------------------------------------------------------------------


def test_backward_errors(device):
    a = volta.ones(2, 3, device=device)
    with pytest.raises(RuntimeError, match="does not require grad"):
        a.sum().backward()
    p = volta.ones(2, 3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="one-element"):
        (p * 2).backward()
    with volta.no_grad():
        q = p * 2
    with pytest.raises(RuntimeError, match="does not require grad"):
        q.sum().backward()
    with pytest.raises(RuntimeError):
        (p * 2).requires_grad = False  # not a leaf


@pytest.mark.parametrize(
    "update",
    [
        lambda p: p.__iadd__(1.0),
        lambda p: p.__isub__(1.0),
        lambda p: p.__imul__(2.0),
        lambda p: p.__itruediv__(2.0),
        lambda p: p.add_(1.0),
        lambda p: p.sub_(1.0),
        lambda p: p.mul_(2.0),
        lambda p: p.div_(2.0),
        lambda p: p.zero_(),
        lambda p: p.fill_(3.0),
        lambda p: p.copy_(volta.zeros(2, 3)),
    ],
)
def test_in_place_update_of_a_leaf_requiring_grad(update):
    p = volta.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        update(p)
    np.testing.assert_array_equal(p.numpy(), np.ones((2, 3)))  # unchanged
    with volta.no_grad():
        update(p)  # fine there


# ---- random shapes: numpy's answer or a documented exception, never a panic ----------------

DOCUMENTED = (volta.ShapeError, IndexError, ValueError, TypeError)


def _not_a_panic(e: BaseException) -> None:
    assert type(e).__name__ != "PanicException", repr(e)
    assert type(e) is not volta.VoltaError, f"an unchecked panic inside Volta: {e!r}"
    assert isinstance(e, DOCUMENTED), repr(e)


small_shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3)


@fast
@given(a=small_shapes, b=small_shapes)
def test_random_shapes_binary_and_matmul(a, b):
    x, y = np.ones(a), np.full(b, 2.0)
    for fn, ref in [(lambda p, q: p + q, np.add), (lambda p, q: p @ q, np.matmul)]:
        try:
            expected = ref(x, y)
        except ValueError:
            with pytest.raises(volta.ShapeError):
                fn(volta.tensor(x), volta.tensor(y))
            continue
        try:
            out = fn(volta.tensor(x), volta.tensor(y))
        except BaseException as e:  # noqa: BLE001
            _not_a_panic(e)
            raise AssertionError(f"numpy accepts shapes {a} and {b} but Volta raised {e!r}")
        np.testing.assert_array_equal(out.numpy(), expected)


@fast
@given(shape=small_shapes, spec=st.lists(st.integers(-2, 4), max_size=4), dim=st.integers(-5, 4))
def test_random_shapes_movement(shape, spec, dim):
    x = np.arange(float(np.prod(shape))).reshape(shape)
    t = volta.tensor(x)
    calls = [
        (lambda: t.reshape(*spec) if spec else t.reshape(()), lambda: x.reshape(spec)),
        (lambda: t.sum(dim), lambda: x.sum(dim) if x.ndim else x),
        (lambda: t.unsqueeze(dim), lambda: np.expand_dims(x, dim)),
        (lambda: volta.cat([t, t], dim), lambda: np.concatenate([x, x], dim)),
        (lambda: volta.stack([t, t], dim), lambda: np.stack([x, x], dim)),
        (lambda: t.softmax(dim), None),
        (lambda: t.flatten(min(dim, 0)), None),
        (lambda: t.transpose(dim, 0), None),
        (lambda: t.expand(*spec), None),
        (lambda: t.narrow(dim, 0, 1), None),
        (lambda: t.max(dim), None),
        (lambda: t.argmax(dim), None),
        (lambda: t[tuple(slice(None, s) for s in spec)], None),
    ]
    for fn, ref in calls:
        try:
            out = fn()
        except BaseException as e:  # noqa: BLE001
            _not_a_panic(e)
            continue
        if ref is not None:
            try:
                expected = ref()
            except Exception:  # noqa: BLE001 - numpy refuses where Volta is lenient (0-d dims)
                continue
            np.testing.assert_array_equal(out.numpy(), expected)


@fast
@given(
    n=st.integers(0, 2),
    c=st.integers(1, 3),
    h=st.integers(0, 5),
    k=st.integers(0, 4),
    stride=st.integers(0, 3),
    padding=st.integers(0, 2),
    dilation=st.integers(0, 2),
    groups=st.integers(1, 3),
)
def test_random_conv_and_pool_arguments(n, c, h, k, stride, padding, dilation, groups):
    x = volta.ones(n, c, h, h + 1)
    w = volta.ones(2 * groups, c // groups if c % groups == 0 else c, k, k)
    for fn in [
        lambda: F.conv2d(x, w, None, stride, padding, dilation, groups),
        lambda: F.max_pool2d(x, k, stride, padding),
        lambda: F.avg_pool2d(x, k, stride if stride else None, padding),
    ]:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            _not_a_panic(e)
