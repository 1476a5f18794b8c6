#!/usr/bin/env bash
# Session 10: the GPU test binaries (release) on the H100, then the language-model
# rows (placeholder-weight GGUF) with session 9's bench_llm (bench_llm_s9, batches
# submitted inline) and today's, alternated. Outputs go into one tarball.
# Carry .device/{gl,gpu-env.sh,bin,sk}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o
date -u > ~/o/dates.txt
for f in .device/bin/*.gz; do
  b=$(basename $f .gz); gunzip -c $f > ~/$b && chmod +x ~/$b
done
for t in gpu_parity optim_gpu data layers_gpu gpu_tensor_cores f16 gpu_autotune; do
  timeout 200 ~/test_$t --test-threads=1 > ~/o/test_$t.txt 2>&1
  echo "$t: $(grep -E '^test result' ~/o/test_$t.txt)"
  grep -E "^test .*FAILED" ~/o/test_$t.txt
done | tee ~/o/tests.txt
date -u >> ~/o/dates.txt
python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
for i in 1 2; do
  for b in bench_llm_s9 bench_llm; do
    timeout 60 ~/$b --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5 > ~/o/llm_${b}_$i.txt 2>&1
  done
done
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
