#!/usr/bin/env bash
# --threads: rows are split over a rank's threads, never a row's sum, so the logits are
# bit-identical (cmp) for 1..4 threads: fp32 and q8_0 weights, one process and 3 ranks.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): 1 and 3 threads (3 splits the rows unevenly;
# 2 and 4 take the same lines), and 3 ranks with the q8_0 weights only (a worker's threads run
# the kernels that the one-process runs of both types run).
. "$(dirname "$0")/common.sh"
SPEC="llama:dim=512,layers=3,heads=8,kv_heads=4,head_dim=64,ffn=1536,vocab=2048,ctx=256"
"$CONVERT" --synthetic "$SPEC" --seed 4 --out "$T/f32.h5" > /dev/null
"$CONVERT" --synthetic "$SPEC" --seed 4 --quantize q8_0 --out "$T/q8.h5" > /dev/null
for m in f32 q8; do
  for t in $(quick "1 3" "1 2 3 4"); do
    run_hs 1 --model "$T/$m.h5" --prompt "hello there" --steps 24 --threads $t --quiet \
      --logits-out "$T/$m.$t.bin" --metrics "$T/$m.$t.json" 2> "$T/err" || { cat "$T/err"; fail "$m --threads $t"; }
    grep -q "\"threads\": $t" "$T/$m.$t.json" || fail "$m: metrics do not say threads $t"
    [ $t -eq 1 ] || cmp "$T/$m.1.bin" "$T/$m.$t.bin" || fail "$m: logits with --threads $t differ from 1"
  done
  [ $m = f32 ] && is_quick && continue
  run_hs 3 --model "$T/$m.h5" --prompt "hello there" --steps 24 --threads 2 --quiet \
    --logits-out "$T/$m.dist.bin" 2> "$T/err" || { cat "$T/err"; fail "$m: 3 ranks"; }
  cmp "$T/$m.1.bin" "$T/$m.dist.bin" || fail "$m: 3 ranks with --threads 2 differ from 1 process, 1 thread"
done
expect_error "--threads 0" "--threads: '0' is not a count" run_hs 1 --model "$T/f32.h5" --threads 0
echo "PASS: threads (logits bit-identical for 1..4 threads, fp32 and q8_0, 1 and 3 ranks)"
