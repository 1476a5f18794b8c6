"""The main job's digits CNN trained from Python, and checkpoints both ways.

The Rust side is the main job's binary (``VOLTA_TRAIN_BIN``, built by
``scripts/python-tests.sh``): it trains with the same recipe and evaluates a
checkpoint with ``--evaluate``.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import volta

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import digits  # noqa: E402  (volta-py/examples/digits.py)

TRAIN_BIN = os.environ.get("VOLTA_TRAIN_BIN")
needs_rust = pytest.mark.skipif(
    not TRAIN_BIN or not Path(TRAIN_BIN).exists(),
    reason="VOLTA_TRAIN_BIN (the main job's binary) is not set; scripts/python-tests.sh builds it",
)
EPOCHS = 20


def rust(*args: str) -> str:
    out = subprocess.run([TRAIN_BIN, "--device", "cpu", *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def rust_accuracy(checkpoint: Path) -> float:
    text = rust("--evaluate", str(checkpoint))
    m = re.search(r"accuracy ([0-9.]+) \((\d+) images\)", text)
    assert m, text
    return float(m.group(1))


@pytest.fixture(scope="module")
def rust_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The main job, 20 epochs on the CPU (its default recipe)."""
    if not TRAIN_BIN or not Path(TRAIN_BIN).exists():
        pytest.skip("VOLTA_TRAIN_BIN is not set")
    out = tmp_path_factory.mktemp("rust-digits")
    rust("--epochs", str(EPOCHS), "--out", str(out))
    return out


@pytest.fixture(scope="module")
def python_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[float, Path]:
    out = tmp_path_factory.mktemp("py-digits") / "digits.safetensors"
    return digits.train(EPOCHS, "cpu", seed=0, out=str(out)), out


def test_digits_from_python_reaches_the_main_jobs_accuracy(python_run: tuple[float, Path], rust_run: Path) -> None:
    acc, _ = python_run
    with open(rust_run / "metrics.csv") as f:
        rust_acc = float(list(csv.DictReader(f))[-1]["test_accuracy"])
    # Same recipe, different initial weights and batch order: within 1% (4 of 359).
    assert acc >= 0.99
    assert acc >= rust_acc - 0.01, (acc, rust_acc)


@needs_rust
def test_a_python_checkpoint_loads_in_rust(python_run: tuple[float, Path]) -> None:
    acc, path = python_run
    # The same weights on the same test images: the same predictions but for
    # float rounding on a near-tie (at most one image).
    assert abs(rust_accuracy(path) - acc) <= 1 / 359 + 1e-9


def test_a_rust_checkpoint_loads_in_python(rust_run: Path) -> None:
    state = volta.load_file(rust_run / "checkpoint.safetensors")
    model_state = {k: v for k, v in state.items() if not k.startswith("optim/")}
    model = digits.DigitsCnn()
    missing, unexpected = model.load_state_dict(model_state)
    assert missing == [] and unexpected == []
    _, _, x_test, y_test = volta.datasets.load_digits(seed=0)
    acc = digits.accuracy(model, x_test, y_test, "cpu")
    assert abs(acc - rust_accuracy(rust_run / "checkpoint.safetensors")) <= 1 / 359 + 1e-9
    assert acc >= 0.99


def test_load_digits_is_the_main_jobs_split() -> None:
    x_train, y_train, x_test, y_test = volta.datasets.load_digits(seed=0)
    assert x_train.shape == (1438, 1, 8, 8) and x_test.shape == (359, 1, 8, 8)
    assert x_train.dtype.name == "float32" and y_train.dtype.name == "int64"
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert set(y_test.tolist()) == set(range(10))
    again = volta.datasets.load_digits(seed=0)
    assert (again[3] == y_test).all()
    other = volta.datasets.load_digits(seed=1)
    assert not (other[3] == y_test).all()
    with pytest.raises(ValueError):
        volta.datasets.load_digits(test_fraction=1.5)
