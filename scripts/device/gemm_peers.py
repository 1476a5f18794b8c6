"""PyTorch (eager, f32, TF32 off) on the GEMM shapes of bench_gpu's `--gemm` rows
that torch_peers.py lacks (the MLP training step's products, a batched one, f16), and
the f32 squares again, for calls that run only the GEMM rows."""
import torch

torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"


def timeit(fn, warm=20, iters=50):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


shapes = [
    ("mlp_fwd_512x784x1024", (1, 512, 784, 1024), False, False),
    ("mlp_fwd_512x1024x1024", (1, 512, 1024, 1024), False, False),
    ("mlp_fwd_512x1024x10", (1, 512, 1024, 10), False, False),
    ("mlp_dw_784x512x1024_at", (1, 784, 512, 1024), True, False),
    ("mlp_dw_1024x512x1024_at", (1, 1024, 512, 1024), True, False),
    ("mlp_dx_512x1024x784_bt", (1, 512, 1024, 784), False, True),
    ("batched_64x256x64x256", (64, 256, 64, 256), False, False),
]
for name, (batch, m, k, n), at, bt in shapes:
    a = torch.randn(batch, k, m, device=dev).transpose(1, 2) if at else torch.randn(batch, m, k, device=dev)
    b = torch.randn(batch, n, k, device=dev).transpose(1, 2) if bt else torch.randn(batch, k, n, device=dev)
    t = timeit(lambda: torch.matmul(a, b))
    print(f"{'matmul_' + name:40s} {2 * batch * m * k * n / t / 1e12:12.3f} TFLOP/s", flush=True)
for n in (1024, 2048, 4096):
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)
    print(f"{'matmul_f16_' + str(n):40s} {2 * n**3 / timeit(lambda: a @ b) / 1e12:12.3f} TFLOP/s", flush=True)
for n in (1024, 2048, 4096):
    a = torch.randn(n, n, device=dev)
    b = torch.randn(n, n, device=dev)
    print(f"{'matmul_f32_' + str(n):40s} {2 * n**3 / timeit(lambda: a @ b) / 1e12:12.3f} TFLOP/s", flush=True)
# llama.cpp's test-backend-ops perf shape (its MUL_MAT m=4096, n=512, k=14336): C is
# 4096×512, A 4096×14336, in f16.
a = torch.randn(4096, 14336, device=dev, dtype=torch.float16)
b = torch.randn(14336, 512, device=dev, dtype=torch.float16)
print(f"{'matmul_f16_4096x14336x512':40s} {2 * 4096 * 14336 * 512 / timeit(lambda: a @ b) / 1e12:12.3f} TFLOP/s", flush=True)
a = torch.randn(512, 4096, device=dev, dtype=torch.float16)
b = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
print(f"{'matmul_f16_512x4096x4096':40s} {2 * 512 * 4096 * 4096 / timeit(lambda: a @ b) / 1e12:12.3f} TFLOP/s", flush=True)
