"""PyTorch peers of examples/bench_transformer.rs on the device machine, same rows
and conventions: causal attention forward + backward, and forward alone (SDPA, f32 and f16) at
T = 1024 and 4096, the memory of an attention step at T = 512 … 8192, and
nanoGPT's shakespeare-char training step (6 blocks of width 384, 6 heads, T 256,
batch 64, dropout 0.2, AdamW; 256 byte tokens as Volta's `CharGpt`) eager in f32 (TF32 off) and under autocast f16.

    python3 scripts/device/transformer_peers.py [--quick] [--lengths 64x256,...] [--attention-dropout P] [--attention-only | --step-only] [--profile-step]

--lengths and --attention-dropout set the SDPA rows' shapes and dropout (as
bench_transformer's flags); --profile-step prints where the GPT step's CUDA
kernel time goes (products, attention, the rest) by torch.profiler, after the rows.
"""
import os, sys
import torch, torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from peers_common import Gpt, timeit  # noqa: E402

dev = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
quick = "--quick" in sys.argv


def flag(name, default):
    """The value after `name` on the command line, else `default`."""
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


lengths = [tuple(map(int, x.split("x"))) for x in flag("--lengths", "").split(",") if x]
drop_p = float(flag("--attention-dropout", "0"))
tag_p = f"_dropout{drop_p:g}" if drop_p > 0 else ""


if "--products" in sys.argv:
    # The GPT step's products as bench_transformer --products times them.
    rows = 4 * 256 if quick else 64 * 256
    c, f, v = 384, 1536, 256
    shapes = [
        ("fwd_x_wt_384", rows, c, c, False, True),
        ("fwd_x_wt_1536", rows, c, f, False, True),
        ("fwd_h_wt_384", rows, f, c, False, True),
        ("fwd_lm_head", rows, c, v, False, True),
        ("dx_g_w_384", rows, c, c, False, False),
        ("dx_g_w_1536", rows, f, c, False, False),
        ("dx_g_w_384x1536", rows, c, f, False, False),
        ("dx_lm_head", rows, v, c, False, False),
        ("dw_xt_g_384", c, rows, c, True, False),
        ("dw_xt_g_384x1536", c, rows, f, True, False),
        ("dw_ht_g_1536x384", f, rows, c, True, False),
        ("dw_lm_head", c, rows, v, True, False),
        ("dw_a_along_k_384", c, rows, c, False, False),
        ("dw_a_along_k_384x1536", c, rows, f, False, False),
        ("dw_a_along_k_1536x384", f, rows, c, False, False),
    ]
    for dtype, tag in ((torch.float32, "Full"), (torch.float16, "f16")):
        for name, m, k, n, at, bt in shapes:
            a = torch.rand(k, m, device=dev, dtype=dtype).t() if at else torch.rand(m, k, device=dev, dtype=dtype)
            b = torch.rand(n, k, device=dev, dtype=dtype).t() if bt else torch.rand(k, n, device=dev, dtype=dtype)
            s = timeit(lambda: [a @ b for _ in range(8)]) / 8
            print(f"{'product_' + tag + '_' + name + f'_{m}x{k}x{n}':48} {s * 1e6:10.1f} µs {2 * m * k * n / s / 1e12:8.1f} TFLOP/s", flush=True)
    for name, dims in (
        ("split_k_sum_16x384x1536", (16, 384 * 1536)),
        ("split_k_sum_16x384x384", (16, 384 * 384)),
        ("column_sum_384", (rows, c)),
        ("column_sum_1536", (rows, f)),
    ):
        x = torch.rand(*dims, device=dev)
        s = timeit(lambda: [x.sum(0) for _ in range(8)]) / 8
        print(f"{'sum_' + name:48} {s * 1e6:10.1f} µs {4 * (dims[0] * dims[1] + dims[1]) / s / 1e9:8.1f} GB/s", flush=True)
    sys.exit(0)


h, d = 6, 64
step_only = "--step-only" in sys.argv
for dtype, tag in () if step_only else ((torch.float32, "f32"), (torch.float16, "f16")):
    for b, t in lengths or (((2, 128), (1, 256)) if quick else ((8, 1024), (2, 4096))):
        q, k, v = (torch.rand(b, h, t, d, device=dev, dtype=dtype, requires_grad=True) for _ in range(3))
        w = torch.rand(b, h, t, d, device=dev, dtype=dtype)

        def step():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=drop_p)
            (out * w).sum().backward()

        s = timeit(step)
        flops = 3.5 * 4.0 * b * h * t * t * d / 2.0
        print(f"{'sdpa_fwd_bwd_' + tag + f'_B{b}_T{t}' + tag_p:40} {s * 1e3:10.3f} ms {flops / s / 1e12:8.2f} TFLOP/s", flush=True)

        def forward():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        s = timeit(forward)
        flops = 4.0 * b * h * t * t * d / 2.0
        print(f"{'sdpa_fwd_' + tag + f'_B{b}_T{t}':40} {s * 1e3:10.3f} ms {flops / s / 1e12:8.2f} TFLOP/s", flush=True)

if "--attention-only" in sys.argv:
    sys.exit(0)

for t in () if step_only else (128, 256, 512) if quick else (512, 1024, 2048, 4096, 8192):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    q, k, v = (torch.rand(1, h, t, d, device=dev, requires_grad=True) for _ in range(3))
    w = torch.rand(1, h, t, d, device=dev)
    (F.scaled_dot_product_attention(q, k, v, is_causal=True) * w).sum().backward()
    torch.cuda.synchronize()
    held = torch.cuda.max_memory_allocated() - base
    print(f"{'sdpa_step_memory_T' + str(t):40} {held / 2**20:10.2f} MiB ({held / t:.0f} bytes per position)", flush=True)
    del q, k, v, w


batch, layers = (4, 6) if quick else (64, 6)
for mode in ("f32", "autocast_f16"):
    torch.manual_seed(0)
    model = Gpt(layers=layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    scaler = torch.amp.GradScaler(enabled=mode != "f32")
    x = torch.randint(0, 256, (batch, 256), device=dev)
    y = torch.randint(0, 256, (batch, 256), device=dev)

    def train_step():
        with torch.autocast("cuda", dtype=torch.float16, enabled=mode != "f32"):
            loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    s = timeit(train_step)
    print(f"{'torch_gpt_step_' + mode + f'_B{batch}_L{layers}':40} {s * 1e3:10.3f} ms {batch * 256 / s:8.0f} tokens/s", flush=True)
    # What one step holds beyond the parameters and the optimiser's state (which
    # the steps above allocated): activations kept for the backward, gradients.
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    train_step()
    torch.cuda.synchronize()
    held = torch.cuda.max_memory_allocated() - base
    print(f"{'torch_gpt_step_memory_' + mode + f'_B{batch}':40} {held / 2**20:10.2f} MiB", flush=True)
    if "--profile-step" in sys.argv:
        # Where the step's kernel time goes, as bench_transformer's profile
        # classes: products (cuBLAS/CUTLASS GEMMs), attention (SDPA's kernels),
        # the optimiser, the rest.
        from torch.profiler import profile, ProfilerActivity

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                train_step()
            torch.cuda.synchronize()
        classes = {}
        for e in prof.key_averages():
            us = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if e.device_type.name != "CUDA" or not us:
                continue
            n = e.key.lower()
            if "fmha" in n or "flash" in n or "sdpa" in n or "attention" in n:
                c = "attention"
            elif any(x in n for x in ("gemm", "sgemm", "xmma", "nvjet", "cublas", "cutlass")):
                c = "matmul"
            elif "adam" in n or "foreach" in n or "multi_tensor" in n:
                c = "optimiser"
            elif "layer_norm" in n or "layernorm" in n:
                c = "norms"
            else:
                c = "elementwise and other"
            classes[c] = classes.get(c, 0.0) + us / 3.0
        total = sum(classes.values())
        parts = ", ".join(f"{c} {v / 1e3:.2f} ms ({100 * v / total:.0f}%)" for c, v in sorted(classes.items(), key=lambda x: -x[1]))
        print(f"  torch profile {mode} ({total / 1e3:.2f} ms of kernels a step): {parts}", flush=True)
        for e in sorted((e for e in prof.key_averages() if e.device_type.name == "CUDA"), key=lambda e: -(getattr(e, "device_time_total", 0) or 0))[:12]:
            print(f"    {(getattr(e, 'device_time_total', 0) or 0) / 3e3:9.3f} ms {e.count // 3:5} calls  {e.key[:90]}", flush=True)
