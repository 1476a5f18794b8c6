#!/usr/bin/env bash
# Builds the programs the Python and page tests run (the Python module, the
# language-model and GPT examples, the main job, the page's tiny-model writer)
# as one workspace build with the features the test command's native tests were
# built with (VOLTA_TEST_FEATURES, set by scripts/test.sh), so that after them
# nothing but these programs is compiled. Other features, `maturin develop`,
# `cargo run -p …` or `cargo build -p …` would resolve other features and
# rebuild volta and everything above it: minutes on 2 cores.
# `--tests` keeps the dev-dependencies' features in the resolution (the native
# tests' build is then fresh); only `generate` and `gpt` are needed as programs:
# the examples' test builds are not it, and building all of them costs minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --workspace --lib --bins --example generate --example gpt --tests \
    ${VOLTA_TEST_FEATURES:+--features "$VOLTA_TEST_FEATURES"}
