"""PyTorch's peer of examples/bench_cpu_gpt.rs: nanoGPT's shakespeare-char training
step (6 blocks of width 384, 6 heads, T 256, dropout 0.2, AdamW; 256 byte tokens)
eager on the CPU, with the same batch, tokens and timing (median of the runs after
one warm-up step).

    python3 scripts/bench_cpu_gpt_peer.py BATCH RUNS
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "device"))
from peers_common import Gpt  # noqa: E402

batch, runs = map(int, sys.argv[1:3])
t = 256
torch.manual_seed(0)
model = Gpt(layers=6)
opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
# The example's tokens: i * 7919 mod 256 over batch rows of t + 1.
data = torch.tensor([(i * 7919) % 256 for i in range(batch * (t + 1))]).view(batch, t + 1)
x, y = data[:, :t].contiguous(), data[:, 1:].contiguous()


def step():
    loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


step()
times = []
for _ in range(runs):
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
times.sort()
s = times[runs // 2]
print(
    f"torch {torch.__version__} ({torch.get_num_threads()} threads) gpt step B{batch}: "
    f"{s * 1e3:.0f} ms, {1 / s:.3f} steps/s"
)
