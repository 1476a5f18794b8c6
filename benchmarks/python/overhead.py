"""Python's overhead per tensor op, above the Rust call the op makes (goal: < 2 µs).

Method
------
Four cheap ops on 1×1 CPU float32 tensors that do not require grad, where the
kernel's own work is next to nothing: ``a + b``, ``a * 2.0``, ``a.relu()``, ``a @ b``.

- Python µs/op: ``timeit`` runs the statement ``--iters`` times per repeat, with the
  garbage collector on (as in a real program), after one untimed repeat. From each
  repeat the same loop around ``pass`` is subtracted (the ``for`` loop itself, not
  the op), divided by ``--iters``; the fastest of ``--repeats`` repeats is reported
  (other processes only ever add time; ``--stat median`` for the median). This is
  all a user pays per op: the bytecode, pyo3's argument handling, the binding's
  shape checks and its dispatch over dtype and device, the Rust op, and making and
  freeing the result ``Tensor``.
- Rust µs/op: ``examples/op_overhead.rs`` times the very ``RawTensor`` calls the
  binding makes for these ops (``binary``, ``scalar``, ``unary``, ``matmul``;
  see ``volta-py/src/tensor``) the same way: ``--iters`` calls per repeat, the same
  statistic over ``--repeats``. No binding code runs there.
- overhead = Python − Rust: what the Python layer adds to each op.

Both sides must be compiled alike, or the difference measures the optimiser: the
script reads the profile of the ``volta`` module it imports (a dev build, which
``maturin develop`` makes, carries DWARF line tables, ``.debug_line``; a release
build, ``debug = false``, does not) and builds ``op_overhead`` with the same one
(``--profile`` overrides; ``--rust-bin`` takes a built binary). The goal is about
release builds, as ``pip install ./volta-py`` makes:

    source target/py-venv/bin/activate
    maturin develop --release -q -m volta-py/Cargo.toml
    python benchmarks/python/overhead.py [--iters 100000 --repeats 15] [--stat median]

It takes about 10 s after the example is built (the first build compiles the
examples crate in that profile). The machine is shared by builds and tests: the
script prints the CPU's idle share before it starts; numbers from a busy machine
are high on both sides.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import platform
import re
import statistics
import struct
import subprocess
import sys
import time
import timeit
from pathlib import Path
from typing import Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
GOAL_US = 2.0

#: (name, Python statement, what it computes from a = [[1.5]], b = [[-0.5]]).
OPS = [
    ("add", "a + b", 1.0),
    ("mul_scalar", "a * 2.0", 3.0),
    ("relu", "a.relu()", 1.5),
    ("matmul", "a @ b", -0.75),
]
RUST_LINE = re.compile(r"op=(\w+) ns_median=([\d.]+) ns_min=([\d.]+)")


def cpu_idle(seconds: float = 1.0) -> Optional[float]:
    """The fraction of CPU time idle over the next `seconds` (Linux's /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    try:
        idle0, total0 = sample()
        time.sleep(seconds)
        idle1, total1 = sample()
    except OSError:
        return None
    return (idle1 - idle0) / max(total1 - total0, 1)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def elf_sections(path: str) -> Optional[List[str]]:
    """The section names of a 64-bit little-endian ELF file; `None` for another format."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x7fELF\x02\x01":
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]  # sh_offset of the section-name table
    return [data[strtab + h[0]:data.index(b"\0", strtab + h[0])].decode() for h in headers]


def module_profile(path: str) -> str:
    """"dev" when the extension has DWARF line tables (the dev profile's
    `debug = "line-tables-only"`), "release" when it has none (`debug = false`)."""
    sections = elf_sections(path)
    if sections is None:
        return "unknown"
    return "dev" if ".debug_line" in sections else "release"


def python_times(iters: int, repeats: int, stat: Callable[[List[float]], float]) -> Dict[str, float]:
    """µs per op of each statement, less the loop's own cost."""
    import volta

    a = volta.tensor([[1.5]])
    b = volta.tensor([[-0.5]])
    assert (a.device.type, a.dtype, a.requires_grad) == ("cpu", "float32", False)
    names = {"a": a, "b": b, "gc": gc}
    for name, stmt, want in OPS:
        got = eval(stmt, names).item()
        assert got == want, f"{name}: {stmt} gave {got}, expected {want}"

    def per_repeat(stmt: str) -> List[float]:
        # gc.enable() in the setup: timeit turns the collector off, a program has it on.
        timer = timeit.Timer(stmt, setup="gc.enable()", globals=names)
        timer.timeit(iters)  # warm-up
        return timer.repeat(repeat=repeats, number=iters)

    loop = statistics.median(per_repeat("pass"))
    out = {}
    for name, stmt, _ in OPS:
        out[name] = stat([(t - loop) / iters * 1e6 for t in per_repeat(stmt)])
    out["(loop)"] = loop / iters * 1e6
    return out


def rust_times(args: argparse.Namespace, profile: str) -> Dict[str, Dict[str, float]]:
    """µs per op from `op_overhead` (median and min), building it with `profile`."""
    flags = ["--iters", str(args.iters), "--repeats", str(args.repeats)]
    if args.rust_bin:
        cmd = [args.rust_bin, *flags]
    else:
        cargo_profile = "dev" if profile == "dev" else "release"
        cmd = ["cargo", "run", "-q", "--profile", cargo_profile, "-p", "volta-examples",
               "--example", "op_overhead", "--", *flags]
        print(f"building and running: {' '.join(cmd)}", flush=True)
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"op_overhead failed ({run.returncode}):\n{run.stdout}{run.stderr}")
    out = {}
    for m in RUST_LINE.finditer(run.stdout):
        out[m.group(1)] = {"median": float(m.group(2)) / 1e3, "min": float(m.group(3)) / 1e3}
    missing = {name for name, _, _ in OPS} - set(out)
    if missing:
        sys.exit(f"op_overhead printed no time for {sorted(missing)}:\n{run.stdout}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=100_000, help="op calls per repeat (both sides)")
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats per op (both sides)")
    parser.add_argument("--stat", choices=["min", "median"], default="min", help="which repeat to report")
    parser.add_argument("--profile", choices=["dev", "release"], help="the Rust side's cargo profile [default: the module's]")
    parser.add_argument("--rust-bin", help="a built op_overhead binary (skips cargo)")
    args = parser.parse_args()
    if args.iters < 1 or args.repeats < 1:
        parser.error("--iters and --repeats must be positive")

    import volta._volta

    module = volta._volta.__file__ or "?"
    found = module_profile(module)
    if args.profile is None and found == "unknown":
        parser.error(f"cannot tell how {module} was built: pass --profile dev or --profile release")
    profile = args.profile or found
    idle = cpu_idle()
    print(f"date:    {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"machine: {cpu_name()}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}")
    print(f"python:  {platform.python_implementation()} {platform.python_version()}")
    print(f"module:  {module} ({found} build)")
    if idle is not None:
        print(f"cpu idle before the run: {idle:.0%}")
    if profile != found:
        print(f"warning: the module is a {found} build, the Rust side is built as {profile}: "
              "the difference includes the optimiser's", file=sys.stderr)

    rust = rust_times(args, profile)
    stat = statistics.median if args.stat == "median" else min
    py = python_times(args.iters, args.repeats, stat)

    print()
    print(f"1x1 float32 CPU tensors, {args.stat} of {args.repeats} repeats x {args.iters} calls; "
          f"Rust side: {profile} build of examples/op_overhead.rs")
    header = f"{'op':<12} {'Python µs/op':>13} {'Rust µs/op':>11} {'overhead µs/op':>15}"
    print(header)
    print("-" * len(header))
    met = 0
    for name, stmt, _ in OPS:
        r = rust[name][args.stat]
        over = py[name] - r
        met += over < GOAL_US
        print(f"{stmt:<12} {py[name]:>13.3f} {r:>11.3f} {over:>15.3f}")
    print(f"(the Python for-loop itself, subtracted above: {py['(loop)']:.3f} µs per iteration)")
    print(f"goal: overhead < {GOAL_US:g} µs per op: met for {met} of {len(OPS)} ops")


if __name__ == "__main__":
    main()
