"""PyTorch DistributedDataParallel (NCCL) peer of examples/bench_ddp.rs, same
workloads and conventions: nanoGPT's shakespeare-char training step (batch 64 ×
T 256 per rank, f32, TF32 off; the model of transformer_peers.py), the benchmark
MLP (784-1024-1024-10, batch 512, Adam) and the main job's digits CNN (batch 32,
AdamW), one process per GPU, median step time after a warm-up.

    python3 scripts/device/ddp_peers.py [--quick] [--world N]   # N processes (default: every GPU)
"""
import os, sys
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))
from peers_common import Gpt, timeit  # noqa: E402

quick = "--quick" in sys.argv


def digits_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(256, 10))


def worker(rank, world):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    dev = f"cuda:{rank}"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def row(name, s, samples):
        if rank == 0:
            print(f"{'torch_ddp_' + name + f'_np{world}':44} {s * 1e3:9.2f} ms {samples * world / s:10.0f} samples/s", flush=True)

    torch.manual_seed(0)
    b, t = (4, 64) if quick else (64, 256)
    model = nn.parallel.DistributedDataParallel(Gpt().to(dev), device_ids=[rank])
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    x = torch.randint(0, 256, (b, t), device=dev)
    y = torch.randint(0, 256, (b, t), device=dev)

    def gpt_step():
        loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    row(f"gpt_step_B{b}_T{t}", timeit(gpt_step, iters=20), b)

    b = 64 if quick else 512
    mlp = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(dev),
        device_ids=[rank])
    opt2 = torch.optim.Adam(mlp.parameters(), 1e-3)
    xb, yb = torch.randn(b, 784, device=dev), torch.randint(0, 10, (b,), device=dev)

    def mlp_step():
        opt2.zero_grad(set_to_none=True)
        F.cross_entropy(mlp(xb), yb).backward()
        opt2.step()

    row(f"mlp_step_B{b}", timeit(mlp_step, iters=20), b)

    b = 32
    cnn = nn.parallel.DistributedDataParallel(digits_cnn().to(dev), device_ids=[rank])
    opt3 = torch.optim.AdamW(cnn.parameters(), 3e-3, weight_decay=1e-4)
    xi, yi = torch.rand(b, 1, 8, 8, device=dev), torch.randint(0, 10, (b,), device=dev)

    def cnn_step():
        opt3.zero_grad(set_to_none=True)
        F.cross_entropy(cnn(xi), yi).backward()
        opt3.step()

    row(f"digits_cnn_step_B{b}", timeit(cnn_step, iters=20), b)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = torch.cuda.device_count()
    if "--world" in sys.argv:
        world = int(sys.argv[sys.argv.index("--world") + 1])
    mp.spawn(worker, args=(world,), nprocs=world, join=True)
