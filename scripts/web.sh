#!/bin/sh
# Builds the demo page (web/www) and serves it on 127.0.0.1.
#
#   scripts/web.sh [--port 8080] [--build-only] [--dev] [--wasm-opt]
#
# Needs the wasm32-unknown-unknown target (`rustup target add wasm32-unknown-unknown`)
# and the wasm-bindgen CLI of the version web/Cargo.toml pins
# (`cargo install wasm-bindgen-cli --version 0.2.130`). --wasm-opt shrinks the module
# with binaryen's `wasm-opt -O` (off by default: Debian 12's binaryen 108 writes a
# module whose function table Chromium rejects at start-up). Open the printed
# address in a browser with WebGPU (Chrome/Edge 113+, Safari 26+). --dev builds the
# dev profile instead of release (the tests: it reuses the browser tests' build).
set -eu
cd "$(dirname "$0")/.."

PORT=8080
BUILD_ONLY=0
WASM_OPT=0
PROFILE=release
while [ $# -gt 0 ]; do
    case "$1" in
        --port) PORT="${2:?--port needs a number}"; shift 2 ;;
        --port=*) PORT="${1#--port=}"; shift ;;
        --build-only) BUILD_ONLY=1; shift ;;
        --wasm-opt) WASM_OPT=1; shift ;;
        --dev) PROFILE=dev; shift ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "web.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

WANT_BINDGEN=0.2.130
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    echo "web.sh: the wasm32-unknown-unknown target is missing: rustup target add wasm32-unknown-unknown" >&2
    exit 1
fi
if ! command -v wasm-bindgen >/dev/null 2>&1; then
    echo "web.sh: wasm-bindgen is missing: cargo install wasm-bindgen-cli --version $WANT_BINDGEN" >&2
    exit 1
fi
HAVE_BINDGEN=$(wasm-bindgen --version | awk '{print $2}')
if [ "$HAVE_BINDGEN" != "$WANT_BINDGEN" ]; then
    echo "web.sh: wasm-bindgen $HAVE_BINDGEN found, the crate pins $WANT_BINDGEN: cargo install wasm-bindgen-cli --version $WANT_BINDGEN" >&2
    exit 1
fi

echo "== building volta-web for wasm32-unknown-unknown ($PROFILE)"
cargo build -p volta-web --profile "$PROFILE" --target wasm32-unknown-unknown --lib
DIR=$([ "$PROFILE" = dev ] && echo debug || echo release)
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
OUT=web/www/pkg
rm -rf "$OUT"
wasm-bindgen --target web --no-typescript --out-dir "$OUT" \
    "$TARGET_DIR/wasm32-unknown-unknown/$DIR/volta_web.wasm"
WASM="$OUT/volta_web_bg.wasm"

size() { wc -c < "$1" | tr -d ' '; }
gzsize() { gzip -9 -c "$1" | wc -c | tr -d ' '; }
echo "volta_web_bg.wasm: $(size "$WASM") bytes, $(gzsize "$WASM") gzip'd"
if [ "$WASM_OPT" = 0 ]; then
    echo "(not shrunk with wasm-opt: pass --wasm-opt with binaryen newer than Debian 12's 108)"
elif command -v wasm-opt >/dev/null 2>&1; then
    if wasm-opt -O --all-features "$WASM" -o "$WASM.opt" 2>/dev/null; then
        echo "after wasm-opt -O: $(size "$WASM.opt") bytes, $(gzsize "$WASM.opt") gzip'd"
        if [ "$(size "$WASM.opt")" -lt "$(size "$WASM")" ]; then
            mv "$WASM.opt" "$WASM"
        else
            echo "wasm-opt made it no smaller: keeping wasm-bindgen's output"
            rm -f "$WASM.opt"
        fi
    else
        echo "wasm-opt failed on this module: keeping wasm-bindgen's output"
        rm -f "$WASM.opt"
    fi
else
    echo "web.sh: --wasm-opt: binaryen's wasm-opt is not installed" >&2
    exit 1
fi

# The page fetches the bundled digits beside itself (training in the tab).
cp data/digits.csv.gz web/www/digits.csv.gz
if [ ! -f web/www/digits.safetensors ]; then
    echo "web.sh: web/www/digits.safetensors is missing: cargo run -p volta-web --release --bin export_digits" >&2
    exit 1
fi

if [ "$BUILD_ONLY" = 1 ]; then
    echo "built web/www"
    exit 0
fi
echo "== serving web/www on http://127.0.0.1:$PORT/ (Ctrl-C stops)"
exec python3 -m http.server --bind 127.0.0.1 --directory web/www "$PORT"
