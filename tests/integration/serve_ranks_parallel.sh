#!/usr/bin/env bash
# --serve --parallel 4 on five ranks (the distributed engine's several sequences per pass),
# through the official openai npm client, on weights/austen-llama.h5:
#  A. for --partition layer, slice and head (quick: layer and slice): four streamed
#     completions of different prompts at temperature 0, each first sent alone (one at a
#     time), then the four together: every text equals its text alone, and /metrics counts
#     passes that carried several sequences (layer: with --ubatch 0, one pass at a time
#     whatever chain the placement makes); SIGTERM then ends every rank (exit 0).  And on
#     the layer-wise chain (--placement layer: each worker one block of layers) pipelined
#     decode: the slots in one group per stage, the groups' passes in flight together
#     (/metrics: as many groups as stages, 2 at least as the speeds place the layers, and
#     at least 2 passes in flight at once), the texts unchanged.
#  B. slots whose KV caches would not fit the workers' budgets: refused at start-up with a
#     message that names --parallel, --ctx-size and --cache-type.
. "$(dirname "$0")/common.sh"
need_node_modules
OPENAI=$NODE_MODULES/openai/index.mjs
SERVER=
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
SERVE_TIMEOUT=240 CLIENT_TIMEOUT=180
metric() { sed -n "s/^$1 //p" "$T/metrics"; }

# ---- A: four at once equal four alone, on each plan ----
# plan PARTITION [pipelined]
plan() {
  local part=$1 piped=${2:-} name=ranks_$1${2:+_$2}
  serve_np "$name" 5 --model "$SRC/weights/austen-llama.h5" --partition "$part" --parallel 4 \
    --threads 1 ${piped:+--placement layer} $([ "$part$piped" = layer ] && echo --ubatch 0)
  grep -q "one request at a time" "$T/$name.err" && { cat "$T/$name.err"; fail "$name: one request at a time"; }
  curl -sf "$URL/metrics" | grep -q "^headsplit_slots 4$" || fail "$name: /metrics does not say 4 slots"
  four_together "$name" 48
  curl -sf "$URL/metrics" > "$T/metrics" || fail "$name: /metrics"
  local shared max groups flying
  shared=$(metric headsplit_shared_passes_total)
  max=$(metric headsplit_pass_sequences_max)
  groups=$(metric headsplit_pass_groups)
  flying=$(metric headsplit_passes_in_flight_max)
  if [ -n "$piped" ]; then
    [ "${groups:-0}" -ge 2 ] && [ "${flying:-0}" -ge 2 ] \
      || { cat "$T/metrics"; fail "$name: the groups' passes were not in flight together"; }
  else
    [ "${shared:-0}" -gt 0 ] && [ "${max:-0}" -ge 2 ] \
      || { cat "$T/metrics"; fail "$name: no pass carried several sequences"; }
  fi
  stop "$name"
  echo "ok: $name: 4 at once equal 4 alone ($shared shared passes, at most $max sequences a" \
    "pass, $groups groups, at most $flying passes in flight)"
}
for part in layer slice $(quick "" head); do
  plan "$part"
done
plan layer pipelined

# ---- B: slots over the budgets: refused at start-up, naming the options ----
expect_error "64 slots over a 5 MB budget" "64 slots (--parallel) of 256 positions (--ctx-size)" \
  timeout -k 5 120 mpirun $MPI_FLAGS -np 3 "$HS" -m "$SRC/weights/austen-llama.h5" \
  --mem-budget 5M --serve 127.0.0.1:0 --parallel 64
grep -q -- "--cache-type f16 or q8_0" "$T/err" || { cat "$T/err"; fail "B: --cache-type not named"; }
echo "ok: B (slots over the budgets refused at start-up)"
echo "PASS: serve_ranks_parallel"
