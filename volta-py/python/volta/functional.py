"""Functions of tensors: the computations behind ``volta.nn``'s layers.

Each is the run-time-shaped entry to the same Rust code the typed layers run
(``volta::nn::functional``); shapes are checked first and a mismatch raises
``volta.ShapeError`` naming both shapes.
"""

from volta._volta import Tensor
from volta._volta import functional as _native

conv2d = _native.conv2d
max_pool2d = _native.max_pool2d
avg_pool2d = _native.avg_pool2d
layer_norm = _native.layer_norm
rms_norm = _native.rms_norm
batch_norm = _native.batch_norm
embedding = _native.embedding
dropout = _native.dropout
cross_entropy = _native.cross_entropy
nll_loss = _native.nll_loss
mse_loss = _native.mse_loss
l1_loss = _native.l1_loss
linear = _native.linear


def relu(x: Tensor) -> Tensor:
    """max(x, 0)."""
    return x.relu()


def gelu(x: Tensor) -> Tensor:
    """GELU (the erf form)."""
    return x.gelu()


def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x)."""
    return x.silu()


def sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + exp(-x))."""
    return x.sigmoid()


def tanh(x: Tensor) -> Tensor:
    """tanh(x)."""
    return x.tanh()


def softmax(x: Tensor, dim: int) -> Tensor:
    """softmax along ``dim``."""
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """log(softmax) along ``dim``, computed stably."""
    return x.log_softmax(dim)


__all__ = [
    "avg_pool2d",
    "batch_norm",
    "conv2d",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "l1_loss",
    "layer_norm",
    "linear",
    "log_softmax",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "relu",
    "rms_norm",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]
