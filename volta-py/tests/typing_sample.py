"""Typed use of the package, for `mypy --strict` (test_typing.py): it checks the stubs
of `volta._volta` and the annotations of the pure-Python modules from a user's side.

Not a test module (pytest collects `test_*.py` only) and nothing here runs on import:
the functions are only read by mypy. `assert_type` is checked statically; at run time
it returns its argument. Running the file (`python typing_sample.py`, Python ≥ 3.10
for the `X | Y` types given to `assert_type`) does one small training step; the
language-model part needs a GGUF file and is only type-checked.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import volta
import volta.functional as F
from volta import Device, Tensor, Value, nn, optim
from volta.datasets import load_digits
from volta.nn.utils import clip_grad_norm_


def tensors() -> None:
    a = volta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = volta.randn(2, 2)
    assert_type(volta.zeros((2, 3), dtype="float64"), Tensor)
    assert_type(volta.ones(3, device=Device.cpu()), Tensor)
    assert_type(volta.arange(5), Tensor)
    assert_type(volta.from_numpy(np.zeros((2, 2), dtype=np.float32)), Tensor)

    # Operators, reflected forms included, give tensors; so do comparisons.
    assert_type(a + b, Tensor)
    assert_type(1 + a, Tensor)
    assert_type(a - 2.5, Tensor)
    assert_type(2 * a, Tensor)
    assert_type(a / b, Tensor)
    assert_type(1.0 / a, Tensor)
    assert_type(a**2, Tensor)
    assert_type(2**a, Tensor)
    assert_type(a @ b, Tensor)
    assert_type(a @ [[1.0], [0.0]], Tensor)
    assert_type(-a, Tensor)
    assert_type(abs(a), Tensor)
    assert_type(a == b, Tensor)
    assert_type(a != 0, Tensor)
    assert_type(a < b, Tensor)
    assert_type(a >= 0.5, Tensor)
    assert_type(a + np.ones((2, 2)), Tensor)

    # Indexing.
    assert_type(a[0], Tensor)
    assert_type(a[:, 1], Tensor)
    assert_type(a[..., None], Tensor)
    assert_type(a[[1, 0]], Tensor)
    assert_type(a[volta.tensor([1, 0])], Tensor)

    # Shapes, reductions, conversions.
    assert_type(a.shape, tuple[int, ...])
    assert_type(a.size(), tuple[int, ...])
    assert_type(a.size(0), int)
    assert_type(a.reshape(4), Tensor)
    assert_type(a.reshape((1, 4)), Tensor)
    assert_type(a.permute(1, 0), Tensor)
    assert_type(a.sum(), Tensor)
    assert_type(a.mean(dim=(0, 1), keepdim=True), Tensor)
    assert_type(a.max(), Tensor)
    assert_type(a.max(b), Tensor)
    values, indices = a.max(1)
    assert_type(values, Tensor)
    assert_type(a.split(1), list[Tensor])
    assert_type(a.item() if a.numel() == 1 else 0.0, float)
    assert_type(a.numpy(), npt.NDArray[np.floating[Any]])
    assert_type(a.to("cpu", dtype="float32"), Tensor)
    assert_type(a.dtype, Literal["float16", "float32", "float64"])
    assert_type(a.device.type, Literal["cpu", "gpu"])
    assert_type(volta.cat([a, b], dim=1), Tensor)
    assert_type(volta.where(a > 0, a, 0.0), Tensor)

    # Autograd.
    loss = (a * b).sum()
    loss.backward()
    assert_type(a.grad, Tensor | None)
    with volta.no_grad():
        a -= 0.1
    assert_type(volta.is_grad_enabled(), bool)


def train_step() -> float:
    """One step of a small classifier (the tensor API: `volta.nn`, `volta.optim`)."""
    volta.manual_seed(0)
    model = nn.Sequential(
        OrderedDict(
            [
                ("fc1", nn.Linear(4, 8)),
                ("act", nn.ReLU()),
                ("fc2", nn.Linear(8, 3)),
            ]
        )
    )
    opt = optim.Adam(model.parameters(), lr=1e-2)
    x = volta.randn(5, 4)
    y = [0, 1, 2, 1, 0]
    logits: Tensor = model(x)
    loss = F.cross_entropy(logits, y)
    assert_type(loss, Tensor)
    opt.zero_grad()
    loss.backward()
    assert_type(clip_grad_norm_(model.parameters(), 1.0), Tensor)
    opt.step()

    conv = nn.Conv2d(1, 2, kernel_size=3, padding=1)
    h = F.max_pool2d(F.relu(conv(volta.randn(1, 1, 8, 8))), 2)
    assert_type(h, Tensor)
    assert_type(F.layer_norm(h, h.shape[-1:]), Tensor)
    sgd = optim.SGD(conv.parameters(), lr=0.1, momentum=0.9)
    sgd.step()

    state = model.state_dict()
    assert_type(state["fc1.weight"], Tensor)
    missing, unexpected = model.load_state_dict(state)
    assert_type(missing, list[str])
    return loss.item()


def files(path: str) -> None:
    volta.save_file({"w": volta.zeros(2)}, path, metadata={"step": "1"})
    assert_type(volta.load_file(path), dict[str, Tensor])
    assert_type(volta.load_metadata(path), dict[str, str])


def digits() -> None:
    x_train, y_train, x_test, y_test = load_digits(test_fraction=0.2, seed=0)
    assert_type(x_train.dtype, np.dtype[np.float32])
    assert_type(volta.from_numpy(x_train), Tensor)


def micrograd() -> Value:
    """micrograd's API: scalar values and its MLP."""
    a = Value(2.0)
    b = Value(-3, device="cpu")
    c = a * b + 1
    d = (c.relu() - a) / 2 + b**2
    e = 1 - d.tanh() * a.exp()
    e.backward()
    assert_type(a.grad, int | float)
    assert_type(e._prev, set[Value])
    mlp = nn.MLP(3, [4, 4, 1])
    out = mlp([1.0, -2.0, Value(0.5)])
    assert_type(out, Value | list[Value])
    mlp.zero_grad()
    assert_type(mlp.parameters(), list[Value])
    return e


def language_model(gguf: str) -> str:
    """The language model's signatures (only type-checked: it needs the GGUF file)."""
    tok = volta.Tokenizer.from_gguf(gguf)
    ids = tok.encode("Hello")
    assert_type(ids, list[int])
    assert_type(tok.decode(ids, skip_special_tokens=True), str)
    assert_type(tok.token_id("<|im_end|>"), int | None)
    assert_type(tok.eos, int | None)
    llm = volta.Llama.from_gguf(gguf, device="cpu")
    assert_type(llm.context_length, int)
    gen = llm.generate("What is 2 + 2?", max_tokens=8, temperature=0.7, top_k=40, seed=1)
    text = "".join(gen)
    assert_type(gen.token_ids, list[int])
    assert_type(gen.prompt_tokens, int)
    return text


if __name__ == "__main__":
    print(f"loss after one step: {train_step():.4f}")
