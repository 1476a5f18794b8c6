"""Functions of tensors: the computations behind ``volta.nn``'s layers.

Each is the run-time-shaped entry to the same Rust code the typed layers run
(``volta::nn::functional``); shapes are checked first and a mismatch raises
``volta.ShapeError`` naming both shapes.
"""

from typing import TYPE_CHECKING, Optional, Sequence, Union

from volta._volta import Tensor
from volta._volta import functional as _native

if TYPE_CHECKING:
    # The native functions' signatures (volta-py/src/functional.rs), for type
    # checkers only: at run time the names below are the Rust functions themselves.
    from numpy.typing import ArrayLike

    #: An int, or a pair of them for (height, width).
    _Pair = Union[int, Sequence[int]]
    #: Class indices or targets: a tensor, a list, a numpy array.
    _Target = Union[Tensor, ArrayLike]

    def conv2d(
        input: Tensor,
        weight: Tensor,
        bias: Optional[Tensor] = None,
        stride: Optional[_Pair] = None,
        padding: Optional[_Pair] = None,
        dilation: Optional[_Pair] = None,
        groups: int = 1,
    ) -> Tensor:
        """2-D convolution of ``input (N, C, H, W)`` with ``weight (O, C/groups, KH, KW)``."""

    def max_pool2d(
        input: Tensor,
        kernel_size: _Pair,
        stride: Optional[_Pair] = None,
        padding: Optional[_Pair] = None,
    ) -> Tensor:
        """The maximum of each window of ``input (N, C, H, W)``; stride defaults to the kernel."""

    def avg_pool2d(
        input: Tensor,
        kernel_size: _Pair,
        stride: Optional[_Pair] = None,
        padding: Optional[_Pair] = None,
    ) -> Tensor:
        """The mean of each window of ``input (N, C, H, W)`` (padding counted as zeros)."""

    def layer_norm(
        input: Tensor,
        normalized_shape: Union[int, Sequence[int]],
        weight: Optional[Tensor] = None,
        bias: Optional[Tensor] = None,
        eps: float = 1e-5,
    ) -> Tensor:
        """Layer normalisation over the last dims (PyTorch's ``F.layer_norm``)."""

    def rms_norm(
        input: Tensor,
        normalized_shape: Union[int, Sequence[int]],
        weight: Optional[Tensor] = None,
        eps: float = 1e-6,
    ) -> Tensor:
        """RMS normalisation over the last dims (PyTorch's ``F.rms_norm``)."""

    def batch_norm(
        input: Tensor,
        running_mean: Optional[Tensor],
        running_var: Optional[Tensor],
        weight: Optional[Tensor] = None,
        bias: Optional[Tensor] = None,
        training: bool = False,
        momentum: float = 0.1,
        eps: float = 1e-5,
    ) -> Tensor:
        """Per-channel batch normalisation of ``(N, C, H, W)`` (PyTorch's ``F.batch_norm``)."""

    def embedding(input: _Target, weight: Tensor) -> Tensor:
        """Rows ``input`` (integer ids, any shape) of ``weight (V, M)``: shape ``input.shape + (M,)``."""

    def dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
        """Zeroes each element with probability ``p`` (scaling the rest) when ``training``."""

    def cross_entropy(
        input: Tensor, target: _Target, reduction: str = "mean", label_smoothing: float = 0.0
    ) -> Tensor:
        """Cross-entropy of ``(N, C)`` logits against class indices ``(N,)``."""

    def nll_loss(input: Tensor, target: _Target, reduction: str = "mean") -> Tensor:
        """Negative log-likelihood of ``(N, C)`` log-probabilities against class indices ``(N,)``."""

    def mse_loss(input: Tensor, target: _Target, reduction: str = "mean") -> Tensor:
        """Mean squared error (PyTorch's ``F.mse_loss``); shapes must match."""

    def l1_loss(input: Tensor, target: _Target, reduction: str = "mean") -> Tensor:
        """Mean absolute error (PyTorch's ``F.l1_loss``); shapes must match."""

    def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
        """``input @ weight.T + bias`` with ``weight (out, in)``, ``bias (out,)``."""

else:
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
