"""Type stubs of `volta._volta`, the Rust half of the package (volta-py/src).

Each class and function here is registered by `volta-py/src/lib.rs`; the
signatures follow their `#[pyo3(signature = ...)]`. The two submodules
(`functional`, `datasets`) are typed where they are re-exported:
`volta/functional.py` and `volta/datasets.py`.
"""

import builtins
import os
import sys
import types
from collections.abc import Sequence
from typing import Any, Literal, final, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import Self, TypeAlias, disjoint_base

if sys.version_info >= (3, 10):
    from types import EllipsisType
else:
    from builtins import ellipsis as EllipsisType

__all__ = [
    "Device",
    "Value",
    "Tensor",
    "no_grad",
    "is_grad_enabled",
    "tensor",
    "from_numpy",
    "zeros",
    "ones",
    "full",
    "randn",
    "rand",
    "uniform",
    "arange",
    "linspace",
    "eye",
    "zeros_like",
    "ones_like",
    "full_like",
    "cat",
    "stack",
    "where",
    "manual_seed",
    "Llama",
    "Tokenizer",
    "Generation",
    "save_file",
    "load_file",
    "load_metadata",
    "adam_steps",
    "sgd_step",
    "datasets",
    "functional",
]

# ---- argument types ----

#: A `device=` argument: a `Device`, `"cpu"`/`"gpu"` (also `"cuda"`), or `None` (CPU).
_DeviceLike: TypeAlias = Device | str | None
#: A `dtype=` argument: `"float32"`, `numpy.float32`, `numpy.dtype("f2")`, … or `None`.
_DTypeLike: TypeAlias = str | npt.DTypeLike | None
#: The other operand of a tensor op: a tensor, a number, or anything `tensor()` takes.
_TensorLike: TypeAlias = Tensor | float | int | npt.ArrayLike
#: A `dim=` argument of a reduction: one axis, several, or `None` for all.
_Dims: TypeAlias = int | Sequence[int] | None
#: One item of a `tensor[key]` key.
_Index: TypeAlias = (
    int | slice | EllipsisType | None | Sequence[int] | npt.NDArray[np.integer[Any]] | Tensor
)
#: A file path (pyo3's `PathBuf`: a `str` or an `os.PathLike`).
_Path: TypeAlias = str | os.PathLike[str]
#: numpy's name of a tensor's element type.
_DTypeName: TypeAlias = Literal["float16", "float32", "float64"]

# ---- devices ----

@final
class Device:
    """Where tensors live and compute: `Device.cpu()` or `Device.gpu()`."""

    @staticmethod
    def cpu() -> Device:
        """The CPU."""
    @staticmethod
    def gpu() -> Device:
        """The GPU, opened on first use; raises `GpuError` when no adapter is found."""
    @staticmethod
    def is_gpu_available() -> bool:
        """Whether a GPU adapter (a driver, or software Vulkan) can be opened."""
    @property
    def type(self) -> Literal["cpu", "gpu"]:
        """`"cpu"` or `"gpu"`."""
    @property
    def adapter(self) -> str | None:
        """The GPU adapter's description (name, backend, features); `None` on the CPU."""
    def __eq__(self, other: object) -> bool:
        """Whether both name the same device."""
    def __hash__(self) -> int:
        """A hash consistent with `==`."""

# ---- micrograd's scalar Value ----

@disjoint_base
class Value:
    """A scalar value and its gradient: micrograd's `Value`, computed in Rust.

    `Value(data)` takes an int or a float (or another number Python computes with);
    `+ - * / **`, their reflected forms, `-v`, `relu()`, `tanh()` and `exp()` build the
    graph; `backward()` fills in `.grad` of every node that `self` depends on. `.data`
    and `.grad` are settable, as in micrograd, and ints stay ints:
    `repr(Value(2))` is `Value(data=2, grad=0)`.

    `device=` (a `Device`, `'cpu'` or `'gpu'`) is kept and reported by `.device`, as in
    micrograd_rs, but scalar values always compute on the CPU, whatever the device says:
    one number per kernel launch would only be slower. A GPU pays off on tensors.
    """

    def __new__(cls, data: int | float, *, device: _DeviceLike = None) -> Self:
        """A leaf holding `data`; `device` is recorded, computing stays on the CPU."""
    @property
    def data(self) -> int | float:
        """The value (an int stays an int, as in micrograd). Settable."""
    @data.setter
    def data(self, value: int | float) -> None: ...
    @property
    def grad(self) -> int | float:
        """d(root)/d(self) after `root.backward()`; the int 0 before. Settable."""
    @grad.setter
    def grad(self, value: int | float) -> None: ...
    @property
    def device(self) -> Device:
        """The device given at creation (or the GPU if an operand had it)."""
    @property
    def _prev(self) -> set[Value]:
        """The operands this value was computed from, as in micrograd (a `set`)."""
    @property
    def _op(self) -> str:
        """The op that made this value, as micrograd names it (`''` for a leaf)."""
    def __add__(self, other: Value | int | float) -> Value:
        """`self + other`."""
    def __radd__(self, other: int | float) -> Value:
        """`other + self`, computed as micrograd does: `self + other`."""
    def __sub__(self, other: Value | int | float) -> Value:
        """`self - other`: micrograd's `self + (-other)`."""
    def __rsub__(self, other: int | float) -> Value:
        """`other - self`: micrograd's `(-self) + other`."""
    def __mul__(self, other: Value | int | float) -> Value:
        """`self * other`."""
    def __rmul__(self, other: int | float) -> Value:
        """`other * self`, computed as micrograd does: `self * other`."""
    def __truediv__(self, other: Value | int | float) -> Value:
        """`self / other`: micrograd's `self * other**-1`."""
    def __rtruediv__(self, other: int | float) -> Value:
        """`other / self`: micrograd's `self**-1 * other`."""
    def __pow__(self, other: int | float, modulo: None = None) -> Value:
        """`self ** other` for an int or float `other` only (else a `TypeError`)."""
    def __neg__(self) -> Value:
        """`-self`: micrograd's `self * -1`."""
    def relu(self) -> Value:
        """`max(0, self)`: micrograd's `0 if self.data < 0 else self.data`."""
    def tanh(self) -> Value:
        """`tanh(self)` as `math.tanh` computes it; gradient `1 - t**2`."""
    def exp(self) -> Value:
        """`e**self` as `math.exp` computes it (an `OverflowError` past ~709.78)."""
    def backward(self) -> None:
        """Backpropagation from this value: fills in `.grad` of every value it depends on."""

# ---- tensors ----

@final
class Tensor:
    """A tensor: rank and dims known at run time, float32 (or float16/float64), on the
    CPU or the GPU, with autograd.

    Build one with `volta.tensor(data)`, `volta.zeros(2, 3)`, `volta.from_numpy(a)`.
    Ops broadcast as numpy does; a shape mismatch raises `volta.ShapeError` (a
    `ValueError`) naming the op and both shapes.
    """

    __array_priority__: float
    """Above numpy's, so that `ndarray + tensor` gives a Tensor (the reflected op)."""

    def __new__(
        cls,
        data: _TensorLike,
        *,
        dtype: _DTypeLike = None,
        device: _DeviceLike = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """A tensor from Python data, as `volta.tensor(data, ...)`."""

    # ---- what it is ----
    @property
    def shape(self) -> tuple[int, ...]:
        """The dims, as a tuple."""
    @overload
    def size(self, dim: None = None) -> tuple[int, ...]:
        """The dims (`size()`), or one of them (`size(dim)`)."""
    @overload
    def size(self, dim: int) -> int: ...
    @property
    def ndim(self) -> int:
        """The number of dims."""
    def dim(self) -> int:
        """The number of dims (PyTorch's `dim()`)."""
    def numel(self) -> int:
        """The number of elements."""
    @property
    def dtype(self) -> _DTypeName:
        """`"float32"`, `"float16"` or `"float64"` (numpy's names)."""
    @property
    def device(self) -> Device:
        """Where it lives: a `volta.Device` (`str()` gives `"cpu"` or `"gpu"`)."""
    @property
    def requires_grad(self) -> bool:
        """Whether ops on it are recorded for `backward()`; settable on leaves."""
    @requires_grad.setter
    def requires_grad(self, on: bool) -> None: ...
    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Makes a leaf require grad (or not), in place; returns it."""
    @property
    def is_leaf(self) -> bool:
        """Whether the user made it (rather than an op)."""
    @property
    def grad(self) -> Tensor | None:
        """The gradient `backward()` accumulated into this leaf (`None` before)."""
    @grad.setter
    def grad(self, g: Tensor | None) -> None: ...
    @property
    def data(self) -> Tensor:
        """The values as a new leaf without history; settable (same shape)."""
    @data.setter
    def data(self, value: Tensor) -> None: ...

    # ---- autograd ----
    def backward(self, gradient: Tensor | None = None, retain_graph: bool = False) -> None:
        """Adds the gradients of this tensor to the `.grad` of each leaf that requires grad.

        The values the graph saved go as the pass runs; a second backward through it
        raises `RuntimeError` unless this one had `retain_graph=True`."""
    def detach(self) -> Tensor:
        """The same values without history."""
    def clone(self) -> Tensor:
        """A copy that gradients flow through."""
    def __deepcopy__(self, _memo: Any, /) -> Tensor:
        """A copy in memory of its own, a leaf that requires grad as this one does."""
    def zero_grad(self) -> None:
        """Clears the gradient (`.grad = None`)."""

    # ---- out to Python ----
    def numpy(self) -> npt.NDArray[np.floating[Any]]:
        """A numpy array of the values: a read-only view of CPU memory, else a copy."""
    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        """The values for `numpy.asarray(t)` (as `dtype`; a copy with `copy=True`)."""
    def tolist(self) -> float | list[Any]:
        """The values as (nested) Python lists; a float for a 0-dim tensor."""
    def item(self) -> float:
        """The value of a one-element tensor, as a Python float."""
    def __float__(self) -> float:
        """`float(t)` of a one-element tensor."""
    def __int__(self) -> int:
        """`int(t)` of a one-element tensor (truncated)."""
    def __bool__(self) -> bool:
        """Whether a one-element tensor is non-zero (else a `ValueError`)."""
    def __len__(self) -> int:
        """The size of the first dim (a `TypeError` for a 0-d tensor)."""

    # ---- devices and types (below, `float` is the method: `builtins.float` the type) ----
    def to(
        self,
        *args: _DeviceLike | _DTypeLike,
        device: _DeviceLike = None,
        dtype: _DTypeLike = None,
    ) -> Tensor:
        """This tensor on another device and/or as another dtype (itself when nothing changes)."""
    def cpu(self) -> Tensor:
        """`to("cpu")`."""
    def gpu(self) -> Tensor:
        """`to("gpu")`."""
    def cuda(self) -> Tensor:
        """`to("gpu")`, under the name PyTorch code uses."""
    def float(self) -> Tensor:
        """`to("float32")`."""
    def double(self) -> Tensor:
        """`to("float64")`."""
    def half(self) -> Tensor:
        """`to("float16")`."""

    # ---- arithmetic (numpy broadcasting) ----
    def __add__(self, other: _TensorLike, /) -> Tensor:
        """`self + other`."""
    def __radd__(self, other: _TensorLike, /) -> Tensor:
        """`other + self`."""
    def __sub__(self, other: _TensorLike, /) -> Tensor:
        """`self - other`."""
    def __rsub__(self, other: _TensorLike, /) -> Tensor:
        """`other - self`."""
    def __mul__(self, other: _TensorLike, /) -> Tensor:
        """`self * other`."""
    def __rmul__(self, other: _TensorLike, /) -> Tensor:
        """`other * self`."""
    def __truediv__(self, other: _TensorLike, /) -> Tensor:
        """`self / other`."""
    def __rtruediv__(self, other: _TensorLike, /) -> Tensor:
        """`other / self`."""
    def __mod__(self, other: _TensorLike, /) -> Tensor:
        """`self % other` (numpy's remainder)."""
    def __rmod__(self, other: _TensorLike, /) -> Tensor:
        """`other % self`."""
    def __pow__(self, other: _TensorLike, modulo: None = None, /) -> Tensor:
        """`self ** other`."""
    def __rpow__(self, other: _TensorLike, modulo: None = None, /) -> Tensor:
        """`other ** self`."""
    def pow(self, exponent: _TensorLike) -> Tensor:
        """`self ** exponent`."""
    def __neg__(self) -> Tensor:
        """`-self`."""
    def __pos__(self) -> Tensor:
        """`+self` (the same values)."""
    def __abs__(self) -> Tensor:
        """`abs(self)`."""
    def __matmul__(self, other: _TensorLike, /) -> Tensor:
        """`self @ other`, with numpy's matmul rules."""
    def __rmatmul__(self, other: _TensorLike, /) -> Tensor:
        """`other @ self`."""
    def matmul(self, other: _TensorLike, /) -> Tensor:
        """Matrix product with numpy's rules (`@`)."""
    def add(self, other: _TensorLike, /) -> Tensor:
        """`self + other`."""
    def sub(self, other: _TensorLike, /) -> Tensor:
        """`self - other`."""
    def mul(self, other: _TensorLike, /) -> Tensor:
        """`self * other`."""
    def div(self, other: _TensorLike, /) -> Tensor:
        """`self / other`."""
    def maximum(self, other: _TensorLike, /) -> Tensor:
        """The larger of the two, elementwise (broadcast)."""
    def minimum(self, other: _TensorLike, /) -> Tensor:
        """The smaller of the two, elementwise (broadcast)."""

    # ---- comparisons: tensors of 1.0/0.0 ----
    def __lt__(self, other: _TensorLike, /) -> Tensor:
        """`self < other` elementwise, as 1.0/0.0."""
    def __le__(self, other: _TensorLike, /) -> Tensor:
        """`self <= other` elementwise, as 1.0/0.0."""
    def __gt__(self, other: _TensorLike, /) -> Tensor:
        """`self > other` elementwise, as 1.0/0.0."""
    def __ge__(self, other: _TensorLike, /) -> Tensor:
        """`self >= other` elementwise, as 1.0/0.0."""
    def eq(self, other: _TensorLike, /) -> Tensor:
        """Elementwise `==` as 1.0/0.0 (the `==` operator does the same)."""
    def ne(self, other: _TensorLike, /) -> Tensor:
        """Elementwise `!=` as 1.0/0.0."""
    def __eq__(self, other: _TensorLike, /) -> Tensor:  # type: ignore[override]
        """`self == other` elementwise, as 1.0/0.0 (not a bool)."""
    def __ne__(self, other: _TensorLike, /) -> Tensor:  # type: ignore[override]
        """`self != other` elementwise, as 1.0/0.0 (not a bool)."""
    def __hash__(self) -> int:
        """Identity hash (tensors can be dict keys and set members)."""

    # ---- in place: the storage is replaced, `.grad` kept ----
    def __iadd__(self, other: _TensorLike, /) -> Tensor:
        """`self += other`, in place."""
    def __isub__(self, other: _TensorLike, /) -> Tensor:
        """`self -= other`, in place."""
    def __imul__(self, other: _TensorLike, /) -> Tensor:
        """`self *= other`, in place."""
    def __itruediv__(self, other: _TensorLike, /) -> Tensor:
        """`self /= other`, in place."""
    def add_(self, other: _TensorLike, /) -> Tensor:
        """In-place `self += other`; returns `self`."""
    def sub_(self, other: _TensorLike, /) -> Tensor:
        """In-place `self -= other`; returns `self`."""
    def mul_(self, other: _TensorLike, /) -> Tensor:
        """In-place `self *= other`; returns `self`."""
    def div_(self, other: _TensorLike, /) -> Tensor:
        """In-place `self /= other`; returns `self`."""
    def zero_(self) -> Tensor:
        """Sets every element to 0, in place; returns `self`."""
    def fill_(self, value: builtins.float) -> Tensor:
        """Sets every element to `value`, in place; returns `self`."""
    def copy_(self, src: _TensorLike) -> Tensor:
        """Copies `src`'s values (broadcast to this shape) in place; returns `self`."""

    # ---- elementwise math ----
    def exp(self) -> Tensor:
        """e^x."""
    def log(self) -> Tensor:
        """The natural logarithm."""
    def exp2(self) -> Tensor:
        """2^x."""
    def log2(self) -> Tensor:
        """log₂ x."""
    def sqrt(self) -> Tensor:
        """√x."""
    def rsqrt(self) -> Tensor:
        """1/√x."""
    def reciprocal(self) -> Tensor:
        """1/x."""
    def abs(self) -> Tensor:
        """|x|."""
    def neg(self) -> Tensor:
        """−x."""
    def relu(self) -> Tensor:
        """max(x, 0)."""
    def sigmoid(self) -> Tensor:
        """1/(1 + e^−x)."""
    def tanh(self) -> Tensor:
        """tanh x."""
    def sin(self) -> Tensor:
        """sin x."""
    def cos(self) -> Tensor:
        """cos x."""
    def gelu(self) -> Tensor:
        """GELU (the erf form, as PyTorch's default)."""
    def silu(self) -> Tensor:
        """x·sigmoid(x)."""
    def floor(self) -> Tensor:
        """⌊x⌋."""
    def erf(self) -> Tensor:
        """The error function."""
    def square(self) -> Tensor:
        """x²."""
    def clamp(self, min: builtins.float | None = None, max: builtins.float | None = None) -> Tensor:
        """Each element limited to `[min, max]` (either may be `None`)."""

    # ---- reductions ----
    def sum(self, dim: _Dims = None, keepdim: bool = False) -> Tensor:
        """The sum over `dim` (an int, a tuple, or `None` for all)."""
    def mean(self, dim: _Dims = None, keepdim: bool = False) -> Tensor:
        """The mean over `dim` (an int, a tuple, or `None` for all)."""
    def var(
        self,
        dim: _Dims = None,
        keepdim: bool = False,
        *,
        correction: builtins.float = 1.0,
        unbiased: bool | None = None,
    ) -> Tensor:
        """The variance over `dim`, with `correction` (1, Bessel's, by default)."""
    def std(
        self,
        dim: _Dims = None,
        keepdim: bool = False,
        *,
        correction: builtins.float = 1.0,
        unbiased: bool | None = None,
    ) -> Tensor:
        """The standard deviation (see `var`)."""
    def amax(self, dim: _Dims = None, keepdim: bool = False) -> Tensor:
        """The maximum over `dim` (an int, a tuple, or `None` for all)."""
    def amin(self, dim: _Dims = None, keepdim: bool = False) -> Tensor:
        """The minimum over `dim` (an int, a tuple, or `None` for all)."""
    @overload
    def max(self, dim: None = None, keepdim: bool = False) -> Tensor:
        """`max()`: the largest element; `max(dim)`: `(values, indices)`; `max(other)`: elementwise."""
    @overload
    def max(self, dim: Tensor, keepdim: bool = False) -> Tensor: ...
    @overload
    def max(self, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]: ...
    @overload
    def min(self, dim: None = None, keepdim: bool = False) -> Tensor:
        """`min()`, `min(dim)` → `(values, indices)`, `min(other)`: as `max`."""
    @overload
    def min(self, dim: Tensor, keepdim: bool = False) -> Tensor: ...
    @overload
    def min(self, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]: ...
    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the largest element along `dim` (flattened when `None`), as floats."""
    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """The index of the smallest element (see `argmax`)."""
    def softmax(self, dim: int) -> Tensor:
        """softmax along `dim`."""
    def log_softmax(self, dim: int) -> Tensor:
        """log(softmax) along `dim`, computed stably."""

    # ---- movement ----
    @overload
    def reshape(self, shape: Sequence[int], /) -> Tensor:
        """The same elements with new dims (one may be −1): `reshape(2, -1)`."""
    @overload
    def reshape(self, *shape: int) -> Tensor: ...
    @overload
    def view(self, shape: Sequence[int], /) -> Tensor:
        """`reshape`, under PyTorch's other name."""
    @overload
    def view(self, *shape: int) -> Tensor: ...
    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Axes `start_dim..=end_dim` merged into one."""
    @overload
    def permute(self, dims: Sequence[int], /) -> Tensor:
        """Axes in a new order: `permute(2, 0, 1)`."""
    @overload
    def permute(self, *dims: int) -> Tensor: ...
    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """Two axes swapped."""
    def t(self) -> Tensor:
        """The transpose of a matrix (a vector unchanged)."""
    @property
    def T(self) -> Tensor:
        """Every axis reversed."""
    @property
    def mT(self) -> Tensor:
        """The last two axes swapped (a batch of matrices transposed)."""
    def squeeze(self, dim: _Dims = None) -> Tensor:
        """Size-1 axes removed: all of them, or `dim` (left alone when not size 1)."""
    def unsqueeze(self, dim: int) -> Tensor:
        """A size-1 axis inserted at `dim` (−1: last)."""
    @overload
    def expand(self, sizes: Sequence[int], /) -> Tensor:
        """A broadcast view with larger dims (−1 keeps a dim): `expand(4, -1, 3)`."""
    @overload
    def expand(self, *sizes: int) -> Tensor: ...
    def expand_as(self, other: Tensor) -> Tensor:
        """`expand` to `other`'s shape."""
    def contiguous(self) -> Tensor:
        """The elements in row-major order in memory of their own."""
    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """`length` elements from `start` along `dim` (a view)."""
    def split(self, split_size: int, dim: int = 0) -> list[Tensor]:
        """Splits into pieces of `split_size` along `dim` (the last may be smaller)."""
    def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
        """`chunks` pieces of (nearly) equal size along `dim`."""
    def __getitem__(self, key: _Index | tuple[_Index, ...], /) -> Tensor:
        """`t[key]`: ints, slices (step > 0), `None`, `...`, and one integer list/array/tensor."""
    # `__setitem__` exists at run time only to raise `TypeError` (tensors are
    # immutable); it is left out so that a type checker flags `t[i] = x`.

@final
class no_grad:
    """`with volta.no_grad():` — ops inside record no graph (optimiser updates, evaluation)."""

    def __new__(cls) -> no_grad:
        """A context manager; nothing happens until `with`."""
    def __enter__(self) -> None:
        """Stops recording gradients on this thread."""
    def __exit__(self, *args: object) -> Literal[False]:
        """Restores recording as it was; exceptions propagate."""

def is_grad_enabled() -> bool:
    """Whether ops record gradients on this thread (`False` inside `no_grad()`)."""

# ---- making tensors ----

def tensor(
    data: _TensorLike,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor from Python data: nested lists, a number, a numpy array or a tensor."""

def from_numpy(array: npt.NDArray[Any], *, device: _DeviceLike = None) -> Tensor:
    """A tensor from a numpy array, keeping its dtype (as `torch.from_numpy`)."""

@overload
def zeros(
    size: Sequence[int],
    /,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """Zeros of the given dims: `zeros(2, 3)` or `zeros((2, 3))`."""

@overload
def zeros(
    *size: int, dtype: _DTypeLike = None, device: _DeviceLike = None, requires_grad: bool = False
) -> Tensor: ...
@overload
def ones(
    size: Sequence[int],
    /,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """Ones of the given dims: `ones(2, 3)` or `ones((2, 3))`."""

@overload
def ones(
    *size: int, dtype: _DTypeLike = None, device: _DeviceLike = None, requires_grad: bool = False
) -> Tensor: ...
def full(
    size: int | Sequence[int],
    fill_value: float,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """`fill_value` everywhere, with dims `size`."""

@overload
def randn(
    size: Sequence[int],
    /,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """Standard normal samples (seed with `manual_seed`): `randn(2, 3)` or `randn((2, 3))`."""

@overload
def randn(
    *size: int, dtype: _DTypeLike = None, device: _DeviceLike = None, requires_grad: bool = False
) -> Tensor: ...
@overload
def rand(
    size: Sequence[int],
    /,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples in [0, 1) (seed with `manual_seed`): `rand(2, 3)` or `rand((2, 3))`."""

@overload
def rand(
    *size: int, dtype: _DTypeLike = None, device: _DeviceLike = None, requires_grad: bool = False
) -> Tensor: ...
def uniform(
    size: int | Sequence[int],
    low: float,
    high: float,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """Uniform samples in [low, high) with dims `size` (layer initialisation)."""

def arange(
    start: float,
    end: float | None = None,
    step: float = 1.0,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """`start, start + step, …` below `end` (`arange(5)`, `arange(1, 2, 0.25)`)."""

def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """`steps` evenly spaced values from `start` to `end` inclusive."""

def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: _DTypeLike = None,
    device: _DeviceLike = None,
    requires_grad: bool = False,
) -> Tensor:
    """The `n × m` identity (`m` defaults to `n`)."""

def zeros_like(t: Tensor, *, requires_grad: bool = False) -> Tensor:
    """Zeros with `t`'s shape, device and dtype."""

def ones_like(t: Tensor, *, requires_grad: bool = False) -> Tensor:
    """Ones with `t`'s shape, device and dtype."""

def full_like(t: Tensor, fill_value: float, *, requires_grad: bool = False) -> Tensor:
    """`fill_value` with `t`'s shape, device and dtype."""

def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Tensors joined along an existing axis `dim`; every other dim must agree."""

def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Tensors of one shape stacked along a new axis `dim`."""

def where(cond: _TensorLike, a: _TensorLike, b: _TensorLike) -> Tensor:
    """`cond ? a : b` elementwise, broadcast (`cond` non-zero is true); one must be a Tensor."""

def manual_seed(seed: int) -> None:
    """Seeds the generator behind volta's random tensors and layer initialisation."""

# ---- files ----

def save_file(
    tensors: dict[str, Tensor], path: _Path, metadata: dict[str, str] | None = None
) -> None:
    """Writes `tensors` (name → Tensor) and string `metadata` to a safetensors file."""

def load_file(path: _Path, device: _DeviceLike = None) -> dict[str, Tensor]:
    """Every tensor of the safetensors file at `path`, by name, on `device`."""

def load_metadata(path: _Path) -> dict[str, str]:
    """The string metadata of a safetensors file (`{}` when it has none)."""

# ---- optimiser steps (volta.optim's kernels) ----

def adam_steps(
    params: list[Tensor],
    m: list[Tensor | None],
    v: list[Tensor | None],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    steps: list[int],
) -> list[tuple[Tensor, Tensor] | None]:
    """One Adam/AdamW step of every parameter, in place and together (on the GPU many to a launch); each one's new moments `(m, v)`, or `None` without a gradient."""

def sgd_step(
    param: Tensor,
    buf: Tensor | None,
    *,
    lr: float,
    momentum: float,
    weight_decay: float,
    nesterov: bool,
) -> Tensor | None:
    """One SGD step of `param`, in place; the new momentum buffer (or `None`)."""

# ---- the language model ----

@final
class Tokenizer:
    """Text ↔ token ids for SmolLM2's byte-level BPE vocabulary, read from a GGUF file.

    `Tokenizer.from_gguf(path)` reads it alone; `Llama.tokenizer` is the model's.
    """

    @staticmethod
    def from_gguf(path: _Path) -> Tokenizer:
        """The tokenizer of the GGUF file at `path` (`FileFormatError`, `OSError` on failure)."""
    def encode(self, text: str) -> list[int]:
        """The token ids of `text`; control tokens written in it are their single ids."""
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of `ids` (optionally without control tokens); a bad id is a `ValueError`."""
    def token_id(self, token: str) -> int | None:
        """The id of the token spelled `token` in the vocabulary, or `None`."""
    @property
    def vocab_size(self) -> int:
        """Number of tokens."""
    @property
    def bos(self) -> int | None:
        """The beginning-of-sequence id, or `None`."""
    @property
    def eos(self) -> int | None:
        """The end-of-sequence id (SmolLM2: `<|im_end|>`), or `None`."""
    def __len__(self) -> int:
        """Number of tokens (`vocab_size`)."""

@final
class Llama:
    """SmolLM2-135M-Instruct, loaded from its GGUF file onto the CPU or the GPU.

    `generate(prompt)` wraps the prompt in the model's chat template and streams the
    answer as an iterator of text pieces.
    """

    @staticmethod
    def from_gguf(
        path: _Path, device: _DeviceLike = None, activations: Literal["int8", "f32"] = "int8"
    ) -> Llama:
        """Loads the GGUF file at `path` onto `device` (the CPU by default).

        `activations="int8"` quantises a decoded token's activations to 8 bits on the
        CPU, as llama.cpp's CPU backend does; `"f32"` keeps them f32 (the GPU always
        does)."""
    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer."""
    @property
    def device(self) -> Device:
        """Where the model runs."""
    @property
    def context_length(self) -> int:
        """Positions the model reads at most: the prompt and the answer together."""
    def generate(
        self,
        prompt: str,
        max_tokens: int = 128,
        temperature: float = 0.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> Generation:
        """Answers `prompt` (in SmolLM2's chat template): an iterator of text pieces."""

@final
class Generation:
    """An answer being generated, from `Llama.generate`: iterate it for the text, piece by
    piece. Each step runs the model once, with the GIL released."""

    def __iter__(self) -> Generation:
        """Itself."""
    def __next__(self) -> str:
        """The next piece of text (`StopIteration` at the end of the answer)."""
    @property
    def prompt_tokens(self) -> int:
        """Tokens of the prompt, chat template included."""
    @property
    def token_ids(self) -> list[int]:
        """The answer's token ids so far (without the end-of-turn token)."""

# ---- submodules ----

functional: types.ModuleType
"""The native half of `volta.functional` (typed in `volta/functional.py`)."""
datasets: types.ModuleType
"""The native half of `volta.datasets` (typed in `volta/datasets.py`)."""
