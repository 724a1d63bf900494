# shellcheck shell=bash
# The benchmark harness (bench/run.sh + bench/aggregate.py) on a tiny matrix: a 4-layer Llama
# of Llama 2's vocabulary on 3 ranks over the emulated WiFi link (no device emulation: that
# needs cgroups), the naive and the best layer-wise plans, slice and auto, one repeat.
# Checks what the table reports: every run generated the tokens asked, s/token is the median
# of the decode positions alone (the prompt's batched pass left out), the single-process
# reference run and the columns computed against it, the boards each plan uses, and auto's
# layer-wise candidate measured by layer/dp.
. "$(dirname "$0")/common.sh"
N=24
out=$T/bench
"$SRC/bench/run.sh" --build "$BUILD" --model-dir "$T/models" --out "$out" --models tiny \
  --configs layer,layer/dp,slice,auto --repeats 1 --rtts none --tolerances none --ranks 3 \
  --device none --tokens $N --prompt "Once upon a time there was" --batch 4 --max-load 100 \
  > "$T/run.out" 2>&1 || { cat "$T/run.out"; fail "bench/run.sh failed on the tiny matrix"; }
for f in results.csv summary.csv table.md runs.tsv meta.json; do
  [ -s "$out/$f" ] || { cat "$T/run.out"; fail "the harness wrote no $f"; }
done
python3 - "$out" "$N" <<'EOF' || { cat "$T/run.out"; fail "the harness's figures do not match its runs' metrics"; }
import csv, json, os, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
configs = sorted(r["config"] for r in rows)
assert configs == ["auto", "layer", "layer/dp", "single", "slice"], configs
for r in rows:
    c = r["config"]
    assert r["status"] == "ok", (c, r["status"])
    m = json.load(open(os.path.join(out, r["metrics"])))
    # every run generated the tokens asked, after a prompt of several positions
    assert m["n_gen_tokens"] == n and int(r["n_gen_tokens"]) == n, (c, m["n_gen_tokens"])
    npr = m["n_prompt_run"]
    assert npr >= 5 and m["n_forward"] == npr + n - 1, (c, npr, m["n_forward"])
    # s/token: the median of the decode positions alone, not of every position (the CSV keeps
    # 6 significant digits)
    tms = m["token_ms"]
    dec = statistics.median(tms[npr:])
    assert abs(float(r["ms_per_token"]) - dec) <= 1e-4 * dec + 1e-9, (c, r["ms_per_token"], dec)
    assert int(r["decode_positions"]) == len(tms) - npr == n - 1, c
    allpos = statistics.median(tms[1:])
    assert abs(float(r["ms_per_token_all_positions"]) - allpos) <= 1e-4 * allpos + 1e-9, c
    boards = int(r["boards"])
    if c == "single":
        assert boards == 1 and r["link"] == "none", (boards, r["link"])
        continue
    # the reference columns: against the single process of the same repeat
    assert r["same_tokens_as_single"] == "1", (c, r["same_tokens_as_single"])
    assert r["logits_vs_single"] in ("identical", "differ"), (c, r["logits_vs_single"])
    if c in ("layer", "layer/dp", "auto"):
        assert r["logits_vs_single"] == "identical", c  # whole layers: the same arithmetic
    workers = [x for x in m["ranks"] if x.get("role") == "worker" and x.get("weight_bytes", 0) > 0]
    assert boards == 1 + len(workers) and 2 <= boards <= 3, (c, boards)
    if c == "layer":
        assert boards == 3, boards  # naive: one stage per worker
    if c == "auto":
        assert r["auto_choice"] in ("layer", "layer/dp", "head/greedy", "slice"), r["auto_choice"]
        assert float(r["auto_predicted_layer_ms"]) > 0
table = open(os.path.join(out, "table.md")).read()
for want in ("| tiny | single | 1 | reference | reference |", "| tiny | layer/dp |",
             "vs best layer-wise", "layer pred / meas"):
    assert want in table, want
print("harness: %d runs, %d tokens each, s/token from the decode positions" % (len(rows), n))
EOF
echo "PASS: the harness's tiny matrix"
