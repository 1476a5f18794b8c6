#!/usr/bin/env bash
# Installs what the browser tests need, where it is missing: Debian's chromium and
# chromium-driver, the wasm32 target, and the wasm-bindgen CLI at the version
# web/Cargo.toml pins. scripts/test.sh runs it in the background while the native
# tests build; scripts/browser-tests.sh runs it again (then it only checks).
set -euo pipefail
cd "$(dirname "$0")/.."

root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
    else
        echo "provision-browser.sh: need root to run: $*" >&2
        return 1
    fi
}

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    command -v apt-get >/dev/null || {
        echo "provision-browser.sh: install Chromium and its chromedriver (Debian: chromium chromium-driver)" >&2
        exit 1
    }
    echo "provision-browser.sh: installing chromium and chromium-driver ..."
    root flock /tmp/volta-apt.lock apt-get update -qq
    DEBIAN_FRONTEND=noninteractive root flock /tmp/volta-apt.lock apt-get install -y -qq --no-install-recommends \
        chromium chromium-driver
fi

# rust-toolchain.toml names the target; an older rustup may not add it by itself.
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
bash scripts/install-wasm-bindgen.sh

