"""What the PyTorch peer scripts share: the timing loop, and nanoGPT's model as
transformer_peers.py and ddp_peers.py time it."""
import time
import torch, torch.nn as nn, torch.nn.functional as F


def timeit(fn, warm=3, iters=10):
    """Median seconds of `iters` synchronised calls of `fn`, after `warm` calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2]


class Block(nn.Module):
    """nanoGPT's block with F.scaled_dot_product_attention."""

    def __init__(self, c, heads, p):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.heads, self.p = heads, p
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.p if self.training else 0.0)
        x = x + self.drop(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class Gpt(nn.Module):
    def __init__(self, vocab=256, block=256, c=384, heads=6, layers=6, p=0.2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList([Block(c, heads, p) for _ in range(layers)])
        self.ln_f, self.lm_head = nn.LayerNorm(c), nn.Linear(c, vocab)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))
