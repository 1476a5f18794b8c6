"""Optimisers over ``volta.Tensor`` parameters, as ``torch.optim``.

Each step runs Volta's fused kernels (``adam_steps``, ``sgd_step``: one pass per
parameter reading it, its ``.grad`` and its state), on the parameter's device; Adam
steps a group's parameters together, as ``torch.optim``'s multi-tensor step.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from volta import Tensor
from volta._volta import adam_steps, sgd_step


class Optimizer:
    """Base class: ``param_groups`` (dicts with ``params`` and hyperparameters),
    ``zero_grad()`` and ``step()``."""

    def __init__(self, params: Iterable[Any], defaults: Dict[str, Any]) -> None:
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups: List[Dict[str, Any]] = []
        for g in groups:
            group = {**defaults, **g, "params": list(g["params"])}
            for p in group["params"]:
                if not isinstance(p, Tensor):
                    raise TypeError(f"optimizer params must be volta.Tensor, got {type(p).__name__}")
                if not p.requires_grad:
                    raise ValueError("optimizer params must require grad (requires_grad=True)")
            self.param_groups.append(group)
        self.state: Dict[int, Dict[str, Any]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears the gradients of every parameter."""
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def step(self) -> None:
        raise NotImplementedError


def _check(name: str, value: float, ok: bool, want: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {want}, got {value}")


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and
    (L2) weight decay, as ``torch.optim.SGD`` (without dampening)."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False) -> None:
        _check("lr", lr, lr >= 0, "≥ 0")
        _check("momentum", momentum, momentum >= 0, "≥ 0")
        _check("weight_decay", weight_decay, weight_decay >= 0, "≥ 0")
        if dampening != 0.0:
            raise ValueError("SGD: dampening is not supported by Volta's fused kernel (use 0)")
        if nesterov and momentum <= 0:
            raise ValueError("SGD: Nesterov momentum needs momentum > 0")
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov})

    def step(self) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                state = self.state.setdefault(id(p), {})
                buf = sgd_step(p, state.get("momentum_buffer"), lr=g["lr"], momentum=g["momentum"], weight_decay=g["weight_decay"], nesterov=g["nesterov"])
                if buf is not None:
                    state["momentum_buffer"] = buf


class Adam(Optimizer):
    """Adam (``weight_decay`` added to the gradient), as ``torch.optim.Adam``."""

    _decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        _check("lr", lr, lr >= 0, "≥ 0")
        _check("eps", eps, eps >= 0, "≥ 0")
        _check("betas[0]", betas[0], 0 <= betas[0] < 1, "in [0, 1)")
        _check("betas[1]", betas[1], 0 <= betas[1] < 1, "in [0, 1)")
        _check("weight_decay", weight_decay, weight_decay >= 0, "≥ 0")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})

    def step(self) -> None:
        for g in self.param_groups:
            b1, b2 = g["betas"]
            every = [(p, self.state.setdefault(id(p), {"step": 0})) for p in g["params"]]
            params = [p for p, _ in every if p.grad is not None]
            states = [s for p, s in every if p.grad is not None]
            # The counts advance once the step has run (an error leaves them).
            outs: List[Optional[Tuple[Tensor, Tensor]]] = adam_steps(
                params,
                [s.get("exp_avg") for s in states],
                [s.get("exp_avg_sq") for s in states],
                lr=g["lr"],
                beta1=b1,
                beta2=b2,
                eps=g["eps"],
                weight_decay=g["weight_decay"],
                decoupled=self._decoupled,
                steps=[s["step"] + 1 for s in states],
            )
            for state, out in zip(states, outs):
                if out is not None:
                    state["step"] += 1
                    state["exp_avg"], state["exp_avg_sq"] = out


class AdamW(Adam):
    """Adam with decoupled weight decay (default 0.01), as ``torch.optim.AdamW``."""

    _decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
