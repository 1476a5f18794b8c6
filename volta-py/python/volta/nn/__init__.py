"""Neural-network building blocks.

micrograd's ``Neuron``, ``Layer`` and ``MLP`` (scalar ``volta.Value`` networks, seeded
from Python's ``random`` exactly as micrograd's are), and PyTorch-style layers over
``volta.Tensor`` (``Module``, ``Linear``, ``Conv2d``, norms, pooling, …). ``Module``
here is the PyTorch-style base; micrograd's own is ``volta.nn.micrograd.Module``.
"""

from volta.nn import functional, modules, utils
from volta.nn.micrograd import MLP, Layer, Neuron
from volta.nn.modules import *  # noqa: F403  (the layers, listed in modules.__all__)

__all__ = ["Neuron", "Layer", "MLP", "functional", "utils", *modules.__all__]
