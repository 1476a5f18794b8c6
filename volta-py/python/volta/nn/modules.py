"""PyTorch-style layers over ``volta.Tensor``.

A ``Module`` finds its parameters (tensors that require grad), buffers and
sub-modules from its attributes, in assignment order, and names them as PyTorch does
(``conv1.weight``, ``bn1.running_mean``), so ``state_dict()`` files interchange with
the Rust side's checkpoints and with PyTorch's. Each layer's ``forward`` calls
``volta.functional``: the same Rust code as the typed Rust layers.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

import volta
import volta.functional as F
from volta import Tensor
from volta.errors import ShapeError

_DeviceLike = Union[str, "volta.Device", None]


def Parameter(data: Tensor) -> Tensor:
    """A trainable tensor: a leaf copy of ``data`` that requires grad."""
    t = data.detach()
    t.requires_grad = True
    return t


class Module:
    """Base class of layers and models, as ``torch.nn.Module``.

    Subclasses assign layers and tensors in ``__init__`` and define ``forward``.
    """

    training: bool
    # Set in __init__ (through object.__setattr__); declared for type checkers.
    _parameters: "OrderedDict[str, Tensor]"
    _buffers: "OrderedDict[str, Tensor]"
    _modules: "OrderedDict[str, Module]"

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("call super().__init__() before assigning attributes to a Module")
        for table in ("_parameters", "_buffers", "_modules"):
            self.__dict__[table].pop(name, None)
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Tensor) and value.requires_grad:
            self._parameters[name] = value
        elif isinstance(value, Tensor) and name in self.__dict__.get("_buffer_names", ()):
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def register_buffer(self, name: str, tensor: Tensor) -> None:
        """Adds a tensor that is part of the state (saved, moved) but not trained."""
        names = self.__dict__.setdefault("_buffer_names", set())
        names.add(name)
        self._buffers[name] = tensor

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ---- walking the tree ----

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        yield from self._modules.items()

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[Tuple[str, "Module"]]:
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "") -> Iterator[Tuple[str, Tensor]]:
        for mod_name, m in self.named_modules(prefix):
            for name, p in m._parameters.items():
                yield (f"{mod_name}.{name}" if mod_name else name), p

    def parameters(self) -> List[Tensor]:
        """The trainable tensors, in definition order."""
        return [p for _, p in self.named_parameters()]

    def named_buffers(self, prefix: str = "") -> Iterator[Tuple[str, Tensor]]:
        for mod_name, m in self.named_modules(prefix):
            for name, b in m._buffers.items():
                yield (f"{mod_name}.{name}" if mod_name else name), b

    def buffers(self) -> List[Tensor]:
        return [b for _, b in self.named_buffers()]

    # ---- state ----

    def state_dict(self) -> "OrderedDict[str, Tensor]":
        """Every parameter and buffer by its dotted name (detached)."""
        out: "OrderedDict[str, Tensor]" = OrderedDict()
        for mod_name, m in self.named_modules():
            for table in (m._parameters, m._buffers):
                for name, t in table.items():
                    out[f"{mod_name}.{name}" if mod_name else name] = t.detach()
        return out

    def load_state_dict(self, state: Dict[str, Tensor], strict: bool = True) -> Tuple[List[str], List[str]]:
        """Copies ``state``'s tensors into this module's parameters and buffers.

        Shapes must match (a ``ShapeError`` names the tensor and both shapes). With
        ``strict``, missing or unexpected names raise ``KeyError`` listing them.
        PyTorch's batch-norm ``num_batches_tracked`` counters are skipped. Returns
        ``(missing, unexpected)``.
        """
        own: Dict[str, Tuple[Module, str, str]] = {}
        for mod_name, m in self.named_modules():
            for table in ("_parameters", "_buffers"):
                for name in getattr(m, table):
                    own[f"{mod_name}.{name}" if mod_name else name] = (m, table, name)
        given = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
        missing = sorted(set(own) - set(given))
        unexpected = sorted(set(given) - set(own))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        for key, (m, table, name) in own.items():
            if key not in given:
                continue
            value = given[key]
            if not isinstance(value, Tensor):
                value = volta.tensor(value)
            current = getattr(m, table)[name]
            if tuple(value.shape) != tuple(current.shape):
                raise ShapeError(
                    f"load_state_dict: {key} has shape {list(value.shape)} in the file, "
                    f"{list(current.shape)} in the model"
                )
            with volta.no_grad():
                current.data = value
        return missing, unexpected

    # ---- modes, devices ----

    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """Moves (or converts) every parameter and buffer: ``model.to("gpu")``.

        Build the optimiser after moving: it holds the tensors it was given.
        """
        for m in self.modules():
            for table in (m._parameters, m._buffers):
                for name, t in list(table.items()):
                    table[name] = t.to(*args, **kwargs)
        return self

    def cpu(self) -> "Module":
        return self.to("cpu")

    def gpu(self) -> "Module":
        return self.to("gpu")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears every parameter's gradient."""
        for p in self.parameters():
            p.grad = None

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        if len(lines) == 1:
            return lines[0] + ")"
        return "\n".join(lines) + "\n)"


def _check_eps(layer: str, eps: float) -> None:
    """A ``ValueError`` at construction for an eps the functional op would refuse on
    every forward (negative, NaN, infinite), so the mistake shows where it is made."""
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"{layer}: eps must be finite and ≥ 0, got {eps}")


def _uniform(shape: Sequence[int], bound: float, device: _DeviceLike, dtype: Optional[str]) -> Tensor:
    return volta.uniform(tuple(shape), -bound, bound, device=device, dtype=dtype, requires_grad=True)


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight (out, in)``, initialised as PyTorch's."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: _DeviceLike = None, dtype: Optional[str] = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound, device, dtype)
        self.bias = _uniform((out_features,), bound, device, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: ``num_heads`` heads over ``embed_dim``
    features, with PyTorch's parameters (``in_proj_weight (3E, E)``, ``in_proj_bias``,
    ``out_proj``), initialisation and masks.

    ``forward(query, key, value)`` takes ``(L, N, E)`` (``(N, L, E)`` with
    ``batch_first``, or unbatched ``(L, E)``) and returns ``(output, weights)``: the
    weights averaged over the heads unless ``average_attn_weights=False``, which stores
    them. With ``need_weights=False`` it runs volta's fused attention, masked by
    a ``key_padding_mask`` and a causal ``attn_mask`` too (see
    ``F.scaled_dot_product_attention`` for the masks it takes). A boolean
    ``key_padding_mask (N, S)`` or ``attn_mask (L, S)`` / ``(N·H, L, S)`` marks with
    ``True`` what may *not* be attended (PyTorch's convention here); float masks are
    added to the scores.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        batch_first: bool = False,
        device: _DeviceLike = None,
        dtype: Optional[str] = None,
    ) -> None:
        super().__init__()
        if num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be a multiple of num_heads {num_heads}")
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        # PyTorch's: Xavier-uniform projections, zero biases.
        self.in_proj_weight = _uniform((3 * embed_dim, embed_dim), math.sqrt(6.0 / (4 * embed_dim)), device, dtype)
        self.in_proj_bias = volta.zeros(3 * embed_dim, device=device, dtype=dtype, requires_grad=True) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if bias:
            self.out_proj.bias = volta.zeros(embed_dim, device=device, dtype=dtype, requires_grad=True)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Any] = None,
        need_weights: bool = True,
        attn_mask: Optional[Any] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal is a hint about attn_mask; give the causal attn_mask too")
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1 if not self.batch_first else 0) for t in (query, key, value))
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        n, l, e = query.shape
        s, h = key.shape[1], self.num_heads
        if e != self.embed_dim or key.shape[0] != n or value.shape[:2] != key.shape[:2] or key.shape[2] != e or value.shape[2] != e:
            raise ShapeError(
                f"MultiheadAttention: query {tuple(query.shape)}, key {tuple(key.shape)} and value "
                f"{tuple(value.shape)} (batch first) do not fit embed_dim {self.embed_dim}"
            )
        w, b = self.in_proj_weight, self.in_proj_bias
        q, k, v = (
            F.linear(x, w[i * e : (i + 1) * e], None if b is None else b[i * e : (i + 1) * e])
            .reshape(n, -1, h, e // h)
            .transpose(1, 2)
            for i, x in enumerate((query, key, value))
        )
        mask = self._mask(key_padding_mask, attn_mask, n, l, s)
        p = self.dropout if self.training else 0.0
        weights: Optional[Tensor] = None
        if need_weights:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(e // h))
            if mask is not None:
                scores = scores + volta.tensor(mask, device=self.in_proj_weight.device, dtype=self.in_proj_weight.dtype)
            weights = scores.softmax(-1)
            if p > 0.0:
                weights = F.dropout(weights, p)
            out = weights @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, mask, dropout_p=p)
        out = self.out_proj(out.transpose(1, 2).reshape(n, l, e))
        if not self.batch_first:
            out = out.transpose(0, 1)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if unbatched:
            out = out.squeeze(1 if not self.batch_first else 0)
            weights = None if weights is None else weights.squeeze(0)
        return out, weights

    def _mask(self, key_padding_mask: Optional[Any], attn_mask: Optional[Any], n: int, l: int, s: int) -> Optional[np.ndarray]:
        """Both masks as one float mask ``(N, H, L, S)`` (or broadcastable) added to the
        scores: ``True`` (not attended) becomes ``-inf``. A numpy array, which
        ``F.scaled_dot_product_attention`` reads to run the fused kernels when it
        only hides padding or is causal."""

        def additive(m: Any) -> np.ndarray:
            a = m.numpy() if isinstance(m, Tensor) else np.asarray(m)
            return np.where(a, -np.inf, 0.0) if a.dtype == bool else a.astype(np.float64)

        total: Optional[np.ndarray] = None
        if attn_mask is not None:
            a = additive(attn_mask)
            if a.ndim == 3:  # (N·H, L, S)
                a = a.reshape(n, self.num_heads, l, s)
            total = a
        if key_padding_mask is not None:
            k = additive(key_padding_mask).reshape(-1, 1, 1, s)
            total = k if total is None else total + k
        return total

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}, batch_first={self.batch_first}"


def _activation(layer: str, activation: Union[str, Any]) -> Any:
    """``"relu"``, ``"gelu"`` or a function, as PyTorch's transformer layers take it."""
    if not isinstance(activation, str):
        return activation
    if activation not in ("relu", "gelu"):
        raise ValueError(f"{layer}: activation is 'relu', 'gelu' or a function, got {activation!r}")
    return F.relu if activation == "relu" else F.gelu


def _residual(x: Tensor, branch: Any, norm: Module, norm_first: bool) -> Tensor:
    """``x + branch(norm(x))`` (pre-norm), or ``norm(x + branch(x))`` (post-norm)."""
    if norm_first:
        return x + branch(norm(x))  # type: ignore[no-any-return]
    return norm(x + branch(x))  # type: ignore[no-any-return]


class _TransformerLayer(Module):
    """What PyTorch's encoder and decoder layers share: their arguments, and their
    modules in PyTorch's order (``self_attn``, the decoder's ``multihead_attn``,
    ``linear1``, ``dropout``, ``linear2``, then a norm and a dropout per branch)."""

    #: Whether the layer also attends over the encoder's output (the decoder).
    _cross = False

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Union[str, Any] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: _DeviceLike = None,
        dtype: Optional[str] = None,
    ) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, device, dtype)
        if self._cross:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, device, dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, device, dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, device, dtype)
        self.activation = _activation(type(self).__name__, activation)
        self.norm_first = norm_first
        branches = 3 if self._cross else 2
        for i in range(1, branches + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, layer_norm_eps, bias=bias, device=device, dtype=dtype))
        for i in range(1, branches + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))

    def _feed(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))  # type: ignore[no-any-return]


class TransformerEncoderLayer(_TransformerLayer):
    """PyTorch's ``nn.TransformerEncoderLayer``: self-attention, then a feed-forward
    branch of ``dim_feedforward`` features, each with dropout and a residual; the
    norms after each (``norm_first=False``, PyTorch's default) or before. Parameter
    names as PyTorch's (``self_attn.in_proj_weight``, ``linear1``, ``norm1``, …)."""

    def forward(self, src: Tensor, src_mask: Optional[Any] = None, src_key_padding_mask: Optional[Any] = None, is_causal: bool = False) -> Tensor:
        def attend(x: Tensor) -> Tensor:
            y, _ = self.self_attn(x, x, x, src_key_padding_mask, need_weights=False, attn_mask=src_mask, is_causal=is_causal)
            return self.dropout1(y)  # type: ignore[no-any-return]

        x = _residual(src, attend, self.norm1, self.norm_first)
        return _residual(x, lambda y: self.dropout2(self._feed(y)), self.norm2, self.norm_first)


class TransformerDecoderLayer(_TransformerLayer):
    """PyTorch's ``nn.TransformerDecoderLayer``: self-attention over the target, then
    attention over ``memory`` (the encoder's output), then the feed-forward branch,
    each with dropout, a residual and a norm (after, or before with ``norm_first``).
    Parameter names as PyTorch's (``self_attn``, ``multihead_attn``, ``norm3``, …)."""

    _cross = True

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Optional[Any] = None,
        memory_mask: Optional[Any] = None,
        tgt_key_padding_mask: Optional[Any] = None,
        memory_key_padding_mask: Optional[Any] = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        def attend(x: Tensor) -> Tensor:
            y, _ = self.self_attn(x, x, x, tgt_key_padding_mask, need_weights=False, attn_mask=tgt_mask, is_causal=tgt_is_causal)
            return self.dropout1(y)  # type: ignore[no-any-return]

        def recall(x: Tensor) -> Tensor:
            y, _ = self.multihead_attn(
                x, memory, memory, memory_key_padding_mask, need_weights=False, attn_mask=memory_mask, is_causal=memory_is_causal
            )
            return self.dropout2(y)  # type: ignore[no-any-return]

        x = _residual(tgt, attend, self.norm1, self.norm_first)
        x = _residual(x, recall, self.norm2, self.norm_first)
        return _residual(x, lambda y: self.dropout3(self._feed(y)), self.norm3, self.norm_first)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (``layers.0``, …), then ``norm`` if
    given, as PyTorch's ``nn.TransformerEncoder``."""

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Optional[Module] = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src: Tensor, mask: Optional[Any] = None, src_key_padding_mask: Optional[Any] = None, is_causal: bool = False) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (``layers.0``, …), each reading
    ``memory``, then ``norm`` if given, as PyTorch's ``nn.TransformerDecoder``."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Optional[Module] = None) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Optional[Any] = None,
        memory_mask: Optional[Any] = None,
        tgt_key_padding_mask: Optional[Any] = None,
        memory_key_padding_mask: Optional[Any] = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """PyTorch's ``nn.Transformer``: an encoder of ``num_encoder_layers`` layers and a
    decoder of ``num_decoder_layers`` that reads its output, each ending in a
    LayerNorm (``encoder.norm``, ``decoder.norm``). As PyTorch's, every weight matrix
    starts Xavier-uniform."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Union[str, Any] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: _DeviceLike = None,
        dtype: Optional[str] = None,
    ) -> None:
        super().__init__()
        layer = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias, device, dtype)

        def norm() -> LayerNorm:
            return LayerNorm(d_model, layer_norm_eps, bias=bias, device=device, dtype=dtype)

        self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer), num_encoder_layers, norm())
        self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer), num_decoder_layers, norm())
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        with volta.no_grad():
            for _, p in self.named_parameters():
                if p.ndim > 1:
                    bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
                    p.copy_(volta.uniform(tuple(p.shape), -bound, bound, device=p.device, dtype=p.dtype))

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Optional[Any] = None,
        tgt_mask: Optional[Any] = None,
        memory_mask: Optional[Any] = None,
        src_key_padding_mask: Optional[Any] = None,
        tgt_key_padding_mask: Optional[Any] = None,
        memory_key_padding_mask: Optional[Any] = None,
        src_is_causal: bool = False,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal)
        return self.decoder(  # type: ignore[no-any-return]
            tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: _DeviceLike = None, dtype: Optional[str] = None) -> Tensor:
        """The causal mask of ``sz`` positions as floats: 0 on and below the diagonal,
        ``-inf`` above (what ``attn_mask`` adds to the scores)."""
        mask = np.triu(np.full((sz, sz), -np.inf), 1)
        return volta.tensor(mask, device=device, dtype=dtype or "float32")


def _pair(v: Union[int, Sequence[int]]) -> Tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    a, b = v
    return (int(a), int(b))


class Conv2d(Module):
    """2-D convolution over ``(N, C, H, W)``, weight ``(out, in/groups, kh, kw)``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Union[int, Sequence[int]],
        stride: Union[int, Sequence[int]] = 1,
        padding: Union[int, Sequence[int]] = 0,
        dilation: Union[int, Sequence[int]] = 1,
        groups: int = 1,
        bias: bool = True,
        device: _DeviceLike = None,
        dtype: Optional[str] = None,
    ) -> None:
        super().__init__()
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels {in_channels} and out_channels {out_channels} must divide by groups {groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        self.weight = _uniform((out_channels, in_channels // groups, *self.kernel_size), bound, device, dtype)
        self.bias = _uniform((out_channels,), bound, device, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(Module):
    """The maximum of each window (stride defaults to the kernel size)."""

    def __init__(self, kernel_size: Union[int, Sequence[int]], stride: Optional[Union[int, Sequence[int]]] = None, padding: Union[int, Sequence[int]] = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class AvgPool2d(MaxPool2d):
    """The mean of each window (stride defaults to the kernel size)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class BatchNorm2d(Module):
    """Per-channel normalisation of ``(N, C, H, W)`` with running statistics."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True, device: _DeviceLike = None, dtype: Optional[str] = None) -> None:
        super().__init__()
        _check_eps("BatchNorm2d", eps)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = volta.ones(num_features, device=device, dtype=dtype, requires_grad=True) if affine else None
        self.bias = volta.zeros(num_features, device=device, dtype=dtype, requires_grad=True) if affine else None
        self.register_buffer("running_mean", volta.zeros(num_features, device=device, dtype=dtype))
        self.register_buffer("running_var", volta.ones(num_features, device=device, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training, self.momentum, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


def _shape(s: Union[int, Sequence[int]]) -> Tuple[int, ...]:
    return (s,) if isinstance(s, int) else tuple(s)


class LayerNorm(Module):
    """Normalisation over the last dims (``normalized_shape``), then scale and shift."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True, device: _DeviceLike = None, dtype: Optional[str] = None) -> None:
        super().__init__()
        _check_eps("LayerNorm", eps)
        self.normalized_shape, self.eps = _shape(normalized_shape), eps
        self.weight = volta.ones(self.normalized_shape, device=device, dtype=dtype, requires_grad=True) if elementwise_affine else None
        self.bias = volta.zeros(self.normalized_shape, device=device, dtype=dtype, requires_grad=True) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    """Root-mean-square normalisation over the last dims, then scale."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: Optional[float] = None, elementwise_affine: bool = True, device: _DeviceLike = None, dtype: Optional[str] = None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = 1e-6 if eps is None else eps
        _check_eps("RMSNorm", self.eps)
        self.weight = volta.ones(self.normalized_shape, device=device, dtype=dtype, requires_grad=True) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class Embedding(Module):
    """A table of ``num_embeddings`` rows of ``embedding_dim``, looked up by integer ids.
    With ``padding_idx``, that row starts at zero and gets no gradient (PyTorch's)."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: Optional[int] = None,
        device: _DeviceLike = None,
        dtype: Optional[str] = None,
    ) -> None:
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} rows")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        weight = volta.randn(num_embeddings, embedding_dim, device=device, dtype=dtype)
        if padding_idx is not None:
            keep = np.ones((num_embeddings, 1))
            keep[padding_idx] = 0.0
            weight = weight * volta.tensor(keep, device=weight.device, dtype=weight.dtype)
        self.weight = Parameter(weight)

    def forward(self, ids: Any) -> Tensor:
        return F.embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Dropout(Module):
    """Zeroes elements with probability ``p`` in training (scaling the rest)."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class _Activation(Module):
    _method = ""

    def forward(self, x: Tensor) -> Tensor:
        return getattr(x, self._method)()  # type: ignore[no-any-return]


class ReLU(_Activation):
    """max(x, 0)."""

    _method = "relu"


class GELU(_Activation):
    """GELU (erf form)."""

    _method = "gelu"


class SiLU(_Activation):
    """x * sigmoid(x)."""

    _method = "silu"


class Sigmoid(_Activation):
    """1 / (1 + exp(-x))."""

    _method = "sigmoid"


class Tanh(_Activation):
    """tanh(x)."""

    _method = "tanh"


class Identity(Module):
    """Returns its input."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class Softmax(Module):
    """softmax along ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return x.softmax(self.dim)


class Flatten(Module):
    """Merges dims ``start_dim..=end_dim`` (by default all but the batch)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class ModuleList(Module):
    """A list of modules, registered as ``0``, ``1``, …."""

    def __init__(self, modules: Optional[Sequence[Module]] = None) -> None:
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, m: Module) -> "ModuleList":
        setattr(self, str(len(self._modules)), m)
        return self

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())


class Sequential(ModuleList):
    """Layers applied in order; named ``0``, ``1``, … (or by an ``OrderedDict``)."""

    def __init__(self, *layers: Any) -> None:
        Module.__init__(self)
        if len(layers) == 1 and isinstance(layers[0], OrderedDict):
            for name, m in layers[0].items():
                setattr(self, name, m)
        else:
            for i, m in enumerate(layers):
                setattr(self, str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x


class CrossEntropyLoss(Module):
    """``F.cross_entropy`` as a module."""

    def __init__(self, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(input, target, self.reduction, self.label_smoothing)


class MSELoss(Module):
    """``F.mse_loss`` as a module."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.mse_loss(input, target, self.reduction)


__all__ = [
    "Parameter",
    "Module",
    "Linear",
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "BatchNorm2d",
    "LayerNorm",
    "RMSNorm",
    "Embedding",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
    "Dropout",
    "ReLU",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Identity",
    "Softmax",
    "Flatten",
    "Sequential",
    "ModuleList",
    "CrossEntropyLoss",
    "MSELoss",
]
