# Memory budgets: a static placement that fits at the start fails at the predicted token as
# the KV cache grows; with re-placement the same run completes, moving attention parts and
# their KV caches, and generates exactly the unconstrained run's tokens.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 6
# Pinned speeds and an assumed RTT make the placement independent of timing noise.
printf '1 speed=1\n2 speed=1\n3 speed=1\n4 speed=1\n' > "$T/free.txt"
args=(--model "$T/m.h5" --prompt "$P" --steps 200 --quiet --partition head --rtt-pings 1
      --assume-rtt 0)
run_hs 5 "${args[@]}" --devices "$T/free.txt" --metrics "$T/free.json"
# Rank 2's start-up bytes and growth (under the same plan) set a budget that it passes 95% of
# at about token 60 (re-placement) and outgrows at about token 100 (the static run's end).
start=$(jq '[.memory[] | select(.rank == 2)][0] | .peak_accounted_bytes - 199 * .kv_bytes_per_token' "$T/free.json")
per=$(jq '[.memory[] | select(.rank == 2)][0].kv_bytes_per_token' "$T/free.json")
[ "$per" -gt 0 ] || fail "rank 2 holds no KV cache"
budget=$(( (start + 60 * per) * 100 / 95 ))
printf '1 mem=4M speed=1\n2 mem=%d speed=1\n3 mem=4M speed=1\n4 mem=4M speed=1\n' "$budget" \
  > "$T/tight.txt"
set +e
timeout -k 5 60 mpirun $MPI_FLAGS -np 5 "$HS" "${args[@]/--quiet/--show-placement}" \
  --devices "$T/tight.txt" --static > "$T/out" 2> "$T/err"
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "static run: rc $rc"
# The start-up prediction names the rank and token; the run must stop exactly there.
pred=$(grep -m1 -oE 'rank [0-9]+: .*exceeds it at token [0-9]+' "$T/err" || true)
[ -n "$pred" ] || { cat "$T/err"; fail "no rank was predicted to exceed its budget"; }
prank=$(sed -E 's/^rank ([0-9]+):.*/\1/' <<< "$pred")
want_token=$(grep -oE '[0-9]+$' <<< "$pred")
grep -q "budget exceeded on rank $prank at token $want_token" "$T/err" \
  || { grep error "$T/err"; fail "expected 'budget exceeded on rank $prank at token $want_token'"; }
echo "ok: --static stops on rank $prank at token $want_token as predicted"

run_hs 5 "${args[@]}" --devices "$T/tight.txt" --replace-threshold 0.95 --metrics "$T/dyn.json"
jq -c .tokens "$T/dyn.json" | cmp -s - <(jq -c .tokens "$T/free.json") \
  || fail "the re-placed run's tokens differ from the unconstrained run's"
n=$(jq .replacement_count "$T/dyn.json")
[ "$n" -ge 1 ] || fail "no re-placement happened"
jq -e '.replacements[0] | .parts_moved > 0 and (.token == 0 or .kv_bytes_moved > 0)' \
  "$T/dyn.json" >/dev/null || fail "the re-placement moved nothing"
jq -e '[.memory[] | select(.budget_bytes > 0 and .peak_accounted_bytes > .budget_bytes)] == []' \
  "$T/dyn.json" >/dev/null || fail "a rank went over its budget"
jq -c '.replacements' "$T/dyn.json"
echo "PASS: budgets predicted, static fails cleanly, re-placement completes exactly"
