#!/usr/bin/env bash
# A/B of two builds on the GPU machine, alternating old and new in one call so
# that both see the same GPU, clocks and driver cache. Prepare here (release):
#   build bench_gpu and bench_llm at both commits (one CARGO_TARGET_DIR shares
#   the dependencies), strip + gzip them into .device/bin/{old,new}_bench_{gpu,llm}.gz,
#   head -c 1785664 SmolLM2-135M-Instruct.Q4_1.gguf > .device/sk/header.bin
# and carry .device/{gl,gpu-env.sh,bin,sk}. `ab.sh gpu` runs `bench_gpu --defaults`,
# `ab.sh llm` runs `bench_llm` on a placeholder-weight file of the model's exact
# layout (scripts/device/gguf_skeleton.py): kernel timings are those of the real file.
set -u
which=${1:-gpu}
rounds=${2:-2}
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
for v in old new; do
  for b in bench_gpu bench_llm; do
    gunzip -c .device/bin/${v}_$b.gz > ~/${v}_$b && chmod +x ~/${v}_$b
  done
done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
for r in $(seq "$rounds"); do
  for v in old new; do
    echo "== $v, round $r"
    if [ "$which" = gpu ]; then
      timeout 200 ~/${v}_bench_gpu --defaults 2>&1 | tee "${OUT:-/tmp}/${v}_gpu_$r.txt" | tail -40
    else
      timeout 200 ~/${v}_bench_llm --model ~/model.gguf --device gpu --prompt 512 --tokens 128 \
        --runs 5 2>&1 | tee "${OUT:-/tmp}/${v}_llm_$r.txt" | grep -v "^loaded" | tail -15
    fi
  done
done
