"""The digits CNN trained from Python against the Rust main job, same machine, same run.

Both train the same network with the same recipe for 20 epochs on the CPU
(``volta-py/examples/digits.py`` and ``cargo run --release -- --device cpu``), in
alternating runs; the figure is wall time of the training, as each program reports
it, and the ratio Python / Rust (goal: at most 1.2).

    python benchmarks/python/digits.py --train-bin target/release/volta-train [--runs 3]

Run it in an environment where ``volta`` is a release build (``pip install ./volta-py``).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_run(epochs: int) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "volta-py/examples/digits.py"), "--epochs", str(epochs)],
        capture_output=True, text=True, check=True,
    ).stdout
    m = re.search(r"test accuracy ([0-9.]+)% after \d+ epochs; training took ([0-9.]+) s", out)
    assert m, out
    return float(m.group(2)), float(m.group(1))


def rust_run(bin_: str, epochs: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as out_dir:
        out = subprocess.run(
            [bin_, "--device", "cpu", "--epochs", str(epochs), "--out", out_dir],
            capture_output=True, text=True, check=True,
        ).stdout
    m = re.search(r"test accuracy ([0-9.]+)% after \d+ epochs; training took ([0-9.]+) s", out)
    assert m, out
    return float(m.group(2)), float(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--train-bin", default=str(ROOT / "target/release/volta-train"))
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    py, rs = [], []
    for i in range(args.runs):
        t, a = rust_run(args.train_bin, args.epochs)
        rs.append(t)
        print(f"run {i + 1}: Rust   {t:6.2f} s  ({a:.2f}%)", flush=True)
        t, a = python_run(args.epochs)
        py.append(t)
        print(f"run {i + 1}: Python {t:6.2f} s  ({a:.2f}%)", flush=True)
    mp, mr = statistics.median(py), statistics.median(rs)
    print(f"\nmedian of {args.runs}: Python {mp:.2f} s, Rust {mr:.2f} s, Python/Rust {mp / mr:.2f}x"
          f"  ({time.strftime('%Y-%m-%d')})")


if __name__ == "__main__":
    main()
