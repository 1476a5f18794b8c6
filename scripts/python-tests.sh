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
want="maturin==1.16.0 pytest==8.4.2 hypothesis==6.140.2 micrograd==0.1.0 numpy safetensors==0.6.2 mypy==1.18.2 scikit-learn==1.9.1"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # shellcheck disable=SC2086
    python -m pip install -q --disable-pip-version-check $want
    echo "$want" > "$stamp"
fi
[ "${1:-}" = "--setup-only" ] && exit 0

# The dev profile, as `cargo test` builds: maturin reuses its dependencies.
maturin develop -q -m volta-py/Cargo.toml

# The Rust programs the tests compare with: the language-model example and the
# main job (digits checkpoints both ways).
cargo build -q -p volta-examples --example generate
cargo build -q -p volta-train
export VOLTA_GENERATE_EXAMPLE="$PWD/target/debug/examples/generate"
export VOLTA_TRAIN_BIN="$PWD/target/debug/volta-train"

python -m pytest -q volta-py/tests "$@"
