# shellcheck shell=bash
# bench/serve.sh (concurrent streamed clients through the official openai client) on the
# shipped austen-llama, 3 ranks layer-wise on loopback, 1 and 3 clients, one repeat: checks
# that every round's clients each got the tokens asked and the same text (temperature 0), and
# that the table's aggregate tokens/s, time to first token and inter-token latency are the
# ones its rounds recorded.
. "$(dirname "$0")/common.sh"
need_node_modules
out=$T/serve
BUILD=$BUILD "$SRC/bench/serve.sh" --model "$SRC/weights/austen-llama.h5" --np 3 \
  --plan "layer=--partition layer" --clients "1 3" --repeats 1 -n 12 --out "$out" \
  > "$T/run.out" 2>&1 || { cat "$T/run.out"; fail "bench/serve.sh failed"; }
[ -s "$out/serve.md" ] && [ -s "$out/rounds.jsonl" ] || { cat "$T/run.out"; fail "no serve.md or rounds.jsonl"; }
python3 - "$out" <<'PY' || { cat "$T/run.out"; fail "bench/serve.sh's table does not match its rounds"; }
import json, statistics, sys
out = sys.argv[1]
rounds = [json.loads(l) for l in open(f"{out}/rounds.jsonl")]
assert sorted(r["round"]["clients"] for r in rounds) == [1, 3], rounds
table = open(f"{out}/serve.md").read()
for r in rounds:
    rd = r["round"]
    assert len(rd["per_client"]) == rd["clients"]
    assert all(c["tokens"] == 12 for c in rd["per_client"]), rd["per_client"]
    assert rd["tokens"] == 12 * rd["clients"] and rd["texts_equal"], rd
    assert abs(rd["aggregate_tokens_per_s"] - rd["tokens"] / rd["wall_s"]) < 1e-9
    ttft = statistics.median(c["ttft_s"] for c in rd["per_client"])
    row = f"| {rd['clients']} | {rd['aggregate_tokens_per_s']:.2f} "
    assert row in table, (row, table)
    assert f"| {ttft:.2f} / " in table, (ttft, table)
PY
echo "bench_serve: ok"
