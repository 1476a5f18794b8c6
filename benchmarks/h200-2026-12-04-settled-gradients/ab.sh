# Leaf gradients computed one node after they are finished (settled) against
# the build before: the step's memory census (mem_census, f32, B 64), the GPT
# step in both precisions alternating (two rounds), then the whole GPU suite.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u
for b in before after; do
  gunzip -c .device/bin/mc_$b.gz > ~/mc_$b && chmod +x ~/mc_$b
  echo "== census $b"; timeout 60 ~/mc_$b 64 2>&1 | tee $o/census-$b.txt
done
ROWS="--step-only" PEER=0 bash scripts/device/binaries-ab.sh 2 bt_before.gz bt_after.gz > $o/ab.txt 2>&1
grep -E "== build|gpt_step" $o/ab.txt
gunzip -c .device/bin/test_suite.gz > ~/suite && chmod +x ~/suite
timeout 250 ~/suite 2>&1 | grep -E "panicked|FAILED|failed|test result" | tee $o/tests.txt
date -u
