"""The package's types: `mypy --strict` over `volta` (its stubs, `_volta.pyi`, and the
pure-Python modules) and over `typing_sample.py`, a user's typed code; `stubtest`
compares the stubs with the compiled module; and the signatures that
`volta/functional.py` and `volta/datasets.py` declare for type checkers are compared
with the native functions they stand for.

The mypy tests are skipped, saying so, where mypy is not installed (it is in the
test venv: `pip install mypy`).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import volta._volta as native

HERE = Path(__file__).resolve().parent
PYTHON_SRC = HERE.parent / "python"
PACKAGE = PYTHON_SRC / "volta"
SAMPLE = HERE / "typing_sample.py"

requires_mypy = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None,
    reason="mypy is not importable in this interpreter (pip install mypy)",
)

# stubtest reports for these, each on purpose:
# - the binary methods take their operand as `o` (positional or keyword) at run time;
#   the stubs name it `other` and make it positional-only, which every call that
#   type-checks also is at run time.
# - pyo3 renders `end_dim=-1` as `end_dim=...` in `__text_signature__`.
STUBTEST_ALLOWLIST = [
    r"volta\._volta\.Tensor\.(add|sub|mul|div|add_|sub_|mul_|div_|matmul|maximum|minimum|eq|ne)",
    r"volta\._volta\.Tensor\.flatten",
]


def _run(args: List[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def _cache_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """mypy's cache in pytest's (a warm run takes seconds), else a fresh folder."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir("mypy")) if cache is not None else tmp_path / "mypy-cache"


@requires_mypy
def test_mypy_strict_passes_on_the_package_and_a_typed_user(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cache = _cache_dir(request, tmp_path)
    # From python/: `volta` is the source package (not an installed copy).
    result = _run(
        ["mypy", "--strict", "--cache-dir", str(cache), str(PACKAGE), str(SAMPLE)],
        cwd=PYTHON_SRC,
    )
    assert result.returncode == 0, (
        f"mypy --strict failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    )


@requires_mypy
def test_stubs_match_the_compiled_module(tmp_path: Path) -> None:
    """Every class, function and signature of `volta._volta` is in `_volta.pyi`, and
    nothing there is missing at run time."""
    allowlist = tmp_path / "allowlist.txt"
    allowlist.write_text("\n".join(STUBTEST_ALLOWLIST) + "\n")
    config = tmp_path / "mypy.ini"  # keeps mypy's cache out of the source tree
    config.write_text(f"[mypy]\ncache_dir = {tmp_path / 'mypy-cache'}\n")
    result = _run(
        ["mypy.stubtest", "volta._volta", "--allowlist", str(allowlist), "--mypy-config-file", str(config)],
        cwd=PYTHON_SRC,
    )
    assert result.returncode == 0, (
        f"stubtest: volta/_volta.pyi differs from the module (exit {result.returncode}):\n"
        f"{result.stdout}{result.stderr}"
    )


def _declared(path: Path) -> Dict[str, List[Tuple[str, Any]]]:
    """The functions a module declares under `if TYPE_CHECKING:`, as their parameters
    (name, default or `inspect.Parameter.empty`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: Dict[str, List[Tuple[str, Any]]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for f in node.body:
            if isinstance(f, ast.FunctionDef):
                args = f.args.args
                defaults = [inspect.Parameter.empty] * (len(args) - len(f.args.defaults))
                defaults += [ast.literal_eval(d) for d in f.args.defaults]
                out[f.name] = [(a.arg, d) for a, d in zip(args, defaults)]
    return out


@pytest.mark.parametrize(
    ("module", "native_module"),
    [("functional.py", native.functional), ("datasets.py", native.datasets)],
    ids=["functional", "datasets"],
)
def test_declared_signatures_are_the_native_ones(module: str, native_module: Any) -> None:
    declared = _declared(PACKAGE / module)
    functions = {n for n in dir(native_module) if callable(getattr(native_module, n)) and not n.startswith("_")}
    assert set(declared) == functions, f"{module} declares {sorted(declared)}, the native module has {sorted(functions)}"
    for name, params in declared.items():
        runtime = [
            (p.name, p.default) for p in inspect.signature(getattr(native_module, name)).parameters.values()
        ]
        assert params == runtime, f"{module}: {name}{params} != native {name}{runtime}"
