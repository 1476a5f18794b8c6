#!/usr/bin/env bash
# Runs Volta inside headless Chromium: the browser parity tests (web/tests/*.rs,
# through wasm-bindgen-test and chromedriver on the page's WebGPU; SwiftShader
# where there is no GPU). Installs what is missing: Debian's chromium and
# chromium-driver, and the wasm-bindgen CLI at the version web/Cargo.toml pins.
set -euo pipefail
cd "$(dirname "$0")/.."

root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
    else
        echo "browser-tests.sh: need root to run: $*" >&2
        return 1
    fi
}

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    command -v apt-get >/dev/null || {
        echo "browser-tests.sh: install Chromium and its chromedriver (Debian: chromium chromium-driver)" >&2
        exit 1
    }
    echo "browser-tests.sh: installing chromium and chromium-driver ..."
    root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive root apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver
fi

bash scripts/install-wasm-bindgen.sh

# The runner reads web/webdriver.json (Chromium's flags for WebGPU) from the
# package folder; it adds --headless and --no-sandbox itself.
cd web
export CHROMEDRIVER="${CHROMEDRIVER:-$(command -v chromedriver)}"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
# SwiftShader compiles each new kernel on the CPU: the whole set takes ~20 s here.
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-300}"
exec cargo test -p volta-web --target wasm32-unknown-unknown "$@"
