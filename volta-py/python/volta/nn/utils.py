"""Helpers for training loops, as ``torch.nn.utils``."""

from __future__ import annotations

from typing import Iterable, cast

import volta
from volta import Tensor


def clip_grad_norm_(parameters: Iterable[Tensor], max_norm: float) -> Tensor:
    """Scales the gradients so that their joint L2 norm is at most ``max_norm``;
    returns the norm before clipping (a 0-d tensor: reading it is the only wait).
    """
    if not (max_norm >= 0 and max_norm != float("inf")):
        raise ValueError(f"clip_grad_norm_: max_norm must be finite and ≥ 0, got {max_norm}")
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return volta.tensor(0.0)
    grads = [cast(Tensor, p.grad) for p in params]  # not None: filtered above
    total = sum(((g * g).sum() for g in grads[1:]), (grads[0] * grads[0]).sum()).sqrt()
    # On the device, without reading the norm back: coef = min(1, max/(norm + ε)).
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p, g in zip(params, grads):
        p.grad = g * coef
    return total
