"""Volta's exceptions.

Each also derives from the built-in exception a Python user would catch: a shape
mismatch is a ``ValueError``, running out of GPU memory a ``MemoryError``.
"""


class VoltaError(Exception):
    """Base class of every error Volta raises."""


class ShapeError(VoltaError, ValueError):
    """Operands whose shapes do not fit the op; the message names both shapes."""


class GpuError(VoltaError, RuntimeError):
    """The GPU failed: no adapter, a rejected command, a failed read-back."""


class OutOfMemoryError(GpuError, MemoryError):
    """The GPU ran out of memory (after Volta's buffer pool released its cache)."""


class DeviceLostError(GpuError):
    """The driver lost the device (reset, removal, crash); GPU tensors are gone."""


class FileFormatError(VoltaError, ValueError):
    """A malformed GGUF or safetensors file; the message names the file and offset."""


__all__ = [
    "VoltaError",
    "ShapeError",
    "GpuError",
    "OutOfMemoryError",
    "DeviceLostError",
    "FileFormatError",
]
