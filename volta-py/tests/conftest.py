"""Shared fixtures and helpers of the `volta.Tensor` suites (test_tensor, test_nn,
test_errors).

- `device`: every test that takes it runs on "cpu" and on "gpu"; the GPU run is
  skipped, saying why, when no adapter opens (CI's GPU is Mesa's lavapipe, a
  software Vulkan, so GPU shapes stay small).
- `gradcheck`: autograd against central finite differences, in float64 on the CPU.
- `assert_close`: a tensor (or array) against an expected array, shapes included.
- `cpu_vs_gpu`: the same computation on both devices in float32, values and grads.

The helpers are plain functions (imported by the test files with
`from conftest import ...`) so that a table of cases can use them at collection time.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import volta
import volta.functional  # noqa: F401  (loads the submodules the tests use)
import volta.nn  # noqa: F401
import volta.optim  # noqa: F401

# Hypothesis, for these suites only (a profile would change test_value.py's too): few
# examples (the suite must stay fast on two cores) and no deadline (the first call of
# a GPU kernel compiles its shader).
# VOLTA_TEST_EXAMPLES=500 searches deeper, locally.
fast = settings(
    max_examples=int(os.environ.get("VOLTA_TEST_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

GPU = volta.Device.is_gpu_available()
NO_GPU_REASON = "no GPU adapter: volta.Device.is_gpu_available() is False (no Vulkan/Metal/DX12 driver, not even lavapipe)"

#: Marks a test that needs the GPU.
requires_gpu = pytest.mark.skipif(not GPU, reason=NO_GPU_REASON)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=requires_gpu)])
def device(request: pytest.FixtureRequest) -> str:
    """"cpu", then "gpu" (skipped without an adapter)."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def arr(t) -> np.ndarray:
    """A tensor's values as a numpy array (a copy, float64 unless float16)."""
    if isinstance(t, volta.Tensor):
        return np.array(t.numpy())
    return np.asarray(t)


def assert_close(actual, expected, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    """`actual` (a Tensor or array) equals `expected` in shape and, within the
    tolerances, in value (NaNs in the same places)."""
    a = arr(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def f64(a, requires_grad: bool = False) -> volta.Tensor:
    return volta.tensor(np.asarray(a, dtype=np.float64), dtype="float64", requires_grad=requires_grad)


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def gradcheck(
    fn: Callable[..., object],
    *inputs: np.ndarray,
    h: float = 1e-6,
    rtol: float = 1e-6,
    wrt: Optional[Sequence[int]] = None,
    seed: int = 1,
) -> None:
    """Checks the gradients autograd gives for `fn` against central differences.

    `fn` takes float64 CPU tensors and returns a tensor (or a tuple/list of them);
    the scalar differentiated is `Σ_k sum(out_k · w_k)` with fixed random weights
    `w_k` (so every element of every output counts, with a different weight).
    `wrt` names the inputs to check (all by default). The tolerance is relative to
    the largest gradient: |autograd − numeric| ≤ rtol · (1 + max|numeric|).
    """
    wrt = list(range(len(inputs))) if wrt is None else list(wrt)
    inputs = tuple(np.array(x, dtype=np.float64) for x in inputs)
    tensors = [f64(x, requires_grad=i in wrt) for i, x in enumerate(inputs)]
    outs = _outputs(fn(*tensors))
    g = np.random.default_rng(seed)
    weights = [g.uniform(0.5, 1.5, size=o.shape) * g.choice([-1.0, 1.0], size=o.shape) for o in outs]
    loss = None
    for o, w in zip(outs, weights):
        term = (o * f64(w)).sum()
        loss = term if loss is None else loss + term
    assert loss is not None
    loss.backward()

    def value(xs: Sequence[np.ndarray]) -> float:
        with volta.no_grad():
            os_ = _outputs(fn(*[f64(x) for x in xs]))
        return float(sum((arr(o) * w).sum() for o, w in zip(os_, weights)))

    for i in wrt:
        analytic = tensors[i].grad
        analytic = np.zeros_like(inputs[i]) if analytic is None else arr(analytic)
        assert analytic.shape == inputs[i].shape, f"grad of input {i}: shape {analytic.shape}, expected {inputs[i].shape}"
        numeric = np.zeros_like(inputs[i])
        for idx in np.ndindex(inputs[i].shape):
            plus = [x.copy() for x in inputs]
            minus = [x.copy() for x in inputs]
            plus[i][idx] += h
            minus[i][idx] -= h
            numeric[idx] = (value(plus) - value(minus)) / (2 * h)
        tol = rtol * (1.0 + np.abs(numeric).max(initial=0.0))
        err = np.abs(analytic - numeric).max(initial=0.0)
        assert err <= tol, (
            f"grad of input {i}: max |autograd - numeric| = {err:.3g} > {tol:.3g}\n"
            f"autograd:\n{analytic}\nnumeric:\n{numeric}"
        )


def cpu_vs_gpu(
    fn: Callable[..., object],
    *inputs: np.ndarray,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    grad: bool = True,
    seed: int = 1,
) -> None:
    """Runs `fn` on float32 CPU and GPU tensors made of `inputs` and checks that the
    outputs and (with `grad`) the input gradients agree."""
    results = {}
    for dev in ("cpu", "gpu"):
        ts = [volta.tensor(np.asarray(x, dtype=np.float32), device=dev, requires_grad=grad) for x in inputs]
        outs = _outputs(fn(*ts))
        for o in outs:
            assert str(o.device) == dev, f"{dev} inputs gave an output on {o.device}"
        grads = []
        if grad:
            g = np.random.default_rng(seed)
            loss = None
            for o in outs:
                w = volta.tensor(g.uniform(0.5, 1.5, size=o.shape).astype(np.float32), device=dev)
                term = (o * w).sum()
                loss = term if loss is None else loss + term
            assert loss is not None
            loss.backward()
            grads = [np.zeros(t.shape) if t.grad is None else arr(t.grad) for t in ts]
        results[dev] = ([arr(o) for o in outs], grads)
    (c_out, c_grad), (g_out, g_grad) = results["cpu"], results["gpu"]
    for k, (c, gp) in enumerate(zip(c_out, g_out)):
        assert c.shape == gp.shape, f"output {k}: cpu shape {c.shape}, gpu shape {gp.shape}"
        np.testing.assert_allclose(gp, c, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {k}")
    for k, (c, gp) in enumerate(zip(c_grad, g_grad)):
        np.testing.assert_allclose(gp, c, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"grad of input {k}")
