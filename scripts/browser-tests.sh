#!/usr/bin/env bash
# Runs Volta inside headless Chromium: the browser parity tests (web/tests/*.rs,
# through wasm-bindgen-test and chromedriver on the page's WebGPU; SwiftShader
# where there is no GPU), then the demo page end to end (web/tests/page.py: a
# digit classified, a few training steps, a tiny model's chat; its screenshot goes
# to $TMPDIR, docs/web-demo.png is the committed one). Installs what is missing: Debian's chromium and
# chromium-driver, and the wasm-bindgen CLI at the version web/Cargo.toml pins.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/provision-browser.sh

# The runner reads web/webdriver.json (Chromium's flags for WebGPU) from the
# package folder; it adds --headless and --no-sandbox itself.
export CHROMEDRIVER="${CHROMEDRIVER:-$(command -v chromedriver)}"
# SwiftShader compiles each new kernel on the CPU: the whole set takes ~20 s here.
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-300}"
(cd web && CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
    cargo test -p volta-web --target wasm32-unknown-unknown "$@")

# The page: a training step takes seconds on SwiftShader, so 8 steps, not an epoch.
# The dev profile reuses the build of the tests above.
scripts/web.sh --build-only --dev
# The page's tiny model comes from volta-web's `tiny_gguf`. Under scripts/test.sh
# it is built with the native tests' features, so nothing is compiled again; run
# alone, page.py has cargo build just that program.
tiny=()
if [ -n "${VOLTA_TEST_FEATURES:-}" ]; then
    bash scripts/build-test-programs.sh
    tiny=(--tiny-gguf-bin target/debug/tiny_gguf)
fi
python3 web/tests/page.py "${tiny[@]}" --train-steps 8 --screenshot "${TMPDIR:-/tmp}/web-demo.png"
