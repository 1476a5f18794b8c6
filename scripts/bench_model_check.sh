#!/usr/bin/env bash
# Times `cargo check` of a crate holding a 20-layer `model!` block, after a change to
# the block (the edit-check loop of someone writing a model). Prints the median of 5.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "model-check-bench"
version = "0.0.0"
edition = "2024"
[dependencies]
volta = { path = "$root/volta" }
[workspace]
TOML
write_block() { # $1: the width of the first hidden convolution
cat > "$dir/src/main.rs" <<RS
use volta::prelude::*;
model! {
    /// Twenty layers.
    pub struct Deep for (B, 3, 32, 32) -> (B, 10) {
        c1: Conv2d<$1, kernel = 3, padding = 1>, bn1: BatchNorm2d, r1: Relu,
        c2: Conv2d<32, kernel = 3, padding = 1>, bn2: BatchNorm2d, r2: Relu,
        p1: MaxPool2d<2>,
        c3: Conv2d<64, kernel = 3, padding = 1>, bn3: BatchNorm2d, r3: Relu,
        c4: Conv2d<64, kernel = 3, padding = 1>, bn4: BatchNorm2d, r4: Relu,
        p2: MaxPool2d<2>,
        c5: Conv2d<128, kernel = 3, stride = 2, padding = 1>, r5: Relu,
        gap: GlobalAvgPool2d,
        d: Dropout<0.2>,
        fc1: Linear<64>,
        fc2: Linear<10>,
    }
}
fn main() {
    let m: Deep = Deep::new(&mut Rng::seed(0));
    println!("{}", m.summary());
}
RS
}
export CARGO_TARGET_DIR="$root/target/model-check-bench"
write_block 32
cargo check --quiet --manifest-path "$dir/Cargo.toml"
times=()
for width in 16 24 32 40 48; do
    write_block "$width"
    start=$(date +%s.%N)
    cargo check --quiet --manifest-path "$dir/Cargo.toml"
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {printf "cargo check after a change to a 20-layer model!: median %.2f s (min %.2f, max %.2f, 5 runs)\n", a[3], a[1], a[5]}'
