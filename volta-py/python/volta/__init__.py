"""Volta from Python: typed-tensor Rust underneath, micrograd's API and numpy tensors on top."""

from volta._volta import Device
from volta._volta import Value
from volta._volta import Generation, Llama, Tokenizer
from volta._volta import (
    Tensor,
    arange,
    cat,
    eye,
    from_numpy,
    full,
    full_like,
    is_grad_enabled,
    linspace,
    load_file,
    load_metadata,
    manual_seed,
    no_grad,
    ones,
    ones_like,
    rand,
    randn,
    save_file,
    stack,
    tensor,
    uniform,
    where,
    zeros,
    zeros_like,
)
from volta.errors import (
    DeviceLostError,
    FileFormatError,
    GpuError,
    OutOfMemoryError,
    ShapeError,
    VoltaError,
)

#: dtype names, usable wherever a ``dtype=`` is asked for.
float16 = "float16"
float32 = "float32"
float64 = "float64"

__all__ = [
    "Device",
    "Value",
    "Llama",
    "Tokenizer",
    "Generation",
    "Tensor",
    "tensor",
    "from_numpy",
    "zeros",
    "ones",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "randn",
    "rand",
    "uniform",
    "arange",
    "linspace",
    "eye",
    "cat",
    "stack",
    "where",
    "manual_seed",
    "no_grad",
    "is_grad_enabled",
    "save_file",
    "load_file",
    "load_metadata",
    "float16",
    "float32",
    "float64",
    "VoltaError",
    "ShapeError",
    "GpuError",
    "OutOfMemoryError",
    "DeviceLostError",
    "FileFormatError",
]

# Submodules, imported last: they use the names above.
from volta import datasets, functional, nn, optim  # noqa: E402

__all__ += ["datasets", "functional", "nn", "optim"]
