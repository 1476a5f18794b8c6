"""micrograd's demo on Volta (`volta-py/examples/moons.py`) gives micrograd's numbers.

The example is micrograd's demo notebook with only the import changed. This test runs
its source twice, as it is (Volta) and with micrograd's import put back (micrograd
0.1.0 from PyPI), and compares what the two print: the model, the initial loss, and the
loss and accuracy of all 100 SGD steps. The forward pass alone is order-independent, so
the initial loss must match to the bit; after that, micrograd sums gradient terms in
the order of a Python `set` (memory addresses), so losses are compared to 1e-12.

micrograd takes about 3 minutes for the demo's 100 steps on a 2-core machine (1.7 s a
step), so the test command compares the first 5 steps (both sides run the same source
with `range(100)` made `range(5)`); `VOLTA_MOONS_STEPS=100` compares all of them, and
`benchmarks/python/moons.py` times the whole demo and checks the two agree.
"""

import contextlib
import io
import math
import os
import re
from pathlib import Path

EXAMPLE = Path(__file__).parents[1] / "examples" / "moons.py"
VOLTA_IMPORT = "from volta import Value\nfrom volta.nn import Neuron, Layer, MLP\n"
MICROGRAD_IMPORT = "from micrograd.engine import Value\nfrom micrograd.nn import Neuron, Layer, MLP\n"
STEP = re.compile(r"step (\d+) loss (\S+), accuracy (\S+)%")
STEPS = int(os.environ.get("VOLTA_MOONS_STEPS", "5"))


def run_demo(source):
    """The lines the demo prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(EXAMPLE), "exec"), {"__name__": "moons_demo"})
    return out.getvalue().splitlines()


def test_moons_demo_matches_micrograd():
    source = EXAMPLE.read_text()
    assert source.count(VOLTA_IMPORT) == 1 and "from micrograd" not in source
    assert source.count("for k in range(100):") == 1
    source = source.replace("for k in range(100):", f"for k in range({STEPS}):")
    ours = run_demo(source)
    theirs = run_demo(source.replace(VOLTA_IMPORT, MICROGRAD_IMPORT))

    # The model, its parameter count and the initial loss (forward only): identical.
    head = [line for line in ours if not STEP.match(line)]
    assert head == [line for line in theirs if not STEP.match(line)]
    assert head[1] == "number of parameters 337"
    # The notebook's own output, so the data and weights are the notebook's too.
    assert head[2] == "Value(data=0.8958441028683222, grad=0) 0.5"

    steps = [STEP.match(line).groups() for line in ours if STEP.match(line)]
    their_steps = [STEP.match(line).groups() for line in theirs if STEP.match(line)]
    assert len(steps) == len(their_steps) == STEPS
    for (k, loss, acc), (mk, mloss, macc) in zip(steps, their_steps):
        assert (k, acc) == (mk, macc)
        assert math.isclose(float(loss), float(mloss), rel_tol=1e-12), (k, loss, mloss)
    assert steps[0][1] == their_steps[0][1]
    if STEPS == 100:
        assert steps[-1][2] == "100.0"
