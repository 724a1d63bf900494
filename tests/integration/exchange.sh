# SLICE exchange patterns and the shared channel under MPI.  All-to-all, reduce-and-broadcast
# and reduce-scatter/all-gather give bit-identical logits for the same plan (every sum in
# member order), with 16-bit wires too and with member counts that do not divide the model
# width; their hops and bytes are the schedule's; --exchange auto picks the prediction's best
# and a bad value is refused.  The emulated WiFi channel (shared, through an access point)
# runs, queues (slower than the same link switched) and leaves no shared-memory file behind.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): 3 workers only (the member count that does
# not divide the width; 4 take the same lines with equal shares), and --partition auto with
# the WiFi preset on 3 ranks.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 4
vocab=512
for w in $(quick 3 "4 3"); do
  : > "$T/dev.txt"
  for r in $(seq 1 "$w"); do echo "$r speed=1" >> "$T/dev.txt"; done  # one plan every run
  for wire in f32 f16 q8; do
    for x in all reduce rsag; do
      run_hs $((w + 1)) --model "$T/m.h5" --prompt "$P" --steps 12 --quiet --partition slice \
        --exchange $x --wire $wire --devices "$T/dev.txt" --lm-head controller \
        --metrics "$T/$x.json" --logits-out "$T/$x.bin" || fail "$w workers, $x/$wire: run failed"
      [ "$(jq -r .plan.exchange "$T/$x.json")" = $x ] || fail "$x: not recorded in the plan"
    done
    for x in reduce rsag; do
      "$CMP" "$T/$x.bin" "$T/all.bin" --cols $vocab --exact >/dev/null ||
        fail "$w workers, --wire $wire: $x logits differ from all-to-all"
    done
    [ $wire = f32 ] && cp "$T/all.bin" "$T/f32.bin"
    # 12 layers' worth of hops: all-to-all 2 per layer, the others 4 (the input broadcast
    # and the logits' hop on top).
    ha=$(jq .hops_per_token "$T/all.json"); hr=$(jq .hops_per_token "$T/reduce.json")
    [ $((hr - ha)) -eq $((2 * $(jq .model.n_layers "$T/all.json"))) ] ||
      fail "hops: all-to-all $ha, reduce $hr"
  done
  # Q8_0 blocks: a quarter of the f32 bytes, logits near the f32 run's (the partial sums and,
  # on their way back, the sums, i.e. the residual stream, are rounded to 8 bits per value
  # at each exchange: within 0.5 on this model).
  "$CMP" "$T/all.bin" "$T/f32.bin" --cols $vocab --tol 0.5 >/dev/null ||
    fail "$w workers: q8 logits too far from f32"
  echo "ok: $w workers, three patterns bit-identical (f32, f16 and q8)"
done
expect_error "--exchange ring" "--exchange: 'ring' is not auto, all, reduce, rsag or exact" \
  run_hs 2 --model "$T/m.h5" --prompt "$P" --steps 2 --exchange ring
# The shared channel: the same 10 ms link switched and shared through an access point.
before=$(ls /dev/shm | grep -c headsplit-channel || true)
for med in "medium=switched" "medium=shared,relay=ap"; do
  run_hs 5 --model "$T/m.h5" --prompt "$P" --steps 8 --quiet --partition slice --exchange all \
    --emulate-link "rtt=10ms,bw=5mbit,$med" --metrics "$T/m.json" || fail "$med: run failed"
  jq .ms_per_token "$T/m.json" > "$T/ms.${med%%,*}"
done
sw=$(cat "$T/ms.medium=switched") sh=$(cat "$T/ms.medium=shared")
echo "slice at 10 ms, 5 Mbit/s: switched $sw ms/token, shared via an AP $sh ms/token"
# 5 layers x 2 exchanges x 12 messages of 288 bytes, 0.46 ms each on the air, twice: up to
# 110 ms more per token than the switched link's one transmission per exchange where the
# members send at once; at least 50 ms with their sends spread by their compute.
awk -v a="$sw" -v b="$sh" 'BEGIN { exit !(b > a + 50) }' || fail "the shared channel did not queue"
run_hs $(quick 3 5) --model "$T/m.h5" --prompt "$P" --steps 4 --quiet --partition auto --emulate-link wifi \
  --metrics "$T/w.json" || fail "--emulate-link wifi with --partition auto failed"
after=$(ls /dev/shm | grep -c headsplit-channel || true)
[ "$after" -le "$before" ] || fail "a shared channel file was left in /dev/shm"
echo "PASS: exchange patterns bit-identical; the shared channel queues and cleans up"
