# The tensor-core tests and the write-in-place test (and its mutant, which must
# fail), then the transformer rows against PyTorch (scripts/device/bench-transformer.sh)
# and the step alternating with PyTorch's (scripts/device/step-rounds.sh, 2 rounds).
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in suite suite-mut; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 60 ~/suite tensor_cores attention_over_one 2>&1 | tail -10 | tee "$o/tests.txt"
timeout 60 ~/suite-mut follow_writes_in_place 2>&1 | grep -E "test |panicked|left|right|result" | tee "$o/tests-mutated.txt"
mkdir -p "$o/table" "$o/rounds"
VOLTA_BENCH_KERNELS=1 OUT="$o/table" bash scripts/device/bench-transformer.sh > /dev/null 2>&1
grep -E "^(gpt_step|attention_fwd_bwd|torch)|profile" "$o/table/"*.txt | cut -c1-150
ROUNDS=2 OUT="$o/rounds" bash scripts/device/step-rounds.sh 2>&1 | tail -12
