"""Writes `llama_fixture.rs`, the reference for `volta/tests/llama_reference.rs`.

An implementation of SmolLM2-135M-Instruct independent of Volta's:

* **weights**: read with `gguf.GGUFReader` and dequantised with the `gguf` package's
  own `gguf.quants.dequantize` (Q8_0 embedding, Q4_1 matrices, F32 norms);
* **forward**: a float32 numpy Llama written from llama.cpp's `LLM_ARCH_LLAMA` graph:
  RMSNorm (eps from `llama.attention.layer_norm_rms_epsilon`), "normal" RoPE on
  adjacent pairs `(x[2i], x[2i+1])` (convert_hf_to_gguf permutes the q/k rows so the
  GGUF's heads use that layout rather than HF's rotate-half), base
  `llama.rope.freq_base`, grouped-query causal attention (9 query heads share 3 kv
  heads, head dim 64, scale 1/8), SwiGLU feed-forward, final RMSNorm and an output
  layer tied to `token_embd.weight`. It recomputes the whole sequence for every new
  token (no KV cache), so it also differs from Volta in how decoding is organised;
* **tokens**: `tokenizer.py`'s Python port of llama.cpp's `smollm` BPE (`encode_a`);
* **prompt**: ChatML written out here by hand, checked against the GGUF's jinja
  `tokenizer.chat_template` rendered by `jinja2` (`tokenizer.render`).

For each prompt the fixture holds the prompt's token ids, the top-5 `(id, logit)` of
the next-token logits at positions 0-3 and at the last prompt position, and the greedy
continuation (argmax, up to `MAX_NEW` tokens or `<|im_end|>`), with the smallest gap
between the best and second-best logit along it (how far from a tie greedy decoding is).

Run: `pip install gguf numpy regex jinja2`, then
`python3 llama_reference.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]` in this folder
(default: `$VOLTA_SMOLLM2`, else SmolLM2-135M-Instruct.Q4_1.gguf in Volta's cache
folder: `$VOLTA_CACHE_DIR`, else `$XDG_CACHE_HOME/volta`, else `~/.cache/volta`).
About a minute on 2 cores.
"""
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer as tok  # noqa: E402  (reads the same GGUF, from argv/env like this script)

PATH = tok.PATH
MAX_NEW = 16
TOP = 5
POSITIONS = [0, 1, 2, 3]  # and the last prompt position
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QUESTIONS = [
    "What is the capital of France?",
    "What is 7 times 8?",
    "What color is the sky?",
]


def chatml(user):
    """SmolLM2's ChatML with its default system prompt and the generation prompt."""
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{user}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


# ---------------------------------------------------------------- the model

reader = gguf.GGUFReader(PATH)
field = {k: f.contents() for k, f in reader.fields.items()}
assert field["general.architecture"] == "llama"
N_LAYER = int(field["llama.block_count"])
N_EMBD = int(field["llama.embedding_length"])
N_HEAD = int(field["llama.attention.head_count"])
N_KV = int(field["llama.attention.head_count_kv"])
HEAD_DIM = N_EMBD // N_HEAD
EPS = np.float32(field["llama.attention.layer_norm_rms_epsilon"])
ROPE_BASE = float(field["llama.rope.freq_base"])
assert (N_HEAD, N_KV, HEAD_DIM) == (9, 3, 64)
assert int(field.get("llama.rope.dimension_count", HEAD_DIM)) == HEAD_DIM
tensors = {t.name: t for t in reader.tensors}


def weight(name):
    """The tensor as float32 numpy, rows = ggml's ne[1] (out features), cols = ne[0]."""
    t = tensors[name]
    w = dequantize(t.data, t.tensor_type).astype(np.float32)
    return w.reshape([int(d) for d in reversed(t.shape)])


EMBD = weight("token_embd.weight")  # (vocab, n_embd)
OUT_NORM = weight("output_norm.weight")
assert "output.weight" not in tensors  # tied to the embedding
BLOCKS = [
    {
        k: weight(f"blk.{i}.{k}.weight")
        for k in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
    }
    for i in range(N_LAYER)
]


def rms_norm(x, w):
    x = x.astype(np.float32)
    ms = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return (x / np.sqrt(ms + EPS)) * w


def rope(x):
    """x: (heads, T, d), positions 0..T-1; rotates the adjacent pairs (x[2i], x[2i+1])."""
    _, t, d = x.shape
    inv = ROPE_BASE ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    ang = np.arange(t, dtype=np.float64)[:, None] * inv[None, :]  # (T, d/2)
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out


def silu(x):
    return x / (np.float32(1) + np.exp(-x))


def forward(ids):
    """Next-token logits at every position of `ids`: (T, vocab) float32."""
    t = len(ids)
    x = EMBD[np.asarray(ids)]
    mask = np.triu(np.full((t, t), -np.inf, dtype=np.float32), 1)
    group = N_HEAD // N_KV
    for b in BLOCKS:
        h = rms_norm(x, b["attn_norm"])
        q = (h @ b["attn_q"].T).reshape(t, N_HEAD, HEAD_DIM).transpose(1, 0, 2)
        k = (h @ b["attn_k"].T).reshape(t, N_KV, HEAD_DIM).transpose(1, 0, 2)
        v = (h @ b["attn_v"].T).reshape(t, N_KV, HEAD_DIM).transpose(1, 0, 2)
        q, k = rope(q), rope(k)
        # query head j reads kv head j // group (llama.cpp's GQA broadcast)
        k = np.repeat(k, group, axis=0)
        v = np.repeat(v, group, axis=0)
        s = (q @ k.transpose(0, 2, 1)) * np.float32(1.0 / np.sqrt(HEAD_DIM)) + mask
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        p = s / s.sum(axis=-1, keepdims=True)
        a = (p @ v).transpose(1, 0, 2).reshape(t, N_EMBD)
        x = x + a @ b["attn_output"].T
        h = rms_norm(x, b["ffn_norm"])
        x = x + (silu(h @ b["ffn_gate"].T) * (h @ b["ffn_up"].T)) @ b["ffn_down"].T
    return (rms_norm(x, OUT_NORM) @ EMBD.T).astype(np.float32)


def top(row, n=TOP):
    idx = np.argsort(-row, kind="stable")[:n]
    return [(int(i), float(row[i])) for i in idx]


# ---------------------------------------------------------------- the fixture


def run(question):
    text = chatml(question)
    assert text == tok.render([("user", question)]), "hand-written ChatML != the GGUF's jinja template"
    ids = tok.encode_a(text)
    assert tok.decode_a(ids) == text
    end = tok.VOCAB["<|im_end|>"]
    logits = forward(ids)
    tops = [(p, top(logits[p])) for p in POSITIONS + [len(ids) - 1]]
    new, margin, seq, row = [], np.inf, list(ids), logits[-1]
    for _ in range(MAX_NEW):
        (a, la), (_, lb) = top(row, 2)
        margin = min(margin, la - lb)
        new.append(a)
        if a == end:
            break
        seq.append(a)
        row = forward(seq)[-1]
    answer = tok.decode_a([i for i in new if i != end])
    print(f"{question!r}: {len(ids)} prompt tokens -> {answer!r} {new} (smallest top-1 gap {margin:.3f})")
    return question, text, ids, tops, new, answer, margin


def f32(v):
    """The shortest decimal that reads back as the same f32."""
    s = str(np.float32(v))
    return s if ("e" in s or "." in s) else s + ".0"


def main():
    cases = [run(q) for q in QUESTIONS]
    q, _, ids, _, _, answer, _ = cases[0]
    assert len(ids) == 37 and answer == "The capital of France is Paris.", (len(ids), answer)

    rs = tok.rust_str
    lines = [
        "// @generated by volta/tests/reference/llama_reference.py from SmolLM2-135M-Instruct.Q4_1.gguf",
        f"// with gguf {getattr(gguf, '__version__', None) or _pkg_version('gguf')} and numpy {np.__version__}. Do not edit: rerun the script.",
        "// An independent float32 numpy Llama on weights dequantised by `gguf.quants.dequantize`;",
        "// token ids from tokenizer.py's port of llama.cpp's BPE; ChatML written out by hand.",
        "",
        "/// One chat prompt's reference.",
        "pub struct Case {",
        "    /// The user message (SmolLM2's default system prompt, one user turn).",
        "    pub question: &'static str,",
        "    /// The rendered ChatML prompt, ending with `<|im_start|>assistant\\n`.",
        "    pub prompt: &'static str,",
        "    /// The prompt's token ids.",
        "    pub ids: &'static [u32],",
        f"    /// `(position, top-{TOP} (id, logit) of the next-token logits there)`, best first.",
        f"    pub top: &'static [(usize, [(u32, f32); {TOP}])],",
        f"    /// Greedy continuation: up to {MAX_NEW} tokens, ending at `<|im_end|>` if reached.",
        "    pub greedy: &'static [u32],",
        "    /// The continuation's text, `<|im_end|>` left out.",
        "    pub answer: &'static str,",
        "    /// The smallest gap between the best and second-best logit along the greedy path.",
        "    pub min_gap: f32,",
        "}",
        "",
        "pub const CASES: &[Case] = &[",
    ]
    for question, text, ids, tops, new, answer, margin in cases:
        lines += [
            "    Case {",
            f"        question: {rs(question)},",
            f"        prompt: {rs(text)},",
            f"        ids: &{ids},",
            "        top: &[",
        ]
        for p, t in tops:
            pairs = ", ".join(f"({i}, {f32(v)})" for i, v in t)
            lines.append(f"            ({p}, [{pairs}]),")
        lines += [
            "        ],",
            f"        greedy: &{new},",
            f"        answer: {rs(answer)},",
            f"        min_gap: {f32(margin)},",
            "    },",
        ]
    lines += ["];", ""]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "llama_fixture.rs"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(f"wrote {len(cases)} cases")


def _pkg_version(name):
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
