"""Data sets that ship with Volta."""

from typing import TYPE_CHECKING, Optional, Tuple, Union

from volta._volta import datasets as _native

if TYPE_CHECKING:
    # The native function's signature (volta-py/src/datasets.rs), for type checkers
    # only: at run time `load_digits` is the Rust function itself.
    import os

    import numpy as np
    from numpy.typing import NDArray

    def load_digits(
        test_fraction: float = 0.2,
        seed: int = 0,
        path: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> Tuple[NDArray[np.float32], NDArray[np.int64], NDArray[np.float32], NDArray[np.int64]]:
        """The UCI digits as ``(x_train, y_train, x_test, y_test)``: images ``(N, 1, 8, 8)``, labels ``(N,)``."""

else:
    load_digits = _native.load_digits

__all__ = ["load_digits"]
