"""Data sets that ship with Volta."""

from volta._volta import datasets as _native

load_digits = _native.load_digits

__all__ = ["load_digits"]
