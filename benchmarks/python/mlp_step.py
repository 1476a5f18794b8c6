"""One Adam training step of an MLP from Python: Volta on its GPU against PyTorch eager.

The workload of ``torch_peers.py``'s ``mlp_train_step_b512`` (784 → 1024 → 1024 → 10,
ReLU, cross-entropy, Adam, batch 512), written once per library with the same calls.
Each step ends with a sync (Volta reads the loss back, PyTorch synchronises), so the
figure is the full step, Python included. Median of 20 after 5 warm-up steps.

    python benchmarks/python/mlp_step.py            # Volta, and PyTorch where installed
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import volta
import volta.functional as F
import volta.nn as nn
import volta.optim as optim


def timeit(step, warm: int = 5, iters: int = 20) -> float:
    for _ in range(warm):
        step()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def volta_step(device: str) -> float:
    volta.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    opt = optim.Adam(mlp.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    xb = volta.tensor(rng.standard_normal((512, 784), dtype=np.float32), device=device)
    yb = rng.integers(0, 10, 512)

    def step() -> None:
        opt.zero_grad()
        loss = F.cross_entropy(mlp(xb), yb)
        loss.backward()
        opt.step()
        loss.item()

    return timeit(step)


def torch_step() -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    dev = "cuda"
    # True f32 products on both sides (torch_peers.py's setting): no TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    tn = torch.nn
    mlp = tn.Sequential(tn.Linear(784, 1024), tn.ReLU(), tn.Linear(1024, 1024), tn.ReLU(), tn.Linear(1024, 10)).to(dev)
    opt = torch.optim.Adam(mlp.parameters(), 1e-3)
    xb = torch.randn(512, 784, device=dev)
    yb = torch.randint(0, 10, (512,), device=dev)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(mlp(xb), yb)
        loss.backward()
        opt.step()
        loss.item()

    return timeit(step)


def main() -> None:
    device = "gpu" if volta.Device.is_gpu_available() else "cpu"
    if device == "gpu":
        print("adapter:", volta.Device.gpu().adapter)
    v = volta_step(device)
    print(f"volta ({device}) mlp_train_step_b512   {v * 1e3:8.3f} ms")
    t = torch_step()
    if t is not None:
        print(f"pytorch (cuda) mlp_train_step_b512  {t * 1e3:8.3f} ms")
        print(f"PyTorch / Volta: {t / v:.2f}x  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")


if __name__ == "__main__":
    main()
