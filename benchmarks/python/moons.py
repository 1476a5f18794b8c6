"""micrograd's demo on Volta against micrograd itself, in the same run.

Runs `volta-py/examples/moons.py` (micrograd's demo notebook with only the import
changed: 100 samples of two moons, `MLP(2, [16, 16, 1])`, max-margin loss with L2,
100 SGD steps) as it is, and again with micrograd's import (micrograd 0.1.0), timing
each whole demo (data, model, 101 forward passes, 100 backward passes and updates)
after the libraries are imported. Prints each time, the medians, the ratio, and
whether the two runs printed the same trajectory.

    scripts/python-tests.sh -k nothing   # builds the venv and volta (or maturin develop)
    source target/py-venv/bin/activate
    python benchmarks/python/moons.py [--volta-runs 5] [--micrograd-runs 1]

micrograd takes about 2-3 minutes per run on the 2-core development machine.
"""

import argparse
import contextlib
import io
import math
import os
import platform
import re
import statistics
import time
from importlib import metadata
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "volta-py" / "examples" / "moons.py"
VOLTA_IMPORT = "from volta import Value\nfrom volta.nn import Neuron, Layer, MLP\n"
MICROGRAD_IMPORT = "from micrograd.engine import Value\nfrom micrograd.nn import Neuron, Layer, MLP\n"
STEP = re.compile(r"step (\d+) loss (\S+), accuracy (\S+)%")


def cpu_idle(seconds=3.0):
    """The fraction of CPU time idle over the next `seconds` (from /proc/stat)."""

    def sample():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    idle0, total0 = sample()
    time.sleep(seconds)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(total1 - total0, 1)


def run_demo(source):
    """Runs the demo; returns (seconds, the lines it printed)."""
    out = io.StringIO()
    code = compile(source, str(EXAMPLE), "exec")
    with contextlib.redirect_stdout(out):
        start = time.perf_counter()
        exec(code, {"__name__": "moons_demo"})
        seconds = time.perf_counter() - start
    return seconds, out.getvalue().splitlines()


def compare(ours, theirs):
    """A sentence on how the two printed trajectories agree."""
    head = [line for line in ours if not STEP.match(line)]
    their_head = [line for line in theirs if not STEP.match(line)]
    steps = [STEP.match(line).groups() for line in ours if STEP.match(line)]
    their_steps = [STEP.match(line).groups() for line in theirs if STEP.match(line)]
    same_acc = sum(a[2] == b[2] for a, b in zip(steps, their_steps))
    same_loss = sum(a[1] == b[1] for a, b in zip(steps, their_steps))
    worst = max(
        abs(float(a[1]) - float(b[1])) / abs(float(b[1])) for a, b in zip(steps, their_steps)
    )
    return (
        f"model and initial loss {'identical' if head == their_head else 'DIFFER'}; "
        f"accuracy identical at {same_acc}/{len(their_steps)} steps; loss identical to the "
        f"last digit at {same_loss}/{len(their_steps)} steps, max relative difference "
        f"{worst:.1e} ({'within' if worst <= 1e-12 else 'OUTSIDE'} 1e-12); final: "
        f"loss {steps[-1][1]}, accuracy {steps[-1][2]}%"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--volta-runs", type=int, default=5)
    parser.add_argument("--micrograd-runs", type=int, default=1)
    args = parser.parse_args()

    # Imported before timing: the figures are the demo's, not the imports'.
    import micrograd.engine  # noqa: F401
    import numpy  # noqa: F401
    import sklearn.datasets  # noqa: F401

    import volta  # noqa: F401

    source = EXAMPLE.read_text()
    assert source.count(VOLTA_IMPORT) == 1
    mg_source = source.replace(VOLTA_IMPORT, MICROGRAD_IMPORT)

    versions = ", ".join(
        f"{p} {metadata.version(p)}" for p in ["numpy", "scikit-learn", "micrograd", "volta"]
    )
    print(f"Python {platform.python_version()}, {versions}; {os.cpu_count()} CPUs")
    print(f"CPU idle over 3 s before the runs: {cpu_idle():.0%}")

    volta_times, micrograd_times = [], []
    ours = theirs = None

    def run_volta(runs):
        nonlocal ours
        for _ in range(runs):
            seconds, ours = run_demo(source)
            volta_times.append(seconds)
            print(f"Volta     run {len(volta_times)}: {seconds:7.2f} s", flush=True)

    # Volta's runs on both sides of micrograd's long ones, so that both see the
    # machine's load as it drifts.
    run_volta((args.volta_runs + 1) // 2)
    for i in range(args.micrograd_runs):
        seconds, theirs = run_demo(mg_source)
        micrograd_times.append(seconds)
        print(f"micrograd run {i + 1}: {seconds:7.2f} s", flush=True)
    run_volta(args.volta_runs // 2)
    print(f"CPU idle over 3 s after the runs: {cpu_idle():.0%}")

    v, m = statistics.median(volta_times), statistics.median(micrograd_times)
    print(
        f"moons demo (whole notebook, 100 SGD steps): micrograd {m:.1f} s, Volta {v:.2f} s "
        f"(median of {len(volta_times)}, {min(volta_times):.2f}-{max(volta_times):.2f}): "
        f"Volta {m / v:.0f}x faster"
    )
    print("trajectories:", compare(ours, theirs))
    assert math.isfinite(m / v)


if __name__ == "__main__":
    main()
