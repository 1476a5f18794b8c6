"""micrograd's ``nn``: ``Neuron``, ``Layer`` and ``MLP`` over ``volta.Value``.

The code is micrograd's (``micrograd/nn.py``), line for line, with a ``device=``
argument added: the weights are drawn with ``random.uniform(-1, 1)`` from Python's
``random`` module in micrograd's order, so a run seeded with ``random.seed(...)`` builds
exactly micrograd's network, and the arithmetic is ``volta.Value``'s (the graph and the
backward pass in Rust, with micrograd's results).

``device=`` (a ``volta.Device``, ``'cpu'`` or ``'gpu'``) is kept and reported by
``.device``, as in micrograd_rs; scalar values compute on the CPU whatever it says (a
GPU pays off on tensors, see ``volta.Tensor``).
"""

import random
from typing import Any, List, Sequence, Union, cast

from volta._volta import Device, Value

__all__ = ["Module", "Neuron", "Layer", "MLP"]


#: A ``device=`` argument: a ``Device``, ``'cpu'``/``'gpu'``, or ``None`` (the CPU).
_DeviceLike = Union[Device, str, None]
#: A network's input: values or plain numbers.
_Input = Sequence[Union[Value, float]]


def _as_device(device: _DeviceLike) -> Device:
    """A ``device=`` argument as a ``Device``, parsed by ``Value`` (one set of rules)."""
    return Value(0, device=device).device


class Module:
    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = 0

    def parameters(self) -> List[Value]:
        return []


class Neuron(Module):
    def __init__(self, nin: int, nonlin: bool = True, *, device: _DeviceLike = None) -> None:
        self.device = _as_device(device)
        self.w = [Value(random.uniform(-1, 1), device=self.device) for _ in range(nin)]
        self.b = Value(0, device=self.device)
        self.nonlin = nonlin

    def __call__(self, x: _Input) -> Value:
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return act.relu() if self.nonlin else act

    def parameters(self) -> List[Value]:
        return self.w + [self.b]

    def __repr__(self) -> str:
        return f"{'ReLU' if self.nonlin else 'Linear'}Neuron({len(self.w)})"


class Layer(Module):
    def __init__(self, nin: int, nout: int, *, device: _DeviceLike = None, **kwargs: Any) -> None:
        self.device = _as_device(device)
        self.neurons = [Neuron(nin, device=self.device, **kwargs) for _ in range(nout)]

    def __call__(self, x: _Input) -> Union[Value, List[Value]]:
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def parameters(self) -> List[Value]:
        return [p for n in self.neurons for p in n.parameters()]

    def __repr__(self) -> str:
        return f"Layer of [{', '.join(str(n) for n in self.neurons)}]"


class MLP(Module):
    def __init__(self, nin: int, nouts: List[int], *, device: _DeviceLike = None) -> None:
        self.device = _as_device(device)
        sz = [nin] + nouts
        self.layers = [
            Layer(sz[i], sz[i + 1], nonlin=i != len(nouts) - 1, device=self.device)
            for i in range(len(nouts))
        ]

    def __call__(self, x: _Input) -> Union[Value, List[Value]]:
        # A layer's output is the next one's input (a list; a lone Value only from a
        # last layer of one neuron).
        out: Any = x
        for layer in self.layers:
            out = layer(out)
        return cast(Union[Value, List[Value]], out)

    def parameters(self) -> List[Value]:
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self) -> str:
        return f"MLP of [{', '.join(str(layer) for layer in self.layers)}]"
