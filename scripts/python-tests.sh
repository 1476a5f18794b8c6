#!/usr/bin/env bash
# Builds the Python package (volta-py) into a virtual environment and runs its
# pytest suite. The venv lives in target/py-venv; its tools come from PyPI once.
#
#   scripts/python-tests.sh [pytest args]
#   scripts/python-tests.sh --setup-only     # only the venv and its tools
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/py-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# shellcheck disable=SC1091
source "$venv/bin/activate"
stamp="$venv/.requirements"
want="pytest==8.4.2 hypothesis==6.140.2 micrograd==0.1.0 numpy safetensors==0.6.2 mypy==1.18.2 scikit-learn==1.9.1"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # shellcheck disable=SC2086
    python -m pip install -q --disable-pip-version-check $want
    echo "$want" > "$stamp"
fi
[ "${1:-}" = "--setup-only" ] && exit 0

# The module and the Rust programs the tests compare with, built with the
# native tests' features (scripts/build-test-programs.sh), before the venv is
# active: pyo3's build script reruns when VIRTUAL_ENV changes.
deactivate
bash scripts/build-test-programs.sh
source "$venv/bin/activate"

# The package, editable: its Python sources from volta-py/python with the module
# cargo built, as `maturin develop` lays it out. (`pip install ./volta-py` builds
# the same crate into a wheel with maturin.)
python -m pip uninstall -q -y volta 2>/dev/null || true
ln -sf "$PWD/target/debug/lib_volta.so" volta-py/python/volta/_volta.abi3.so
site=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/volta-py/python" > "$site/volta-dev.pth"

export VOLTA_GENERATE_EXAMPLE="$PWD/target/debug/examples/generate"
export VOLTA_GPT_EXAMPLE="$PWD/target/debug/examples/gpt"
export VOLTA_TRAIN_BIN="$PWD/target/debug/volta-train"

python -m pytest -q volta-py/tests "$@"
