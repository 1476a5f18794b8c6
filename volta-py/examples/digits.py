"""The main job's digits CNN, trained from Python.

The same layers as ``train/model.rs``, the same split of the bundled digits
(``volta.datasets.load_digits``), the same recipe as ``cargo run --release``
(AdamW at 3e-3 with weight decay 1e-4, cosine schedule with one epoch of warm-up,
label smoothing 0.05, gradients clipped at norm 5, batches of 32). The checkpoint it
writes loads in Rust: ``cargo run --release -- --evaluate runs/py-digits.safetensors``.

    python volta-py/examples/digits.py [--epochs 20] [--device cpu|gpu] [--out FILE]
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
from volta.datasets import load_digits
from volta.nn.utils import clip_grad_norm_


class DigitsCnn(nn.Module):
    """Two convolution blocks over 1×8×8 images, then a linear layer (as Rust's)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(64)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(64 * 2 * 2, 10)

    def forward(self, x: volta.Tensor) -> volta.Tensor:
        x = F.max_pool2d(self.bn1(self.conv1(x)).relu(), 2)
        x = F.max_pool2d(self.bn2(self.conv2(x)).relu(), 2)
        return self.fc(self.drop(x.flatten(1)))


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray, device: str) -> float:
    """Test accuracy in evaluation mode."""
    model.eval()
    with volta.no_grad():
        logits = model(volta.tensor(x, device=device)).numpy()
    model.train()
    return float((logits.argmax(1) == y).mean())


def train(epochs: int = 20, device: str = "cpu", seed: int = 0, out: str | None = None, batch: int = 32, lr: float = 3e-3) -> float:
    """Trains and returns the test accuracy; saves the weights to ``out``."""
    volta.manual_seed(seed)
    x_train, y_train, x_test, y_test = load_digits(seed=seed)
    model = DigitsCnn().to(device)
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = len(x_train) // batch
    total = epochs * steps
    order = np.random.default_rng(seed)
    step = 0
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        perm = order.permutation(len(x_train))
        for i in range(steps):
            # One epoch of linear warm-up, then cosine decay to 0 (Rust's CosineWarmup).
            if step < steps:
                rate = lr * step / steps
            else:
                rate = lr * (1 + math.cos(math.pi * (step - steps) / (total - steps))) / 2
            for g in opt.param_groups:
                g["lr"] = rate
            idx = perm[i * batch : (i + 1) * batch]
            xb = volta.tensor(x_train[idx], device=device)
            loss = F.cross_entropy(model(xb), y_train[idx], label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            step += 1
        acc = accuracy(model, x_test, y_test, device)
        print(f"epoch {epoch:2}/{epochs}  loss {loss.item():.4f}  test accuracy {100 * acc:.2f}%  ({time.perf_counter() - start:.2f} s)")
    if out:
        volta.save_file(dict(model.state_dict()), out, {"epoch": str(epochs), "seed": str(seed)})
    return accuracy(model, x_test, y_test, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="where to save the weights (safetensors)")
    args = parser.parse_args()
    start = time.perf_counter()
    acc = train(args.epochs, args.device, args.seed, args.out)
    print(f"test accuracy {100 * acc:.2f}% after {args.epochs} epochs; training took {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
