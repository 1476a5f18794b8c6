"""A GPT written in Python, trained from scratch on minGPT's addition task.

nanoGPT's model (``CausalSelfAttention``, ``MLP``, ``Block``, ``GPT``) with
``volta.nn`` layers and ``F.scaled_dot_product_attention``, which runs volta's fused
flash-attention kernels forward and backward. The task is the Rust example's
(``cargo run --release -p volta-examples --example gpt``): two n-digit numbers in,
their sum out with its digits reversed, scored on held-out problems. The model has
the Rust example's shapes and nanoGPT's parameter names, so the checkpoint ``--out``
writes scores there too:
``cargo run --release -p volta-examples --example gpt -- --init FILE --epochs 0``.

    python volta-py/examples/gpt.py [--digits 2] [--epochs 20] [--device cpu|gpu] [--out FILE]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import volta
import volta.functional as F
import volta.nn as nn
import volta.optim as optim


class CausalSelfAttention(nn.Module):
    """nanoGPT's: one projection to queries, keys and values, fused attention."""

    def __init__(self, width: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x: volta.Tensor) -> volta.Tensor:
        b, t, c = x.shape
        q, k, v = (
            part.reshape(b, t, self.heads, c // self.heads).transpose(1, 2)
            for part in self.c_attn(x).split(c, dim=2)
        )
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x: volta.Tensor) -> volta.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    """Pre-norm residual attention, then the feed-forward branch."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = MLP(width)

    def forward(self, x: volta.Tensor) -> volta.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token and position tables, ``layers`` blocks, a final norm and the head (the
    defaults: the Rust example's ``Adder``)."""

    def __init__(self, vocab: int = 10, block_size: int = 16, width: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(block_size, width)
        self.h = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab)

    def forward(self, ids: np.ndarray) -> volta.Tensor:
        x = self.wte(ids) + self.wpe(np.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def problems(digits: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of ``digits``-digit numbers (a seeded 20,000 beyond 2 digits) as
    sequences ``a``, ``b``, the sum reversed; a tenth held out."""
    rng = np.random.default_rng(seed)
    top = 10**digits
    if top * top <= 20_000:
        pairs = np.stack(np.meshgrid(np.arange(top), np.arange(top)), -1).reshape(-1, 2)
    else:
        pairs = rng.integers(0, top, size=(20_000, 2))
    pairs = pairs[rng.permutation(len(pairs))]

    def written(values: np.ndarray, width: int) -> np.ndarray:
        return (values[:, None] // 10 ** np.arange(width - 1, -1, -1)) % 10

    sums = written(pairs.sum(1), digits + 1)[:, ::-1]
    seqs = np.concatenate([written(pairs[:, 0], digits), written(pairs[:, 1], digits), sums], 1)
    held = max(len(seqs) // 10, 1)
    return seqs[held:], seqs[:held]


def sum_logits(model: GPT, seqs: np.ndarray, digits: int) -> volta.Tensor:
    """The logits at the positions that predict the sum's digits, ``(N·(digits+1), 10)``."""
    logits = model(seqs[:, :-1])
    return logits[:, 2 * digits - 1 :, :].reshape(-1, 10)


def exact_answers(model: GPT, seqs: np.ndarray, digits: int, device: str) -> float:
    """The share of problems whose whole sum the model gets right. It reads the true
    digits so far (one forward pass), which scores what greedy decoding would: each
    digit is right from the true prefix exactly when decoding never leaves it."""
    model.eval()
    with volta.no_grad():
        guess = sum_logits(model, seqs, digits).numpy().argmax(1).reshape(len(seqs), -1)
    model.train()
    return float((guess == seqs[:, 2 * digits :]).all(1).mean())


def train(
    digits: int = 2,
    epochs: int = 20,
    device: str = "cpu",
    seed: int = 0,
    batch: int = 64,
    lr: float = 3e-3,
    stop_at: float = 0.99,
    out: str | None = None,
) -> float:
    """Trains until ``stop_at`` of the held-out sums are right (or ``epochs`` pass);
    returns that share, and saves the weights to ``out`` (safetensors)."""
    if not 1 <= digits <= 5:
        raise ValueError(f"digits must be 1 to 5 (the positions hold 16), got {digits}")
    volta.manual_seed(seed)
    train_seqs, test_seqs = problems(digits, seed)
    model = GPT().to(device)
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    steps = len(train_seqs) // batch
    total = steps * epochs
    order_rng = np.random.default_rng(seed)
    accuracy = 0.0
    for epoch in range(1, epochs + 1):
        started = time.perf_counter()
        order = order_rng.permutation(len(train_seqs))
        loss_sum = 0.0
        for s in range(steps):
            step = (epoch - 1) * steps + s
            # One epoch of linear warm-up, then half a cosine to 0 (Rust's CosineWarmup).
            if step < steps:
                rate = lr * step / steps
            else:
                rate = lr * (1 + math.cos(math.pi * (step - steps) / max(total - steps, 1))) / 2
            for group in opt.param_groups:
                group["lr"] = rate
            seqs = train_seqs[order[s * batch : (s + 1) * batch]]
            loss = F.cross_entropy(sum_logits(model, seqs, digits), seqs[:, 2 * digits :].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.item()
        accuracy = exact_answers(model, test_seqs, digits, device)
        print(
            f"epoch {epoch:>2}/{epochs}  train loss {loss_sum / steps:.4f}  exact answers "
            f"{100 * accuracy:.2f}%  {steps / (time.perf_counter() - started):.1f} steps/s"
        )
        if accuracy >= stop_at:
            break
    if out is not None:
        volta.save_file(dict(model.state_dict()), out)
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digits", type=int, default=2, help="digits of each operand")
    parser.add_argument("--epochs", type=int, default=20, help="passes over the training problems")
    parser.add_argument("--device", default="cpu", help="cpu or gpu")
    parser.add_argument("--seed", type=int, default=0, help="seed of the problems, split and weights")
    parser.add_argument("--out", help="where to save the weights (safetensors)")
    args = parser.parse_args()
    accuracy = train(args.digits, args.epochs, args.device, args.seed, out=args.out)
    print(f"held-out sums exactly right: {100 * accuracy:.2f}%")


if __name__ == "__main__":
    main()
