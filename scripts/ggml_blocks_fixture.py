#!/usr/bin/env python3
"""Writes volta/tests/fixtures/ggml_blocks.txt: random blocks of each ggml block
type Volta decodes, with the values PyPI's `gguf` package (its numpy reference,
`gguf.quants.dequantize`) decodes them to, one line per type:
`NAME ELEMENTS BLOCK_BYTES_HEX VALUES_HEX` (values as little-endian f32). The Rust
test `ggml_blocks` checks Volta's decoding against it value for value.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install numpy gguf==0.17.1
    /tmp/v/bin/python scripts/ggml_blocks_fixture.py
"""
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

# Byte offsets of each block's f16 fields (scales and mins): set to finite
# values, so the reference and Volta compare numbers, not NaN payloads.
HALVES = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}
BLOCKS = 6


def main() -> None:
    rng = np.random.default_rng(20261127)
    lines = ["# written by scripts/ggml_blocks_fixture.py (gguf 0.17.1, numpy reference)"]
    for ty, halves in HALVES.items():
        elems, size = ty_sizes(ty)
        raw = rng.integers(0, 256, size=(BLOCKS, size), dtype=np.uint8)
        for at in halves:
            h = rng.uniform(-0.25, 0.25, size=BLOCKS).astype(np.float16)
            raw[:, at : at + 2] = h.view(np.uint8).reshape(BLOCKS, 2)
        values = dequantize(raw.reshape(-1), ty).astype(np.float32)
        assert values.size == BLOCKS * elems
        lines.append(
            f"{ty.name} {values.size} {raw.tobytes().hex()} {values.astype('<f4').tobytes().hex()}"
        )
    path = Path(__file__).resolve().parent.parent / "volta/tests/fixtures/ggml_blocks.txt"
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


def ty_sizes(ty):
    from gguf.constants import GGML_QUANT_SIZES

    return GGML_QUANT_SIZES[ty]


if __name__ == "__main__":
    main()
