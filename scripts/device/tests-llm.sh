#!/usr/bin/env bash
# The GPU tests on real hardware, then the language-model rows: the release test
# binaries built here with
#   cargo test --release -p volta --no-run
# stripped and gzipped as .device/bin/test_NAME.gz (test_suite, and those that own
# their process: test_gpu_autotune, test_gpu_memory, test_gpu_inline_submit,
# test_f16_unsupported), plus .device/bin/bench_llm.gz; bench_llm runs on a
# placeholder-weight GGUF (gguf_skeleton.py). Outputs go into one tarball.
# Carry .device/{gl,gpu-env.sh,bin,sk}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o
date -u > ~/o/dates.txt
for f in .device/bin/*.gz; do
  b=$(basename $f .gz); gunzip -c $f > ~/$b && chmod +x ~/$b
done
for t in ~/test_*; do
  n=$(basename $t)
  timeout 300 $t > ~/o/$n.txt 2>&1
  echo "$n: $(grep -E '^test result' ~/o/$n.txt)"
  grep -E "^test .*FAILED" ~/o/$n.txt
done | tee ~/o/tests.txt
date -u >> ~/o/dates.txt
python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
for i in 1 2; do
  timeout 60 ~/bench_llm --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5 > ~/o/llm_$i.txt 2>&1
done
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
