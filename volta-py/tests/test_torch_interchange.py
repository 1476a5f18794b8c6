"""Files written by Volta load in PyTorch and the other way round.

Runs where PyTorch is installed (the GPU machine's environment has it; CI does not,
and skips). The format itself is also checked without PyTorch in test_tensor.py,
against the safetensors package's numpy API.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import volta
import volta.nn as nn

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")


def test_a_volta_model_loads_in_pytorch_and_computes_the_same(tmp_path: Path) -> None:
    volta.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 3))
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 5)).astype(np.float32)
    model.train()
    model(volta.tensor(x))  # moves the running statistics
    model.eval()
    ours = model(volta.tensor(x)).numpy()
    volta.save_file(dict(model.state_dict()), tmp_path / "m.safetensors")

    peer = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 5 * 5, 3))
    missing, unexpected = peer.load_state_dict(st_torch.load_file(tmp_path / "m.safetensors"), strict=False)
    assert [k for k in missing if not k.endswith("num_batches_tracked")] == [] and unexpected == []
    peer.eval()
    with torch.no_grad():
        theirs = peer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_a_pytorch_model_loads_in_volta_and_computes_the_same(tmp_path: Path) -> None:
    torch.manual_seed(0)
    peer = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
    st_torch.save_file(peer.state_dict(), tmp_path / "p.safetensors")
    model = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 2))
    model.load_state_dict(volta.load_file(tmp_path / "p.safetensors"))
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    with torch.no_grad():
        theirs = peer(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(model(volta.tensor(x)).numpy(), theirs, rtol=1e-5, atol=1e-5)


def test_gradients_match_pytorch() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    va, vb = volta.tensor(a, requires_grad=True, dtype="float64"), volta.tensor(b, requires_grad=True, dtype="float64")
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (va @ vb).tanh().log_softmax(1).sum().backward()
    (ta @ tb).tanh().log_softmax(1).sum().backward()
    np.testing.assert_allclose(va.grad.numpy(), ta.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(vb.grad.numpy(), tb.grad.numpy(), rtol=1e-10, atol=1e-12)
