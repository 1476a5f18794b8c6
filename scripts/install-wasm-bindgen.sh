#!/usr/bin/env bash
# Installs the wasm-bindgen CLI (and wasm-bindgen-test-runner) at exactly the
# version web/Cargo.toml pins: the CLI and the crate must agree.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(sed -n 's/^wasm-bindgen = "=\(.*\)"/\1/p' web/Cargo.toml)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
[ "$have" = "$want" ] && exit 0
echo "install-wasm-bindgen.sh: installing wasm-bindgen-cli $want (a few minutes) ..."
# A debug build: it only post-processes modules and serves tests, and builds in
# under 2 minutes on 2 cores where a release build takes 9. Its lockfile first;
# where a locked dependency is missing from the registry mirror, the newest
# compatible versions instead.
cargo install --debug wasm-bindgen-cli --version "=$want" --locked ||
    cargo install --debug wasm-bindgen-cli --version "=$want"
