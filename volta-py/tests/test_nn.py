"""`volta.functional`, `volta.nn` and `volta.optim` against numpy: each functional op's
values against a numpy reference, its gradients against central differences (float64,
CPU), and the GPU against the CPU; the layers' bookkeeping (parameters, state_dict,
modes, devices); the optimisers against numpy implementations of PyTorch's update
rules; and a small conv net trained on both devices.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest

import volta
import volta.functional as F
import volta.nn as nn
import volta.optim as optim
from conftest import arr, assert_close, cpu_vs_gpu, gradcheck, requires_gpu

# ---- numpy references ------------------------------------------------------------------


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg : (g + 1) * cg, i * sh : i * sh + dh * (kh - 1) + 1 : dh, j * sw : j * sw + dw * (kw - 1) + 1 : dw]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


def np_pool(x, kernel, stride=None, padding=0, op="max"):
    (kh, kw), (ph, pw) = pair(kernel), pair(padding)
    sh, sw = pair(stride) if stride is not None else (kh, kw)
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh = (x.shape[2] + 2 * ph - kh) // sh + 1
    ow = (x.shape[3] + 2 * pw - kw) // sw + 1
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh : i * sh + kh, j * sw : j * sw + kw]
            # PyTorch's avg_pool2d counts the padding (count_include_pad=True).
            out[:, :, i, j] = win.max(axis=(2, 3)) if op == "max" else win.mean(axis=(2, 3))
    return out


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def np_rms_norm(x, k, w=None, eps=1e-6):
    axes = tuple(range(x.ndim - k, x.ndim))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y * (1 if w is None else w)


def np_batch_norm_train(x, w=None, b=None, eps=1e-5):
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * w[None, :, None, None]
    if b is not None:
        y = y + b[None, :, None, None]
    return y


def np_log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def np_reduce(v, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](v)


def np_cross_entropy(x, t, reduction="mean", label_smoothing=0.0):
    lp = np_log_softmax(x)
    nll = -lp[np.arange(len(t)), t]
    smooth = -lp.mean(axis=1)
    return np_reduce((1 - label_smoothing) * nll + label_smoothing * smooth, reduction)


# ---- functional: values against numpy ------------------------------------------------

CONV_CONFIGS = [
    dict(),
    dict(stride=2),
    dict(padding=1),
    dict(padding=(2, 0), stride=(1, 2)),
    dict(dilation=2),
    dict(dilation=(2, 1), padding=2, stride=2),
    dict(groups=2),
    dict(groups=4, padding=1),
    dict(stride=3, padding=1, dilation=2, groups=2),
]


@pytest.mark.parametrize("cfg", CONV_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "plain")
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_against_numpy(cfg, bias, device, rng):
    groups = cfg.get("groups", 1)
    x = rng.standard_normal((2, 4, 7, 6))
    w = rng.standard_normal((4, 4 // groups, 3, 2))
    b = rng.standard_normal(4) if bias else None
    dev = dict(device=device)
    out = F.conv2d(
        volta.tensor(x, **dev),
        volta.tensor(w, **dev),
        volta.tensor(b, **dev) if bias else None,
        **cfg,
    )
    tol = 1e-12 if device == "cpu" else 1e-4
    assert_close(out, np_conv2d(x, w, b, **cfg), rtol=tol, atol=tol)


POOL_CONFIGS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=1),
    dict(kernel_size=(2, 3), stride=(1, 2)),
    dict(kernel_size=2, stride=1, padding=1),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=1, padding=(1, 0)),
    dict(kernel_size=4, stride=3, padding=2),
]


@pytest.mark.parametrize("cfg", POOL_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("op", ["max", "avg"])
def test_pools_against_numpy(cfg, op, device, rng):
    x = rng.standard_normal((2, 3, 7, 6))
    fn = F.max_pool2d if op == "max" else F.avg_pool2d
    out = fn(volta.tensor(x, device=device), **cfg)
    tol = 1e-12 if device == "cpu" else 1e-5
    expected = np_pool(x, cfg["kernel_size"], cfg.get("stride"), cfg.get("padding", 0), op)
    assert_close(out, expected, rtol=tol, atol=tol)


def test_norms_against_numpy(device, rng):
    x = rng.standard_normal((2, 3, 4)) * 3 + 1
    w, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    t = lambda a: volta.tensor(a, device=device)  # noqa: E731
    tol = 1e-10 if device == "cpu" else 1e-4
    assert_close(F.layer_norm(t(x), 4), np_layer_norm(x, 1), rtol=tol, atol=tol)
    assert_close(F.layer_norm(t(x), (3, 4), t(w), t(b), eps=1e-3), np_layer_norm(x, 2, w, b, 1e-3), rtol=tol, atol=tol)
    assert_close(F.layer_norm(t(x), [4], t(w[0]), None), np_layer_norm(x, 1, w[0]), rtol=tol, atol=tol)
    assert_close(F.rms_norm(t(x), 4), np_rms_norm(x, 1), rtol=tol, atol=tol)
    assert_close(F.rms_norm(t(x), (3, 4), t(w), eps=0.5), np_rms_norm(x, 2, w, 0.5), rtol=tol, atol=tol)


def test_batch_norm_against_numpy(device, rng):
    x = rng.standard_normal((4, 3, 2, 5)) * 2 + 0.5
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    t = lambda a: volta.tensor(a, device=device)  # noqa: E731
    tol = 1e-10 if device == "cpu" else 1e-4
    rm, rv = t(np.zeros(3)), t(np.ones(3))
    out = F.batch_norm(t(x), rm, rv, t(w), t(b), training=True, momentum=0.25)
    assert_close(out, np_batch_norm_train(x, w, b), rtol=tol, atol=tol)
    # Running statistics as PyTorch moves them: the unbiased batch variance.
    n = x.shape[0] * x.shape[2] * x.shape[3]
    mean = x.mean(axis=(0, 2, 3))
    var_unbiased = x.var(axis=(0, 2, 3)) * n / (n - 1)
    assert_close(rm, 0.25 * mean, rtol=tol, atol=tol)
    assert_close(rv, 0.75 + 0.25 * var_unbiased, rtol=tol, atol=tol)
    # Evaluation: the running statistics.
    ev = F.batch_norm(t(x), rm, rv, t(w), t(b), training=False, eps=1e-3)
    expected = (x - arr(rm)[None, :, None, None]) / np.sqrt(arr(rv)[None, :, None, None] + 1e-3)
    expected = expected * w[None, :, None, None] + b[None, :, None, None]
    assert_close(ev, expected, rtol=tol, atol=tol)
    # Without affine parameters, or with a bias alone.
    assert_close(F.batch_norm(t(x), None, None, training=True), np_batch_norm_train(x), rtol=tol, atol=tol)
    assert_close(F.batch_norm(t(x), None, None, None, t(b), training=True), np_batch_norm_train(x, None, b), rtol=tol, atol=tol)


def test_embedding_padding_rows_get_no_gradient(device):
    emb = nn.Embedding(5, 3, padding_idx=-1).to(device)  # row 4
    assert emb.padding_idx == 4 and "padding_idx=4" in repr(emb)
    np.testing.assert_array_equal(arr(emb.weight)[4], np.zeros(3))
    ids = np.array([[0, 4, 2], [4, 4, 1]])
    out = emb(ids)
    assert_close(out, arr(emb.weight)[ids], atol=1e-6)
    (out * volta.tensor(np.arange(18.0).reshape(2, 3, 3), device=device, dtype="float32")).sum().backward()
    grad = arr(emb.weight.grad)
    np.testing.assert_array_equal(grad[4], np.zeros(3))
    assert_close(grad[2], np.arange(6.0, 9.0))
    # F.embedding takes it too; without it the padding row is trained as any other.
    w = volta.tensor(np.ones((5, 3)), device=device, dtype="float32", requires_grad=True)
    F.embedding(ids, w).sum().backward()
    assert_close(arr(w.grad)[4], np.full(3, 3.0))
    with pytest.raises(ValueError, match="padding_idx 5"):
        F.embedding(ids, w, padding_idx=5)
    with pytest.raises(ValueError, match="padding_idx -6"):
        nn.Embedding(5, 3, padding_idx=-6)


def test_embedding_against_numpy(device, rng):
    w = rng.standard_normal((5, 3))
    ids = np.array([[0, 4, 4], [2, 1, 0]])
    for key in (ids, ids.tolist(), volta.tensor(ids), ids.astype(np.float64)):
        assert_close(F.embedding(key, volta.tensor(w, device=device)), w[ids], atol=1e-6)
    assert_close(F.embedding(3, volta.tensor(w, device=device)), w[3], atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 1.0])
def test_cross_entropy_and_nll_against_numpy(reduction, smoothing, device, rng):
    x = rng.standard_normal((4, 5)) * 3
    t = np.array([1, 0, 4, 1])
    tol = 1e-10 if device == "cpu" else 1e-4
    xv = volta.tensor(x, device=device)
    for target in (t, t.tolist(), volta.tensor(t)):
        out = F.cross_entropy(xv, target, reduction=reduction, label_smoothing=smoothing)
        assert_close(out, np_cross_entropy(x, t, reduction, smoothing), rtol=tol, atol=tol)
    loss = nn.CrossEntropyLoss(reduction, smoothing)(xv, t)
    assert_close(loss, np_cross_entropy(x, t, reduction, smoothing), rtol=tol, atol=tol)
    lp = np_log_softmax(x)
    assert_close(F.nll_loss(volta.tensor(lp, device=device), t, reduction), np_reduce(-lp[np.arange(4), t], reduction), rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses_against_numpy(reduction, device, rng):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    xv, yv = volta.tensor(x, device=device), volta.tensor(y, device=device)
    tol = 1e-10 if device == "cpu" else 1e-5
    assert_close(F.mse_loss(xv, yv, reduction), np_reduce((x - y) ** 2, reduction), rtol=tol, atol=tol)
    assert_close(F.l1_loss(xv, yv, reduction), np_reduce(np.abs(x - y), reduction), rtol=tol, atol=tol)
    assert_close(F.mse_loss(xv, y.tolist(), reduction), np_reduce((x - y) ** 2, reduction), rtol=tol, atol=tol)
    assert_close(nn.MSELoss(reduction)(xv, yv), np_reduce((x - y) ** 2, reduction), rtol=tol, atol=tol)


def test_linear_against_numpy(device, rng):
    w, b = rng.standard_normal((4, 3)), rng.standard_normal(4)
    tol = 1e-10 if device == "cpu" else 1e-5
    for shape in [(3,), (5, 3), (2, 5, 3)]:
        x = rng.standard_normal(shape)
        t = lambda a: volta.tensor(a, device=device)  # noqa: E731
        assert_close(F.linear(t(x), t(w), t(b)), x @ w.T + b, rtol=tol, atol=tol)
        assert_close(F.linear(t(x), t(w)), x @ w.T, rtol=tol, atol=tol)


def test_dropout(device):
    x = volta.ones(100, 100, device=device)
    assert F.dropout(x, 0.5, training=False) is not None
    assert_close(F.dropout(x, 0.5, training=False), np.ones((100, 100)))
    assert_close(F.dropout(x, 0.0), np.ones((100, 100)))
    volta.manual_seed(3)
    y = arr(F.dropout(x, 0.3))
    kept = y != 0
    assert 0.65 < kept.mean() < 0.75
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    volta.manual_seed(3)
    np.testing.assert_array_equal(arr(F.dropout(x, 0.3)), y)  # seeded
    # p = 1 drops everything (PyTorch gives zeros, not 0 · ∞ = NaN).
    assert_close(F.dropout(x, 1.0), np.zeros((100, 100)))


def np_attention(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q·kᵀ·scale + mask)·v in float64, key/value heads repeated for groups;
    a row that sees no key gives zeros (PyTorch's ``_safe_softmax``)."""
    group = q.shape[-3] // k.shape[-3] if q.ndim >= 3 else 1
    if group > 1:
        k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    scores = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if causal:
        mask = np.tril(np.ones(scores.shape[-2:], dtype=bool))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    dead = np.isneginf(scores).all(-1, keepdims=True)
    scores = np.where(dead, 0.0, scores)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return np.where(dead, 0.0, w / w.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize(
    "q, k, kwargs",
    [
        ((2, 3, 5, 8), (2, 3, 7, 8), {}),
        ((2, 3, 5, 8), (2, 3, 5, 8), {"is_causal": True}),
        ((2, 3, 4, 8), (2, 3, 6, 8), {"is_causal": True}),  # fewer queries: top-left, as PyTorch
        ((2, 3, 6, 8), (2, 3, 4, 8), {"is_causal": True}),  # more queries than keys
        ((1, 4, 5, 8), (1, 2, 5, 8), {"enable_gqa": True, "scale": 0.2}),
        ((3, 1, 2, 4, 8), (3, 1, 2, 4, 8), {}),  # more leading dims
        ((5, 8), (7, 8), {"is_causal": True}),
    ],
)
def test_scaled_dot_product_attention_against_numpy(q, k, kwargs, device, rng):
    qa, ka, va = rng.standard_normal(q), rng.standard_normal(k), rng.standard_normal(k)
    t = lambda a: volta.tensor(a, device=device)  # noqa: E731
    out = F.scaled_dot_product_attention(t(qa), t(ka), t(va), **kwargs)
    want = np_attention(qa, ka, va, causal=kwargs.get("is_causal", False), scale=kwargs.get("scale"))
    assert_close(out, want, rtol=1e-4, atol=1e-5)


def np_multihead(mha, query, key, value, key_padding_mask=None, attn_mask=None):
    """PyTorch's nn.MultiheadAttention in float64 numpy: (output, head-averaged weights)."""
    W, b = arr(mha.in_proj_weight), arr(mha.in_proj_bias)
    Wo, bo = arr(mha.out_proj.weight), arr(mha.out_proj.bias)
    e, h = mha.embed_dim, mha.num_heads
    if not mha.batch_first:
        query, key, value = (np.swapaxes(x, 0, 1) for x in (query, key, value))
    n, l, _ = query.shape
    s = key.shape[1]
    q, k, v = (
        (x @ W[i * e : (i + 1) * e].T + b[i * e : (i + 1) * e]).reshape(n, -1, h, e // h).transpose(0, 2, 1, 3)
        for i, x in enumerate((query, key, value))
    )
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(e // h)
    if attn_mask is not None:
        scores = np.where(attn_mask, -np.inf, scores) if attn_mask.dtype == bool else scores + attn_mask
    if key_padding_mask is not None:
        scores = np.where(key_padding_mask[:, None, None, :], -np.inf, scores)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(n, l, e) @ Wo.T + bo
    if not mha.batch_first:
        out = np.swapaxes(out, 0, 1)
    return out, w.mean(1)


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_against_numpy(batch_first, device, rng):
    volta.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=batch_first).to(device)
    assert [name for name, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    # Biases start at zero, as PyTorch's: give them values to check.
    with volta.no_grad():
        mha.in_proj_bias.copy_(volta.tensor(rng.standard_normal(24), device=device, dtype="float32"))
        mha.out_proj.bias.copy_(volta.tensor(rng.standard_normal(8), device=device, dtype="float32"))
    n, l, s = 3, 4, 5
    shape = (lambda t: (n, t, 8)) if batch_first else (lambda t: (t, n, 8))
    query, key, value = rng.standard_normal(shape(l)), rng.standard_normal(shape(s)), rng.standard_normal(shape(s))
    t = lambda a: volta.tensor(a, device=device, dtype="float32")  # noqa: E731
    tol = {"rtol": 1e-4, "atol": 1e-5}
    out, weights = mha(t(query), t(key), t(value))
    want, want_w = np_multihead(mha, query, key, value)
    assert_close(out, want, **tol)
    assert_close(weights, want_w, **tol)
    # The fused path (no weights) computes the same output.
    out, none = mha(t(query), t(key), t(value), need_weights=False)
    assert none is None
    assert_close(out, want, **tol)
    # Masks: True is "not attended" here, as PyTorch's MultiheadAttention has it.
    padding = np.zeros((n, s), dtype=bool)
    padding[0, 3:] = True
    causal = np.triu(np.ones((l, s), dtype=bool), 1)
    want, want_w = np_multihead(mha, query, key, value, padding, causal)
    for need in (True, False):
        out, weights = mha(t(query), t(key), t(value), key_padding_mask=padding, attn_mask=causal, need_weights=need)
        assert_close(out, want, **tol)
        if need:
            assert_close(weights, want_w, **tol)
    _, weights = mha(t(query), t(key), t(value), attn_mask=causal, average_attn_weights=False)
    assert weights.shape == (n, 2, l, s)
    # Unbatched input.
    one = lambda a: a[:, 0] if not batch_first else a[0]  # noqa: E731
    out, weights = mha(t(one(query)), t(one(key)), t(one(value)))
    want, want_w = np_multihead(mha, query, key, value)
    assert_close(out, one(want), **tol)
    assert_close(weights, want_w[0], **tol)


def test_multihead_attention_trains_and_rejects_bad_input(rng):
    mha = nn.MultiheadAttention(8, 4, dropout=0.1, bias=False, batch_first=True)
    assert [name for name, _ in mha.named_parameters()] == ["in_proj_weight", "out_proj.weight"]
    x = volta.tensor(rng.standard_normal((2, 5, 8)), dtype="float32")
    out, _ = mha(x, x, x, need_weights=False)
    out.sum().backward()
    assert mha.in_proj_weight.grad is not None and mha.out_proj.weight.grad is not None
    with pytest.raises(ValueError, match="multiple of num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(volta.ShapeError, match=r"\(2, 5, 8\).*\(2, 5, 6\)"):
        mha(x, x, volta.tensor(rng.standard_normal((2, 5, 6)), dtype="float32"))
    with pytest.raises(ValueError, match="is_causal"):
        mha(x, x, x, is_causal=True)


def np_last_norm(x, w, b, eps=1e-5):
    """LayerNorm over the last axis, in numpy."""
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_against_numpy(norm_first, device, rng):
    volta.manual_seed(1)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, norm_first=norm_first).to(device)
    layer.eval()  # dropout off
    names = [n for n, _ in layer.named_parameters()]
    assert names[:4] == ["self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias"]
    assert names[4:] == ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]
    x = rng.standard_normal((2, 5, 8))
    out = layer(volta.tensor(x, device=device, dtype="float32"))
    p = {n: arr(t) for n, t in layer.named_parameters()}

    def attend(y):
        return np_multihead(layer.self_attn, y, y, y)[0]

    def feed(y):
        return np.maximum(y @ p["linear1.weight"].T + p["linear1.bias"], 0) @ p["linear2.weight"].T + p["linear2.bias"]

    def norm(y, i):
        return np_last_norm(y, p[f"norm{i}.weight"], p[f"norm{i}.bias"])

    if norm_first:
        y = x + attend(norm(x, 1))
        want = y + feed(norm(y, 2))
    else:
        y = norm(x + attend(x), 1)
        want = norm(y + feed(y), 2)
    assert_close(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_decoder_layer_against_numpy(norm_first, device, rng):
    volta.manual_seed(2)
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, norm_first=norm_first, activation="gelu").to(device)
    layer.eval()
    names = [n for n, _ in layer.named_parameters()]
    assert names[4:8] == ["multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias"]
    assert names[-2:] == ["norm3.weight", "norm3.bias"]
    tgt, memory = rng.standard_normal((4, 2, 8)), rng.standard_normal((6, 2, 8))  # (T, N, E), (S, N, E)
    causal = np.triu(np.ones((4, 4), dtype=bool), 1)
    t = lambda a: volta.tensor(a, device=device, dtype="float32")  # noqa: E731
    out = layer(t(tgt), t(memory), tgt_mask=causal, tgt_is_causal=True)
    p = {n: arr(v) for n, v in layer.named_parameters()}
    erf = np.vectorize(math.erf)

    def feed(y):
        h = y @ p["linear1.weight"].T + p["linear1.bias"]
        return (0.5 * h * (1 + erf(h / np.sqrt(2)))) @ p["linear2.weight"].T + p["linear2.bias"]

    branches = [
        lambda y: np_multihead(layer.self_attn, y, y, y, attn_mask=causal)[0],
        lambda y: np_multihead(layer.multihead_attn, y, memory, memory)[0],
        feed,
    ]
    x = tgt
    for i, branch in enumerate(branches, 1):
        norm = lambda y: np_last_norm(y, p[f"norm{i}.weight"], p[f"norm{i}.bias"])  # noqa: E731
        x = x + branch(norm(x)) if norm_first else norm(x + branch(x))
    assert_close(out, x, rtol=1e-4, atol=1e-5)
    decoder = nn.TransformerDecoder(layer, 2)
    first, second = decoder.layers[0], decoder.layers[1]
    assert_close(decoder(t(tgt), t(memory)), arr(second(first(t(tgt), t(memory)), t(memory))), rtol=1e-6, atol=1e-6)


def test_transformer_is_an_encoder_and_a_decoder(rng):
    volta.manual_seed(3)
    model = nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16, dropout=0.0, batch_first=True)
    names = [n for n, _ in model.named_parameters()]
    assert names[0] == "encoder.layers.0.self_attn.in_proj_weight"
    assert "encoder.norm.weight" in names and names[-1] == "decoder.norm.bias"
    # Xavier-uniform weight matrices, as PyTorch's.
    w = arr(model.encoder.layers[1].linear1.weight)
    assert np.abs(w).max() <= math.sqrt(6 / (16 + 8)) and np.abs(w).max() > 0.5 * math.sqrt(6 / 24)
    src = volta.tensor(rng.standard_normal((2, 5, 8)), dtype="float32")
    tgt = volta.tensor(rng.standard_normal((2, 3, 8)), dtype="float32")
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert_close(mask, np.triu(np.full((3, 3), -np.inf), 1))
    out = model(src, tgt, tgt_mask=mask, tgt_is_causal=True)
    memory = model.encoder(src)
    assert_close(out, arr(model.decoder(tgt, memory, mask)), rtol=1e-6, atol=1e-6)
    out.sum().backward()
    assert all(p.grad is not None for _, p in model.named_parameters())


def test_transformer_encoder_copies_its_layer(rng):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    names = [n for n, _ in encoder.named_parameters()]
    assert "layers.1.self_attn.in_proj_weight" in names and names[-1] == "norm.bias"
    first, second = encoder.layers[0], encoder.layers[1]
    # Copies in memory of their own, trainable, each starting as the layer given.
    np.testing.assert_array_equal(arr(first.linear1.weight), arr(layer.linear1.weight))
    assert first.linear1.weight.requires_grad and first.linear1.weight is not layer.linear1.weight
    with volta.no_grad():
        first.linear1.weight.fill_(0.0)
    assert np.abs(arr(second.linear1.weight)).sum() > 0 and np.abs(arr(layer.linear1.weight)).sum() > 0
    x = volta.tensor(rng.standard_normal((5, 2, 8)), dtype="float32")
    mask = np.triu(np.ones((5, 5), dtype=bool), 1)
    want = encoder.norm(second(first(x, mask), mask))
    assert_close(encoder(x, mask), arr(want), rtol=1e-6, atol=1e-6)
    encoder(x, mask, is_causal=True).sum().backward()
    assert all(t.grad is not None for _, t in encoder.named_parameters())
    with pytest.raises(ValueError, match="activation"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


def test_a_deep_copy_of_a_tensor_has_its_own_memory(device):
    import copy

    t = volta.ones(3, device=device, requires_grad=True)
    c = copy.deepcopy(t)
    assert c.requires_grad and c.is_leaf
    with volta.no_grad():
        c.fill_(2.0)
    assert_close(t, np.ones(3))
    assert not copy.deepcopy(volta.ones(2)).requires_grad


def test_functional_is_also_under_nn_as_in_pytorch():
    import volta.nn.functional as NF

    assert NF.scaled_dot_product_attention is F.scaled_dot_product_attention
    assert volta.nn.functional.cross_entropy is F.cross_entropy
    assert sorted(NF.__all__) == sorted(F.__all__)


def test_scaled_dot_product_attention_masks_and_errors(device, rng):
    q, k, v = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 6))
    t = lambda a: volta.tensor(a, device=device)  # noqa: E731
    keep = rng.random((3, 5)) < 0.7
    keep[:, 0] = True  # every query sees a key
    assert_close(F.scaled_dot_product_attention(t(q), t(k), t(v), keep), np_attention(q, k, v, keep), rtol=1e-4, atol=1e-5)
    bias = rng.standard_normal((2, 1, 3, 5))
    assert_close(F.scaled_dot_product_attention(t(q), t(k), t(v), t(bias)), np_attention(q, k, v, bias), rtol=1e-4, atol=1e-5)
    sdpa = F.scaled_dot_product_attention
    with pytest.raises(volta.ShapeError, match=r"enable_gqa"):
        sdpa(t(q), t(k[:, :1]), t(v[:, :1]))
    with pytest.raises(volta.ShapeError, match=r"\(2, 2, 3, 4\).*\(2, 2, 5, 3\)"):
        sdpa(t(q), t(k[..., :3]), t(v))
    with pytest.raises(volta.ShapeError, match=r"same rank"):
        sdpa(t(q), t(k[0]), t(v[0]))
    with pytest.raises(ValueError, match=r"not both"):
        sdpa(t(q), t(k), t(v), keep, is_causal=True)
    with pytest.raises(ValueError, match=r"dropout_p"):
        sdpa(t(q), t(k), t(v[..., :4]), dropout_p=1.5)
    # Dropout is seeded, and drawn whenever dropout_p > 0, as PyTorch.
    v4 = t(v[..., :4])
    volta.manual_seed(5)
    a = arr(sdpa(t(q), t(k), v4, dropout_p=0.5))
    volta.manual_seed(5)
    np.testing.assert_array_equal(arr(sdpa(t(q), t(k), v4, dropout_p=0.5)), a)
    assert not np.allclose(a, arr(sdpa(t(q), t(k), v4)))


def test_masks_that_hide_padding_run_fused_as_key_ranges():
    pad = F._padding
    keys = np.ones((3, 1, 1, 6), dtype=bool)
    keys[1, ..., 4:] = False  # right padding
    keys[2, ..., :2] = False  # left padding
    assert pad(keys, (3, 2, 5, 6)) == (False, [(0, 6), (0, 4), (2, 6)])
    additive = np.where(keys, 0.0, -np.inf)  # as MultiheadAttention builds it
    assert pad(additive, (3, 2, 5, 6)) == (False, [(0, 6), (0, 4), (2, 6)])
    causal = np.tril(np.ones((5, 6), dtype=bool))
    assert pad(causal & keys, (3, 2, 5, 6)) == (True, [(0, 5), (0, 4), (2, 5)])
    assert pad(causal, (3, 2, 5, 6)) == (True, [(0, 5)] * 3)  # one mask for the batch
    assert pad(np.ones(6, dtype=bool), (2, 1, 3, 6)) == (False, [(0, 6)] * 2)
    assert pad(np.zeros((3, 1, 1, 6), dtype=bool), (3, 2, 5, 6)) == (False, [(0, 0)] * 3)
    # Others compose: a hole, a mask per head, per query, other values, a Tensor.
    holes = keys.copy()
    holes[0, ..., 3] = False
    assert pad(holes, (3, 2, 5, 6)) is None
    per_head = np.ones((3, 2, 1, 6), dtype=bool)
    per_head[0, 1, 0, 5] = False
    assert pad(per_head, (3, 2, 5, 6)) is None
    assert pad(np.triu(np.ones((5, 6), dtype=bool)), (3, 2, 5, 6)) is None
    assert pad(np.full((1, 6), 0.5), (3, 2, 5, 6)) is None
    assert pad(volta.tensor(np.zeros(6)), (3, 2, 5, 6)) is None
    assert pad(np.ones((2, 6), dtype=bool), (3, 2, 5, 6)) is None  # does not broadcast


@pytest.mark.parametrize("fused", [True, False])
def test_scaled_dot_product_attention_over_padded_batches(fused, device, rng):
    q, k, v = rng.standard_normal((3, 2, 5, 4)), rng.standard_normal((3, 2, 5, 4)), rng.standard_normal((3, 2, 5, 4))
    if not fused:
        v = rng.standard_normal((3, 2, 5, 3))  # values of another width compose
    t = lambda a: volta.tensor(a, device=device, requires_grad=True)  # noqa: E731
    keys = np.ones((3, 1, 1, 5), dtype=bool)
    keys[1, ..., 3:] = False
    keys[2, ..., :3] = False  # left padding: under the causal mask, rows 0-2 see nothing
    for mask in (keys, np.where(keys, 0.0, -np.inf), keys & np.tril(np.ones((5, 5), dtype=bool))):
        want = np_attention(q, k, v, mask if mask.dtype == bool else mask)
        tq, tk, tv = t(q), t(k), t(v)
        out = F.scaled_dot_product_attention(tq, tk, tv, mask)
        assert_close(out, want, rtol=1e-4, atol=1e-5)
        out.sum().backward()
        for x in (tq, tk, tv):
            assert np.isfinite(arr(x.grad)).all()
        # Padding passes no gradient: batch 1's keys 3 and 4 are never seen.
        np.testing.assert_array_equal(arr(tk.grad)[1, :, 3:], 0.0)
    # Rows that see no key are zeros, not NaN (PyTorch's _safe_softmax).
    last = keys & np.tril(np.ones((5, 5), dtype=bool))
    np.testing.assert_array_equal(arr(F.scaled_dot_product_attention(t(q), t(k), t(v), last))[2, :, :3], 0.0)


# ---- functional: gradients, and the GPU against the CPU -------------------------------


def normal(*shape):
    return lambda r: r.standard_normal(shape)


def distinct(*shape):
    n = int(np.prod(shape))
    return lambda r: (r.permutation(n) * 0.25 - n * 0.125).reshape(shape)


def inputs(*makers):
    return lambda r: tuple(m(r) for m in makers)


def _dropout(x):
    volta.manual_seed(11)  # the same mask on every call
    return F.dropout(x, 0.4)


def _sdpa_dropout(q, k, v):
    volta.manual_seed(12)  # the same mask on every call
    return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)


# Keys 0-6, 0-3 and 2-6 of three batch elements (padding), as a mask.
PADDED = np.arange(6)[None, None, None, :] < np.array([6, 3, 6])[:, None, None, None]
PADDED[2, ..., :2] = False

FUNCTIONAL_CASES = [
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b), inputs(normal(2, 2, 5, 4), normal(3, 2, 3, 2), normal(3))),
    ("conv2d(stride,padding)", lambda x, w: F.conv2d(x, w, None, 2, 1), inputs(normal(1, 2, 5, 5), normal(2, 2, 3, 3))),
    ("conv2d(dilation)", lambda x, w, b: F.conv2d(x, w, b, dilation=(2, 1), padding=(1, 0)), inputs(normal(1, 1, 6, 5), normal(2, 1, 3, 2), normal(2))),
    ("conv2d(groups)", lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), groups=2), inputs(normal(2, 4, 4, 5), normal(2, 2, 2, 2), normal(2))),
    ("conv2d(depthwise)", lambda x, w: F.conv2d(x, w, padding=1, groups=3), inputs(normal(1, 3, 4, 4), normal(3, 1, 3, 3))),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), inputs(distinct(2, 2, 4, 4))),
    ("max_pool2d(overlap,padding)", lambda x: F.max_pool2d(x, 3, 2, 1), inputs(distinct(1, 2, 5, 5))),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, (2, 3), 1), inputs(normal(2, 2, 4, 5))),
    ("avg_pool2d(padding)", lambda x: F.avg_pool2d(x, 3, 2, 1), inputs(normal(1, 2, 5, 4))),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, 4, w, b), inputs(normal(3, 4), normal(4), normal(4))),
    ("layer_norm(2 dims)", lambda x, w: F.layer_norm(x, (2, 3), w, eps=1e-3), inputs(normal(2, 2, 3), normal(2, 3))),
    ("rms_norm", lambda x, w: F.rms_norm(x, 5, w), inputs(normal(3, 5), normal(5))),
    ("rms_norm(no weight)", lambda x: F.rms_norm(x, (2, 2)), inputs(normal(3, 2, 2))),
    ("batch_norm(training)", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), inputs(normal(3, 2, 2, 2), normal(2), normal(2))),
    ("batch_norm(eval)", lambda x, m, v, w: F.batch_norm(x, m, v.abs() + 0.5, w, None, training=False), inputs(normal(2, 3, 2, 2), normal(3), normal(3), normal(3))),
    ("embedding", lambda w: F.embedding([[0, 2, 2], [3, 0, 2]], w), inputs(normal(4, 3))),
    ("cross_entropy", lambda x: F.cross_entropy(x, [1, 0, 3]), inputs(normal(3, 4))),
    ("cross_entropy(sum,smoothing)", lambda x: F.cross_entropy(x, [2, 2, 0], "sum", 0.2), inputs(normal(3, 4))),
    ("cross_entropy(none)", lambda x: F.cross_entropy(x, [3, 1], reduction="none", label_smoothing=0.05), inputs(normal(2, 4))),
    ("nll_loss", lambda x: F.nll_loss(x.log_softmax(1), [1, 0, 3]), inputs(normal(3, 4))),
    ("mse_loss", lambda x, y: F.mse_loss(x, y), inputs(normal(2, 3), normal(2, 3))),
    ("mse_loss(sum)", lambda x, y: F.mse_loss(x, y, "sum"), inputs(normal(2, 3), normal(2, 3))),
    ("l1_loss", lambda x, y: F.l1_loss(x, y), inputs(normal(2, 3), normal(2, 3))),
    ("l1_loss(none)", lambda x, y: F.l1_loss(x, y, reduction="none"), inputs(normal(2, 3), normal(2, 3))),
    ("linear", lambda x, w, b: F.linear(x, w, b), inputs(normal(2, 5, 3), normal(4, 3), normal(4))),
    ("linear(1-D, no bias)", lambda x, w: F.linear(x, w), inputs(normal(3), normal(4, 3))),
    ("dropout", _dropout, inputs(normal(4, 5))),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), inputs(normal(2, 2, 3, 4), normal(2, 2, 5, 4), normal(2, 2, 5, 4))),
    ("sdpa(causal,gqa,scale)", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True), inputs(normal(1, 4, 5, 4), normal(1, 2, 5, 4), normal(1, 2, 5, 4))),
    ("sdpa(causal,3 of 5 keys,3-D)", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), inputs(normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 4))),
    ("sdpa(dropout)", _sdpa_dropout, inputs(normal(1, 2, 4, 4), normal(1, 2, 6, 4), normal(1, 2, 6, 4))),
    ("sdpa(bool mask,gqa,value width 3)", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, np.arange(5) % 2 == 0, enable_gqa=True), inputs(normal(1, 2, 3, 4), normal(1, 1, 5, 4), normal(1, 1, 5, 3))),
    ("sdpa(float mask)", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, np.linspace(-1, 1, 15).reshape(3, 5)), inputs(normal(2, 3, 4), normal(2, 5, 4), normal(2, 5, 4))),
    ("sdpa(padding,causal,scale)", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, PADDED & np.tril(np.ones((4, 6), dtype=bool)), scale=0.4), inputs(normal(3, 2, 4, 4), normal(3, 2, 6, 4), normal(3, 2, 6, 4))),
    ("conv net", lambda x, w, lw: F.linear(F.max_pool2d(F.conv2d(x, w, padding=1).relu(), 2).flatten(1), lw), inputs(normal(2, 1, 4, 4), normal(2, 1, 3, 3), normal(3, 8))),
]
FUNCTIONAL_IDS = [c[0] for c in FUNCTIONAL_CASES]


@pytest.mark.parametrize("name, fn, make", FUNCTIONAL_CASES, ids=FUNCTIONAL_IDS)
def test_functional_gradients_against_finite_differences(name, fn, make):
    gradcheck(fn, *make(np.random.default_rng(0)))


@requires_gpu
@pytest.mark.parametrize("name, fn, make", FUNCTIONAL_CASES, ids=FUNCTIONAL_IDS)
def test_functional_gpu_agrees_with_cpu(name, fn, make):
    cpu_vs_gpu(fn, *make(np.random.default_rng(0)))


# ---- layers -----------------------------------------------------------------------------


class Net(nn.Module):
    def __init__(self, conv_bias: bool = True) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=conv_bias)
        self.bn1 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 8), nn.ReLU(), nn.Dropout(0.0), nn.Linear(8, 3))

    def forward(self, x):
        return self.head(self.pool(self.bn1(self.conv1(x)).relu()))


def test_module_parameters_buffers_and_names():
    volta.manual_seed(0)
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "conv1.weight",
        "conv1.bias",
        "bn1.weight",
        "bn1.bias",
        "head.1.weight",
        "head.1.bias",
        "head.4.weight",
        "head.4.bias",
    ]
    assert [n for n, _ in net.named_buffers()] == ["bn1.running_mean", "bn1.running_var"]
    assert list(net.state_dict()) == [
        "conv1.weight",
        "conv1.bias",
        "bn1.weight",
        "bn1.bias",
        "bn1.running_mean",
        "bn1.running_var",
        "head.1.weight",
        "head.1.bias",
        "head.4.weight",
        "head.4.bias",
    ]
    assert all(p.requires_grad and p.is_leaf for p in net.parameters())
    assert not any(t.requires_grad for t in net.state_dict().values())
    assert net.conv1.weight.shape == (4, 1, 3, 3) and net.head[1].weight.shape == (8, 64)
    assert len(net.head) == 5 and isinstance(list(net.head)[2], nn.ReLU)
    assert "Conv2d" in repr(net)
    # Initialisation as PyTorch: uniform in ±1/sqrt(fan_in).
    assert np.abs(arr(net.conv1.weight)).max() <= 1 / 3
    assert np.abs(arr(net.head[1].weight)).max() <= 1 / 8


def test_module_forward_matches_functional(rng):
    volta.manual_seed(0)
    net = Net()
    x = volta.tensor(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))
    y = net(x)
    assert y.shape == (2, 3)
    h = F.conv2d(x, net.conv1.weight, net.conv1.bias, padding=1)
    h = F.batch_norm(h, None, None, net.bn1.weight, net.bn1.bias, training=True)
    h = F.max_pool2d(h.relu(), 2).flatten(1)
    h = F.linear(F.linear(h, net.head[1].weight, net.head[1].bias).relu(), net.head[4].weight, net.head[4].bias)
    assert_close(y, arr(h), rtol=1e-5, atol=1e-5)


def test_train_and_eval_modes(rng):
    bn = nn.BatchNorm2d(2, momentum=0.5)
    x = volta.tensor(rng.standard_normal((3, 2, 2, 2)) * 2 + 1, dtype="float32")
    bn(x)  # training: the running statistics move
    assert not np.allclose(arr(bn.running_mean), 0)
    rm = arr(bn.running_mean)
    bn.eval()
    assert not bn.training
    y = bn(x)
    np.testing.assert_array_equal(arr(bn.running_mean), rm)  # evaluation: they stay
    expected = (arr(x) - rm[None, :, None, None]) / np.sqrt(arr(bn.running_var)[None, :, None, None] + 1e-5)
    assert_close(y, expected, rtol=1e-5, atol=1e-5)
    drop = nn.Sequential(nn.Dropout(0.9))
    drop.eval()
    assert_close(drop(x), arr(x))
    drop.train()
    assert all(m.training for m in drop.modules())


def test_layer_modules(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = volta.tensor(x)
    assert_close(nn.LayerNorm(4)(t), np_layer_norm(x, 1), rtol=1e-5, atol=1e-5)
    assert_close(nn.LayerNorm((3, 4), elementwise_affine=False)(t), np_layer_norm(x, 2), rtol=1e-5, atol=1e-5)
    assert_close(nn.RMSNorm(4)(t), np_rms_norm(x, 1), rtol=1e-5, atol=1e-5)
    assert_close(nn.Softmax(1)(t), np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert_close(nn.Identity()(t), x)
    assert_close(nn.Flatten()(t), x.reshape(2, 12))
    assert_close(nn.Flatten(0, 1)(t), x.reshape(6, 4))
    for mod, ref in [(nn.ReLU(), lambda a: np.maximum(a, 0)), (nn.Tanh(), np.tanh), (nn.Sigmoid(), lambda a: 1 / (1 + np.exp(-a))), (nn.SiLU(), lambda a: a / (1 + np.exp(-a)))]:
        assert_close(mod(t), ref(x), rtol=1e-5, atol=1e-6)
    assert nn.GELU()(t).shape == t.shape
    emb = nn.Embedding(5, 2)
    assert_close(emb([[4, 0]]), arr(emb.weight)[[[4, 0]]])
    ap = nn.AvgPool2d(2)(volta.tensor(x[None]))
    assert_close(ap, np_pool(x[None].astype(np.float64), 2, op="avg"), rtol=1e-5, atol=1e-6)
    ml = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 1)])
    ml.append(nn.ReLU())
    assert len(ml) == 3 and [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(3, 2, bias=False)), ("act", nn.ReLU())]))
    assert [n for n, _ in seq.named_parameters()] == ["fc.weight"]
    assert nn.Parameter(volta.ones(2)).requires_grad


def test_module_zero_grad_and_to(device):
    volta.manual_seed(0)
    net = Net().to(device)
    assert all(str(p.device) == device for p in net.parameters())
    assert all(str(b.device) == device for b in net.buffers())
    assert all(p.requires_grad and p.is_leaf for p in net.parameters())
    x = volta.randn(2, 1, 8, 8, device=device)
    net(x).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    half = Net().to("float16")
    assert all(p.dtype == "float16" for p in half.parameters())


def test_state_dict_round_trip_through_a_file(tmp_path, device, rng):
    volta.manual_seed(1)
    a = Net().to(device)
    a(volta.randn(4, 1, 8, 8, device=device))  # moves the batch-norm statistics
    path = tmp_path / "net.safetensors"
    volta.save_file(a.state_dict(), path)
    volta.manual_seed(2)
    b = Net().to(device)
    missing, unexpected = b.load_state_dict(volta.load_file(path, device=device))
    assert missing == [] and unexpected == []
    for (k, va), (k2, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(arr(va), arr(vb))
    a.eval()
    b.eval()
    x = volta.tensor(rng.standard_normal((2, 1, 8, 8)).astype(np.float32), device=device)
    np.testing.assert_array_equal(arr(a(x)), arr(b(x)))
    # The loaded parameters are still trainable leaves.
    assert all(p.requires_grad and p.is_leaf for p in b.parameters())
    # PyTorch's batch-norm counter is skipped; strict=False reports the rest.
    state = dict(volta.load_file(path))
    state["bn1.num_batches_tracked"] = volta.tensor([3.0])
    del state["head.4.bias"]
    state["extra"] = volta.ones(1)
    missing, unexpected = b.load_state_dict(state, strict=False)
    assert missing == ["head.4.bias"] and unexpected == ["extra"]


def test_state_dict_interchange_with_the_safetensors_package(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy")
    volta.manual_seed(0)
    net = Net()
    path = tmp_path / "net.safetensors"
    st_numpy.save_file({k: arr(v) for k, v in net.state_dict().items()}, str(path))
    volta.manual_seed(5)
    other = Net()
    other.load_state_dict(volta.load_file(path))
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(arr(other.state_dict()[k]), arr(v))


# ---- optimisers against numpy implementations of PyTorch's formulas ------------------

C = np.array([[1.0, 2.0, 0.5], [3.0, 0.25, 1.5]])
D = np.array([[0.5, -1.0, 2.0], [-0.3, 0.7, 0.1]])
P0 = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.0]])


def grad_of(p):
    """The gradient of L(p) = Σ c·p²/2 + Σ d·p (it depends on p: the steps compound)."""
    return C * p + D


def np_sgd(p, steps, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
    buf = None
    for _ in range(steps):
        g = grad_of(p) + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def np_adam(p, steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=False):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1, b2 = betas
    for t in range(1, steps + 1):
        g = grad_of(p)
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1**t)
        vhat = v / (1 - b2**t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def run_volta(make_opt, steps, device, dtype):
    p = volta.tensor(P0, dtype=dtype, device=device, requires_grad=True)
    c = volta.tensor(C, dtype=dtype, device=device)
    d = volta.tensor(D, dtype=dtype, device=device)
    opt = make_opt([p])
    for _ in range(steps):
        opt.zero_grad()
        loss = (c * p * p).sum() * 0.5 + (d * p).sum()
        loss.backward()
        opt.step()
    assert p.requires_grad and p.is_leaf
    return arr(p)


OPTIMISERS = [
    ("SGD", lambda ps: optim.SGD(ps, lr=0.1), lambda p, n: np_sgd(p, n, 0.1)),
    ("SGD(momentum)", lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9), lambda p, n: np_sgd(p, n, 0.05, 0.9)),
    ("SGD(nesterov)", lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True), lambda p, n: np_sgd(p, n, 0.05, 0.8, nesterov=True)),
    ("SGD(weight_decay)", lambda ps: optim.SGD(ps, lr=0.1, weight_decay=0.1), lambda p, n: np_sgd(p, n, 0.1, weight_decay=0.1)),
    ("SGD(all)", lambda ps: optim.SGD(ps, lr=0.03, momentum=0.5, weight_decay=0.2, nesterov=True), lambda p, n: np_sgd(p, n, 0.03, 0.5, 0.2, True)),
    ("Adam", lambda ps: optim.Adam(ps, lr=0.1), lambda p, n: np_adam(p, n, 0.1)),
    ("Adam(betas,eps)", lambda ps: optim.Adam(ps, lr=0.05, betas=(0.8, 0.9), eps=1e-3), lambda p, n: np_adam(p, n, 0.05, (0.8, 0.9), 1e-3)),
    ("Adam(weight_decay)", lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.3), lambda p, n: np_adam(p, n, 0.05, weight_decay=0.3)),
    ("AdamW", lambda ps: optim.AdamW(ps, lr=0.05), lambda p, n: np_adam(p, n, 0.05, weight_decay=0.01, decoupled=True)),
    ("AdamW(weight_decay)", lambda ps: optim.AdamW(ps, lr=0.1, betas=(0.5, 0.6), weight_decay=0.5), lambda p, n: np_adam(p, n, 0.1, (0.5, 0.6), weight_decay=0.5, decoupled=True)),
]


@pytest.mark.parametrize("name, make, ref", OPTIMISERS, ids=[o[0] for o in OPTIMISERS])
def test_optimisers_against_numpy(name, make, ref, device):
    steps = 6
    expected = ref(P0.copy(), steps)
    if device == "cpu":
        assert_close(run_volta(make, steps, "cpu", "float64"), expected, rtol=1e-12, atol=1e-12)
    assert_close(run_volta(make, steps, device, "float32"), expected, rtol=1e-5, atol=1e-5)


def test_optimiser_param_groups_and_parameters_without_grad():
    a = volta.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    b = volta.tensor([3.0], dtype="float64", requires_grad=True)
    unused = volta.tensor([5.0], dtype="float64", requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": [b, unused], "lr": 0.5}], lr=0.1)
    (a * a).sum().backward()
    (b * 2).sum().backward()
    opt.step()
    assert_close(a, [1.0 - 0.2, 2.0 - 0.4], atol=1e-15)
    assert_close(b, [3.0 - 1.0], atol=1e-15)
    assert_close(unused, [5.0])  # no gradient: left alone
    adam = optim.Adam([unused, b], lr=0.1)
    b.grad = None
    (b * 2).sum().backward()
    adam.step()
    adam.step()
    assert adam.state[id(b)]["step"] == 2 and adam.state[id(unused)]["step"] == 0
    assert_close(unused, [5.0])
    opt.zero_grad()
    assert b.grad is None


@requires_gpu
def test_adam_steps_a_group_across_devices_and_dtypes_as_each_alone():
    # One group of parameters on both devices and in two dtypes steps together
    # (the GPU ones many to a launch); each must move as it does alone.
    def params():
        r = np.random.default_rng(1)
        shapes = [(5, "float32", "gpu"), (300, "float32", "cpu"), (7, "float64", "cpu"), (257, "float32", "gpu")]
        return [volta.tensor(r.standard_normal(n), dtype=dt, device=dev, requires_grad=True) for n, dt, dev in shapes]

    together, alone = params(), params()
    group = optim.AdamW(together, lr=0.05)
    singles = [optim.AdamW([p], lr=0.05) for p in alone]
    for s in range(3):
        for ps in (together, alone):
            for p in ps:
                p.grad = None
                ((p * p).sum() * (s + 1.0)).backward()
        group.step()
        for o in singles:
            o.step()
    for a, b in zip(together, alone):
        assert_close(a, arr(b), rtol=1e-6, atol=1e-6)
    assert all(group.state[id(p)]["step"] == 3 for p in together)


# ---- a small conv net trained on both devices ------------------------------------------


def _train(device, steps=4):
    volta.manual_seed(0)
    # No bias before the batch norm (as usual): its gradient is 0 up to rounding,
    # which Adam's 1/sqrt(v) would blow up into device-dependent steps.
    net = Net(conv_bias=False).to(device)
    opt = optim.Adam(net.parameters(), lr=0.01)
    r = np.random.default_rng(0)
    x = volta.tensor(r.standard_normal((8, 1, 8, 8)).astype(np.float32), device=device)
    y = r.integers(0, 3, 8)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: arr(v) for k, v in net.state_dict().items()}


def test_conv_net_trains_on_the_cpu():
    losses, _ = _train("cpu", steps=8)
    assert losses[-1] < losses[0]


@requires_gpu
def test_conv_net_trains_the_same_on_gpu_and_cpu():
    cpu_losses, cpu_state = _train("cpu")
    gpu_losses, gpu_state = _train("gpu")
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-4)
    for k in cpu_state:
        np.testing.assert_allclose(gpu_state[k], cpu_state[k], rtol=1e-4, atol=1e-4, err_msg=k)
