set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
for i in default 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do
  arg=""; [ $i != default ] && arg="--tensor-core-tiles $i"
  VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all timeout 100 ~/bt --step-only --step-precision half $arg > $o/sweep-$i.txt 2>&1
  echo "== $i $(grep -E 'tensor-core tiles' $o/sweep-$i.txt)"
  grep -E "gpt_step_shakespeare|matmul tensor-core" $o/sweep-$i.txt | awk '{print $1, $2, $3, $NF, $(NF-2)}' | head -14
done
