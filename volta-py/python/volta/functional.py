"""Functions of tensors: the computations behind ``volta.nn``'s layers.

Each is the run-time-shaped entry to the same Rust code the typed layers run
(``volta::nn::functional``); shapes are checked first and a mismatch raises
``volta.ShapeError`` naming both shapes.
"""

import math
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple, Union

import numpy

from volta import _volta
from volta import errors as _errors
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

    def embedding(input: _Target, weight: Tensor, padding_idx: Optional[int] = None) -> Tensor:
        """Rows ``input`` (integer ids, any shape) of ``weight (V, M)``: shape
        ``input.shape + (M,)``. Positions holding ``padding_idx`` (negative: from the
        end) give its row no gradient, as PyTorch's."""

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

    def attention(
        query: Tensor,
        key: Tensor,
        value: Tensor,
        causal_start: Optional[int] = None,
        dropout_p: float = 0.0,
        key_ranges: Optional[Sequence[Tuple[int, int]]] = None,
        scale: Optional[float] = None,
    ) -> Tensor:
        """The fused attention of ``query (B, H, L, E)`` over ``key``, ``value (B, Hkv,
        S, E)``, scaled by ``scale`` (1/sqrt(E)); ``key_ranges``: the keys ``(start,
        end)`` each batch element sees (see ``scaled_dot_product_attention``)."""

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
    attention = _native.attention


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Union[Tensor, "ArrayLike"]] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(query @ key.T * scale + mask) @ value``, as PyTorch's
    ``F.scaled_dot_product_attention``, over ``query (..., H, L, E)``, ``key
    (..., Hkv, S, E)`` and ``value (..., Hkv, S, Ev)``.

    With ``Ev == E`` it runs volta's fused kernels (flash attention, forward and
    backward, which never store the ``L × S`` weights) without ``attn_mask``, or
    with one that only hides padding: a boolean or ``0``/``-inf`` numpy mask under
    which each batch element sees one run of keys (``key_padding_mask``, left or
    right padding), alone or within the causal triangle. Other masks compose
    products and a softmax, as PyTorch's math backend. A query that sees no key
    gives zeros, as PyTorch's.

    - ``is_causal``: query ``i`` sees keys ``0..i`` (PyTorch's alignment).
    - ``attn_mask``: a boolean numpy array or list (``True`` takes part) or float
      values added to the scores, broadcast to ``(..., L, S)``.
    - ``dropout_p``: drops weights whenever it is above 0, as PyTorch (pass
      ``dropout_p if self.training else 0.0`` from a module), from volta's seeded
      generator.
    - ``scale``: instead of ``1/sqrt(E)``.
    - ``enable_gqa``: ``key`` and ``value`` may have fewer heads (dim -3), which
      ``H`` is a multiple of.
    """
    q, k, v = query.shape, key.shape, value.shape
    if len(q) < 2 or len(k) != len(q) or len(v) != len(q):
        raise _errors.ShapeError(
            f"scaled_dot_product_attention: query {q}, key {k} and value {v} must have "
            "the same rank, at least 2"
        )
    heads = len(q) >= 3
    lead_q, lead_k = q[: -3 if heads else -2], k[: -3 if heads else -2]
    hq, hk = (q[-3], k[-3]) if heads else (1, 1)
    fits = (
        lead_q == lead_k
        and k[:-1] == v[:-1]
        and q[-1] == k[-1]
        and (hq == hk or (enable_gqa and hk > 0 and hq % hk == 0))
    )
    if not fits:
        gqa = "" if enable_gqa else " (fewer key heads need enable_gqa=True)"
        raise _errors.ShapeError(
            f"scaled_dot_product_attention: query {q} does not fit key {k} and value {v}: "
            f"expected (..., H, L, E), (..., Hkv, S, E) and (..., Hkv, S, Ev){gqa}"
        )
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    (l, e), s = q[-2:], k[-2]
    batch = math.prod(lead_q)
    padding = None if attn_mask is None else _padding(attn_mask, (*lead_q, hq, l, s))
    if (attn_mask is None or padding is not None) and v[-1] == e and s > 0:
        causal, ranges = padding if padding is not None else (is_causal, None)
        out = attention(
            query.reshape(batch, hq, l, e),
            key.reshape(batch, hk, s, e),
            value.reshape(batch, hk, s, e),
            0 if causal else None,
            dropout_p,
            ranges,
            scale,
        )
        return out.reshape(*q)
    if scale is not None:
        query = query * (scale * math.sqrt(e))
    return _composed_attention(query, key, value, attn_mask, dropout_p, is_causal, hq // hk)


def _padding(attn_mask: Any, shape: Tuple[int, ...]) -> Optional[Tuple[bool, List[Tuple[int, int]]]]:
    """What a numpy mask broadcast to ``shape (..., H, L, S)`` amounts to when the
    fused kernels can take it: ``(causal, ranges)``, where the queries of batch
    element ``b`` (the dims before ``H``, flattened) see its keys ``ranges[b]``,
    within the causal triangle if ``causal``; ``None`` for any other mask (per head,
    per query, holes, other values, a volta Tensor)."""
    if isinstance(attn_mask, Tensor):
        return None
    a = numpy.asarray(attn_mask)
    if a.dtype == bool:
        allowed = a
    elif a.dtype.kind == "f" and numpy.isin(a, (0.0, -numpy.inf)).all():
        allowed = a == 0.0
    else:
        return None
    *lead, h, l, s = shape
    if allowed.ndim > len(shape):
        return None
    allowed = allowed.reshape((1,) * (len(shape) - allowed.ndim) + allowed.shape)
    # The same for every head.
    if allowed.shape[-3] > 1:
        if not (allowed == allowed[..., :1, :, :]).all():
            return None
        allowed = allowed[..., :1, :, :]
    # One mask for the whole batch is read once.
    shared = all(n == 1 for n in allowed.shape[:-3])
    try:
        target = (1,) * len(lead) if shared else tuple(lead)
        allowed = numpy.broadcast_to(allowed, (*target, 1, allowed.shape[-2], s))
        numpy.broadcast_shapes(allowed.shape[-2:], (l, s))
    except ValueError:
        return None
    rows = allowed.reshape(-1, allowed.shape[-2], s)
    ranges = []
    seen = numpy.asarray(rows.any(axis=1))
    for keys in seen:
        at = numpy.flatnonzero(keys)
        lo, hi = (int(at[0]), int(at[-1]) + 1) if at.size else (0, 0)
        if not keys[lo:hi].all():
            return None
        ranges.append((lo, hi))
    if rows.shape[1] > 1:
        j = numpy.arange(s)
        inside = numpy.array([(lo <= j) & (j < hi) for lo, hi in ranges]).reshape(-1, 1, s)
        if numpy.array_equal(rows, numpy.broadcast_to(inside, rows.shape)):
            causal = False
        elif numpy.array_equal(rows, inside & (j[None, :] <= numpy.arange(l)[:, None])):
            causal = True
        else:
            return None
    else:
        causal = False
    return causal, ranges * math.prod(lead) if shared else ranges


def _composed_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Union[Tensor, "ArrayLike"]],
    dropout_p: float,
    is_causal: bool,
    group: int,
) -> Tensor:
    """Attention by products and a softmax (the weights stored), for what the fused
    kernels do not take: a mask, or values of another width."""
    if group > 1:
        # Each key/value head serves `group` query heads.
        def repeat(t: Tensor) -> Tensor:
            *lead, h, n, d = t.shape
            return t.unsqueeze(-3).expand(*lead, h, group, n, d).reshape(*lead, h * group, n, d)

        key, value = repeat(key), repeat(value)
    l, s = query.shape[-2], key.shape[-2]
    scores = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(query.shape[-1]))
    if is_causal:
        attn_mask = numpy.tril(numpy.ones((l, s), dtype=bool))
    dead: Optional[numpy.ndarray] = None
    if attn_mask is not None:
        values = attn_mask.numpy() if isinstance(attn_mask, Tensor) else numpy.asarray(attn_mask)
        boolean = values.dtype == bool and not isinstance(attn_mask, Tensor)
        # The rows that see no key: a softmax of nothing, zeros as PyTorch's.
        seen = values if boolean else values > -numpy.inf
        unseen = ~numpy.asarray(numpy.broadcast_to(seen, numpy.broadcast_shapes(seen.shape, (l, s))).any(-1, keepdims=True))
        dead = unseen if unseen.any() else None
        if boolean:
            scores = _volta.where(values if dead is None else numpy.logical_or(values, dead), scores, float("-inf"))
        elif dead is None:
            scores = scores + attn_mask
        elif isinstance(attn_mask, Tensor):
            scores = scores + _volta.where(dead, 0.0, attn_mask)
        else:
            scores = scores + numpy.where(dead, 0.0, values)
    weights = scores.softmax(-1)
    if dead is not None:
        weights = _volta.where(dead, 0.0, weights)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value


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
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "softmax",
    "tanh",
]
