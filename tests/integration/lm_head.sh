# The split LM head (--lm-head split, the default where the last layer is sliced): the last
# layer's members compute the final norm and their vocabulary rows, the controller assembles
# the logits.  Logits must be bit-identical to the controller computing them (--lm-head
# controller), for an uneven split (3 members) and for GPT-2 (LayerNorm bias, tied
# embeddings) where the shared models are present; a bad value is refused.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): 3 ranks only (2 members: GPT-2's 50257 rows
# split unevenly; more members take the same lines).
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 5
models=("$T/m.h5")
if [ -e "$SHARED/gpt2-tiny-random/model.safetensors" ]; then
  "$CONVERT" --format hf --dir "$SHARED/gpt2-tiny-random" --out "$T/gpt2.h5"
  models+=("$T/gpt2.h5")
else
  echo "note: $SHARED/gpt2-tiny-random absent: GPT-2 not checked"
fi
# Equal speeds from a file: the FFN slices (and so the partial sums' order) must not follow
# the start-up speed measurement's noise from one run to the next.
printf '1 speed=1\n2 speed=1\n3 speed=1\n4 speed=1\n' > "$T/speeds.txt"
for m in "${models[@]}"; do
  for np in $(quick 3 "4 5"); do
    head -n $((np - 1)) "$T/speeds.txt" > "$T/dev.txt"
    for h in split controller; do
      run_hs $np --model "$m" --prompt "$P" --steps 24 --quiet --partition slice --lm-head "$h" \
        --devices "$T/dev.txt" --metrics "$T/$h.json" --logits-out "$T/$h.bin" ||
        fail "--lm-head $h ($m, $np ranks) failed"
    done
    cmp -s "$T/split.bin" "$T/controller.bin" ||
      fail "split LM head logits differ from the controller's ($m, $np ranks)"
    [ -s "$T/split.bin" ] || fail "no logits written"
    [ "$(jq -r .plan.lm_head "$T/split.json")" = split ] || fail "plan does not record the split head"
    [ "$(jq -r .plan.lm_head "$T/controller.json")" = controller ] ||
      fail "plan does not record the controller's head"
    # Each member holds its rows: more weight on every worker than without the split.
    jq -e -n --slurpfile a "$T/split.json" --slurpfile b "$T/controller.json" \
      '[range(1; $a[0].ranks | length) as $r |
        select($a[0].ranks[$r].weight_bytes > $b[0].ranks[$r].weight_bytes)] | length ==
       ($a[0].ranks | length) - 1' > /dev/null || fail "workers do not account their LM head rows"
    # Without --logits-out only the last row of a multi-row pass (the prompt) is asked for:
    # it must come from the members' logits too (x is not sent back), so the tokens match.
    run_hs $np --model "$m" --prompt "$P" --steps 24 --quiet --partition slice --lm-head split \
      --devices "$T/dev.txt" --metrics "$T/nolog.json" || fail "--lm-head split without --logits-out"
    [ "$(jq -c .tokens "$T/nolog.json")" = "$(jq -c .tokens "$T/split.json")" ] ||
      fail "split LM head: tokens differ without --logits-out ($m, $np ranks)"
    echo "ok: $(basename "$m"), $np ranks: logits identical, rows on $((np - 1)) members"
  done
done
expect_error "--lm-head workers" "--lm-head: 'workers' is not split or controller" \
  run_hs 2 --model "$T/m.h5" --prompt "$P" --steps 2 --lm-head workers
echo "PASS: the split LM head gives the controller's logits bit for bit"
