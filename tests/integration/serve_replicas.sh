#!/usr/bin/env bash
# --replicas (data parallel: copies of the model's layers, each on its own workers) behind
# --serve on five ranks, through the official openai npm client, on weights/austen-llama.h5:
#  A. --replicas 2 (two 2-stage layer chains) and --replicas 4 (every worker the whole model),
#     --parallel 4: four streamed completions of different prompts at temperature 0, each
#     first sent alone, then the four together: every text equals its text alone; /metrics
#     says the copies, that every copy ran calls (the four were spread over them) and that
#     passes of several groups were in flight at once; SIGTERM ends every rank (exit 0).
#  B. --partition auto --parallel 4 on the small model (it fits one worker): auto picks
#     copies, says why on one line (every candidate and its predicted tokens/s), and the
#     metrics file says the copies, their workers and that auto chose them; without --serve
#     (one stream) auto keeps the latency objective (no copies).
#  D. without --serve (copy 0 generates, copy 1 idles) a run longer than --timeout: the idle
#     copy's workers wait for their next pass without a deadline.
#  C. bad values refused at start-up with a message naming --replicas: 0, more copies than
#     workers, a copy that does not fit its workers' budgets (head and slice inside a copy:
#     tests/unit/test_engine_replicas.c).
. "$(dirname "$0")/common.sh"
need_node_modules
OPENAI=$NODE_MODULES/openai/index.mjs
SERVER=
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

SERVE_TIMEOUT=120 CLIENT_TIMEOUT=90
MODEL=$SRC/weights/austen-llama.h5
metric() { sed -n "s/^$1 //p" "$T/metrics"; }

# The four prompts alone, then together: the texts must be equal.
four() { four_together "$1" 24; }

# ---- A: four at once equal four alone, on 2 and 4 copies ----
for k in 2 4; do
  name=replicas_$k
  serve_np "$name" 5 --model "$MODEL" --replicas $k --parallel 4 --threads 1 \
    --metrics "$T/$name.json"
  curl -sf "$URL/metrics" | grep -q "^headsplit_replicas $k$" \
    || fail "$name: /metrics does not say $k copies"
  four "$name"
  curl -sf "$URL/metrics" > "$T/metrics" || fail "$name: /metrics"
  for c in $(seq 0 $((k - 1))); do
    calls=$(sed -n "s/^headsplit_replica_calls_total{copy=\"$c\",[^}]*} //p" "$T/metrics")
    [ "${calls:-0}" -gt 0 ] || { cat "$T/metrics"; fail "$name: copy $c ran no calls"; }
  done
  # the copies' passes in flight together (each copy's chain keeps one per stage besides)
  [ "$(metric headsplit_pass_groups)" -ge $k ] && [ "$(metric headsplit_passes_in_flight_max)" -ge 2 ] \
    || { cat "$T/metrics"; fail "$name: the copies' passes were not in flight together"; }
  stop "$name"
  python3 - "$T/$name.json" $k <<'PY' || fail "$name: the metrics file's replicas"
import json, sys
m = json.load(open(sys.argv[1])); k = int(sys.argv[2]); r = m["replicas"]
assert r["copies"] == k and len(r["replicas"]) == k, r
workers = [w for c in r["replicas"] for w in c["workers"]]
assert sorted(workers) == [1, 2, 3, 4], r  # every worker in exactly one copy
PY
  echo "ok: $name: 4 at once equal 4 alone, every copy ran calls"
done

# ---- B: --partition auto picks copies when serving several slots ----
name=auto
serve_np "$name" 5 --model "$MODEL" --partition auto --parallel 4 --threads 1 \
  --metrics "$T/$name.json"
grep -q -- "--partition auto for 4 slots: aggregate tokens/s predicted (copies x workers each) 1 x 4: .*; 4 x 1: .* -> " "$T/$name.err" \
  || { cat "$T/$name.err"; fail "$name: no reason line with the candidates"; }
picked=$(sed -n 's/.* -> \([0-9]*\) cop.*/\1/p' "$T/$name.err" | head -1)
[ "${picked:-1}" -gt 1 ] || { cat "$T/$name.err"; fail "$name: auto did not pick copies"; }
curl -sf "$URL/metrics" | grep -q "^headsplit_replicas $picked$" \
  || fail "$name: /metrics does not say the $picked copies"
four "$name"
stop "$name"
python3 - "$T/$name.json" "$picked" <<'PY' || fail "$name: the metrics file's replicas"
import json, sys
r = json.load(open(sys.argv[1]))["replicas"]
assert r["copies"] == int(sys.argv[2]) and r["chosen_by"] == "auto", r
PY
# one stream: the latency objective, no copies
run_hs 5 --model "$MODEL" --partition auto --prompt "It is" --steps 8 --threads 1 \
  --metrics "$T/one.json" > "$T/one.out" 2> "$T/one.err" || { cat "$T/one.err"; fail "auto, one stream"; }
grep -q "aggregate tokens/s" "$T/one.err" && fail "auto, one stream: weighed copies"
python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['replicas']['copies'] == 1" \
  "$T/one.json" || fail "auto, one stream: copies"
echo "ok: B (auto picks $picked copies for 4 slots, none for one stream)"

# ---- D: an idle copy outlives --timeout ----
# Without --serve copy 0 generates and copy 1 idles the whole run; its workers wait for their
# next pass without a deadline (a 20 ms RTT makes the run outlast the 1 s --timeout).
run_hs 5 --model "$MODEL" --replicas 2 --prompt "It is" -n 60 --threads 1 --quiet \
  --emulate-link rtt=20ms --timeout 1 > "$T/idle.out" 2> "$T/idle.err" \
  || { cat "$T/idle.err"; fail "D: a copy idle for longer than --timeout"; }
grep -q "62 positions" "$T/idle.err" || { cat "$T/idle.err"; fail "D: not 62 positions"; }
echo "ok: D (an idle copy outlives --timeout)"

# ---- C: bad values refused, naming --replicas ----
# (as few ranks as show each: a start of mpirun costs seconds on a loaded host)
expect_error "--replicas 0" "--replicas: '0' is not a count" \
  env OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 60 "$HS" -m "$MODEL" --replicas 0 -p x
expect_error "more copies than workers" "--replicas 3: more copies than workers (2)" \
  timeout -k 5 60 mpirun $MPI_FLAGS -np 3 "$HS" -m "$MODEL" --replicas 3 -p x
expect_error "a copy over its budget" "--replicas 2: copy 0 on worker 1 does not fit" \
  timeout -k 5 60 mpirun $MPI_FLAGS -np 3 "$HS" -m "$MODEL" --replicas 2 --mem-budget 2M -p x
echo "ok: C (bad values refused)"
echo "PASS: serve_replicas"
