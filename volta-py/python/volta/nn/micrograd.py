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

from volta._volta import Value

__all__ = ["Module", "Neuron", "Layer", "MLP"]


def _as_device(device):
    """A ``device=`` argument as a ``Device``, parsed by ``Value`` (one set of rules)."""
    return Value(0, device=device).device


class Module:
    def zero_grad(self):
        for p in self.parameters():
            p.grad = 0

    def parameters(self):
        return []


class Neuron(Module):
    def __init__(self, nin, nonlin=True, *, device=None):
        self.device = _as_device(device)
        self.w = [Value(random.uniform(-1, 1), device=self.device) for _ in range(nin)]
        self.b = Value(0, device=self.device)
        self.nonlin = nonlin

    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return act.relu() if self.nonlin else act

    def parameters(self):
        return self.w + [self.b]

    def __repr__(self):
        return f"{'ReLU' if self.nonlin else 'Linear'}Neuron({len(self.w)})"


class Layer(Module):
    def __init__(self, nin, nout, *, device=None, **kwargs):
        self.device = _as_device(device)
        self.neurons = [Neuron(nin, device=self.device, **kwargs) for _ in range(nout)]

    def __call__(self, x):
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]

    def __repr__(self):
        return f"Layer of [{', '.join(str(n) for n in self.neurons)}]"


class MLP(Module):
    def __init__(self, nin, nouts, *, device=None):
        self.device = _as_device(device)
        sz = [nin] + nouts
        self.layers = [
            Layer(sz[i], sz[i + 1], nonlin=i != len(nouts) - 1, device=self.device)
            for i in range(len(nouts))
        ]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self):
        return f"MLP of [{', '.join(str(layer) for layer in self.layers)}]"
