#!/usr/bin/env python3
"""bench/aggregate.py OUT: runs.tsv + runs/*.json of a bench/run.sh output directory ->
results.csv/json, summary.csv, rtt_sweep.csv, tolerance_sweep.csv, table.md and plot/*.dat
(the data of bench/plots/*.gp).  Standard library only.  Called by hs_aggregate in
bench/lib.sh."""
import csv, glob, json, math, os, statistics, sys
if len(sys.argv) != 2:
    print("usage: bench/aggregate.py OUT", file=sys.stderr)
    sys.exit(2)

out = sys.argv[1]
meta = {}
if os.path.exists(os.path.join(out, "meta.json")):
    meta = json.load(open(os.path.join(out, "meta.json")))
base_rtt = float(meta.get("base_rtt", "10") or 10) if meta.get("base_rtt", "") not in ("", "none") else None

MAIN_ORDER = ["single", "layer", "layer/dp", "head/seed", "head/seed+spec", "head/greedy", "head+spec/random",
              "head+spec/roundrobin", "head+spec/greedy", "slice", "slice/f16", "slice/q8",
              "slice/lm-ctl",
              "auto"]
SWEEP_CONFIGS = ["layer", "layer/dp", "head/greedy", "head/seed", "slice", "auto"]
LAYERWISE = ("layer", "layer/dp")  # the layer-wise baselines: naive N stages, and the best plan
# "single": the single-process reference (-np 1 on the host, outside the device emulation): the
# "exact" and "same tokens" columns compare every run with it; its time is the host's, not a
# board's, and takes part in no speedup.
# auto's candidates (its log line names partitions) and the configurations that measure them
CAND = {"layer": "layer", "head": "head/greedy", "slice": "slice"}
# auto's layer-wise candidate is the better of N stages and the best layer-wise plan over
# subsets of the boards (its log line says "as --placement dp" when it took the latter): it
# is measured by layer/dp where the matrix has it
def cand_config(p_, have):
    return "layer/dp" if p_ == "layer" and "layer/dp" in have else CAND[p_]
# "exact" is measured, not listed: a configuration is exact when its logits are bit-identical
# to the single-process run's in the same repeat (logits_vs_single below).
# Harness fallback when the engine reports no energy: a Pi 4 idles at 3.8 W and draws 1.2 W
# more per busy core-second.
IDLE_W, EXTRA_W = 3.8, 1.2

def num(x):
    try:
        v = float(x)
        return v if math.isfinite(v) else None
    except (TypeError, ValueError):
        return None

def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None

def mn(v):
    v = [x for x in v if x is not None]
    return min(v) if v else None

def mx(v):
    v = [x for x in v if x is not None]
    return max(v) if v else None

# ---- one row per run -------------------------------------------------------------------
runs_tsv = os.path.join(out, "runs.tsv")
rows = []
if os.path.exists(runs_tsv):
    with open(runs_tsv) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows.append(r)

results = []
for r in rows:
    d = {
        "model": r["model"], "config": "head/greedy" if r["config"] == "head" else r["config"],
        "partition": r["partition"],
        "placement": r["placement"], "speculate": r["speculate"],
        "tolerance": num(r["tolerance"]) if r["tolerance"] != "-" else None,
        "rtt_ms": num(r["rtt_ms"]), "link": r["link"], "groups": r["groups"],
        "rep": int(r["rep"]), "seed": int(r["seed"]),
        "n_predict": int(r.get("n_predict") or r.get("steps") or 0),
        "base_model": r["model"].split("@")[0],
        "status": r["status"], "rc": int(r["rc"]), "wall_s": num(r["wall_s"]),
        "loadavg_1min": num(r["load1"]), "started": r["started"],
        "load_wait_s": num(r.get("load_wait_s")), "max_load": num(r.get("max_load")),
        "synthetic": r.get("synthetic", "") == "1",
        "metrics": os.path.relpath(r["metrics"], out) if r["metrics"] else "",
        "log": os.path.relpath(r["log"], out) if r["log"] else "",
    }
    m = None
    if r["status"] in ("ok", "short") and os.path.exists(r["metrics"]):
        try:
            m = json.load(open(r["metrics"]))
        except Exception as e:
            d["status"] = "bad-metrics"
    elif r["status"] == "ok":
        d["status"] = "no-metrics"
    if m is not None:
        tms = m.get("token_ms") or []
        nf = m.get("n_forward") or len(tms) or None
        gen = num(m.get("generate_s"))
        # s/token: the decode positions alone (the engine's decode_ms_per_token; an engine
        # without it: the median of token_ms after the prompt's positions); ms_per_token, the
        # median over every position after the first, counts the prompt's batched shares.
        ms = num(m.get("decode_ms_per_token"))
        npr = m.get("n_prompt_run", m.get("n_prompt_tokens"))
        if "decode_ms_per_token" not in m and npr is not None and len(tms) > npr:
            ms = statistics.median(tms[npr:])
        ngen = m.get("n_gen_tokens")
        if ngen is None or ngen < d["n_predict"]:
            d["status"] = "short"  # generated fewer tokens than asked: no decode figure
        ranks = m.get("ranks") or []
        workers = [x for x in ranks if x.get("role") == "worker"] or ranks
        d.update({
            "n_forward": nf, "ms_per_token": ms, "n_gen_tokens": ngen,
            "n_prompt_tokens": m.get("n_prompt_tokens"), "decode_positions": m.get("decode_positions"),
            "gen_tokens_per_s": num(m.get("gen_tokens_per_s")),
            "ms_per_token_all_positions": num(m.get("ms_per_token")),
            "stopped_by": m.get("stopped_by"),
            # the boards a plan uses: the controller (a board of its own, rank 0) and every
            # worker that holds weights; a single process is one
            "boards": (1 + sum(1 for x in ranks if x.get("role") == "worker"
                               and (x.get("weight_bytes") or 0) > 0)) if ranks else None,
            "s_per_256": ms * 256 / 1000 if ms is not None else None,
            "first_position_s": tms[0] / 1000 if tms else None,
            "load_s": num(m.get("load_s")), "generate_s": gen,
            "hops_per_token": num(m.get("hops_per_token")),
            "bytes_per_token": num(m.get("bytes_per_token")),
            "bytes_total": num(m.get("bytes_total")),
            "spec_tried": m.get("spec_tried"), "spec_kept": m.get("spec_kept"),
            "spec_acceptance": num(m.get("spec_acceptance")),
            "deadline_misses": m.get("deadline_misses"), "retries": m.get("retries"),
            "tokens_checksum": m.get("tokens_checksum", ""),
            "auto_choice": CAND.get((m.get("plan") or {}).get("partition", ""),
                                    (m.get("plan") or {}).get("partition", "")),
            "predicted_ms_per_token": num(m.get("predicted_ms_per_token")),
            "peak_rss_worker_max_mb": (max(x.get("peak_rss_bytes", 0) for x in workers) / 2**20
                                       if workers else None),
            "weight_bytes_worker_max": max((x.get("weight_bytes", 0) for x in workers), default=None),
        })
        d["mb_per_256"] = d["bytes_per_token"] * 256 / 1e6 if d["bytes_per_token"] is not None else None
        # what the ranks put on the wire (payload bytes as sent, f16 included), per position
        if ranks and nf:
            d["wire_bytes_per_token"] = sum(x.get("bytes_sent") or 0 for x in ranks) / nf
            d["msgs_per_token"] = sum(x.get("messages_sent") or 0 for x in ranks) / nf
        if "energy_j" in m:
            ej = num(m.get("energy_j"))
            d["energy_source"] = m.get("energy_source", "engine")
            d["energy_j"] = ej
            d["energy_per_token_j"] = num(m.get("energy_per_token_j"))
            d["edp_js"] = num(m.get("edp_js"))
        else:
            # Harness model: E = sum over ranks of 3.8 W x wall + 1.2 W x CPU seconds.
            wall = (num(m.get("load_s")) or 0) + (gen or 0)
            ej = sum(IDLE_W * wall + EXTRA_W * (x.get("cpu_s") or 0) for x in ranks) if ranks else None
            d["energy_source"] = "harness-cpu-time-model"
            d["energy_j"] = ej
            d["energy_per_token_j"] = ej / nf if ej is not None and nf else None
            d["edp_js"] = (d["energy_per_token_j"] * gen / nf
                           if d["energy_per_token_j"] is not None and gen and nf else None)
        # Steady state: the first position also waits for the workers' loading (token_ms[0]
        # is seconds on big models); scale the energy to the later positions' share of time.
        if d.get("energy_j") is not None and gen and tms and nf and nf > 1:
            share = max(0.0, (gen - tms[0] / 1000) / gen)
            d["energy_per_token_steady_j"] = d["energy_j"] * share / (nf - 1)
            d["edp_steady_js"] = (d["energy_per_token_steady_j"] * ms / 1000
                                  if ms is not None else None)
    if r["config"] == "auto" and r["log"] and os.path.exists(r["log"]):
        import re
        for line in open(r["log"], errors="replace"):
            mm = re.search(r"auto partition: predicted ms/token (.*?) -> (\w+)", line)
            if mm:
                for part in mm.group(1).split(","):
                    kv = part.split()
                    if len(kv) == 2 and num(kv[1]) is not None:
                        d[f"auto_predicted_{kv[0]}_ms"] = num(kv[1])
                ch = "layer/dp" if mm.group(2) == "layer" and "--placement dp" in line else \
                    CAND.get(mm.group(2), mm.group(2))
                d["auto_choice"] = ch if ch == "layer/dp" else (d.get("auto_choice") or ch)
    results.append(d)

# ---- exactness, measured: logits against the single-process run of the same model and repeat
from array import array
def read_f32(path):
    a = array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a

def logits_of(d):
    p = os.path.join(out, d["metrics"][:-5] + ".logits") if d.get("metrics") else ""
    return p if p and os.path.exists(p) else None

single_runs = {(d["base_model"], d["rep"]): d
               for d in results if d["config"] == "single" and d["status"] == "ok"}
for d in results:
    if d["status"] != "ok" or d["config"] == "single": continue
    ref = single_runs.get((d["base_model"], d["rep"]))
    if ref:
        d["same_tokens_as_single"] = d.get("tokens_checksum") == ref.get("tokens_checksum")
    a_p, b_p = logits_of(d), ref and logits_of(ref)
    if not a_p or not b_p: continue
    a, b = read_f32(a_p), read_f32(b_p)
    m = json.load(open(os.path.join(out, d["metrics"])))
    V = ((m.get("model") or {}).get("vocab_size")) or 0
    if not V or len(a) % V or len(b) % V:
        d["logits_vs_single"] = "different length"; continue
    if a.tobytes() == b.tobytes():
        d["logits_vs_single"] = "identical"; d["logits_max_abs_diff"] = 0.0; d["argmax_rows_differ"] = 0
        continue
    n = min(len(a), len(b))  # the rows both ran (a run cut short has fewer)
    dm, rows = 0.0, 0
    for i in range(0, n, V):
        ra, rb = a[i:i + V], b[i:i + V]
        dm = max(dm, max(abs(x - y) for x, y in zip(ra, rb)))
        rows += max(range(V), key=ra.__getitem__) != max(range(V), key=rb.__getitem__)
    d["logits_vs_single"] = "differ" if len(a) == len(b) else "differ in length"
    d["logits_max_abs_diff"] = dm; d["argmax_rows_differ"] = rows

COLS = ["model", "config", "partition", "placement", "speculate", "tolerance", "rtt_ms", "link",
        "groups", "rep", "seed", "n_predict", "status", "rc", "wall_s", "loadavg_1min", "started",
        "n_forward", "n_prompt_tokens", "n_gen_tokens", "decode_positions", "stopped_by",
        "ms_per_token", "ms_per_token_all_positions", "gen_tokens_per_s", "boards", "s_per_256", "first_position_s", "load_s", "generate_s",
        "hops_per_token", "bytes_per_token", "mb_per_256", "bytes_total", "spec_tried",
        "spec_kept", "spec_acceptance", "deadline_misses", "retries", "energy_source",
        "energy_j", "energy_per_token_j", "edp_js", "energy_per_token_steady_j",
        "edp_steady_js", "peak_rss_worker_max_mb", "weight_bytes_worker_max",
        "logits_vs_single", "same_tokens_as_single", "logits_max_abs_diff", "argmax_rows_differ", "load_wait_s",
        "max_load",
        "tokens_checksum", "auto_choice", "predicted_ms_per_token", "auto_predicted_layer_ms",
        "auto_predicted_head_ms", "auto_predicted_slice_ms", "synthetic", "metrics", "log"]

def fmt(v, nd=6):
    if v is None: return ""
    if isinstance(v, bool): return "1" if v else "0"
    if isinstance(v, float): return f"{v:.{nd}g}"
    return str(v)

with open(os.path.join(out, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(COLS)
    for d in results:
        w.writerow([fmt(d.get(c)) for c in COLS])

ok = [d for d in results if d["status"] == "ok" and d.get("ms_per_token") is not None]

def key_rtt(v):
    return None if v is None else round(v, 3)

def pick(model, config, rtt, tol=None):
    if config == "single":  # one per model and repeat, whatever the RTT and the medium
        return [d for d in ok if d["base_model"] == model.split("@")[0] and d["config"] == "single"]
    return [d for d in ok if d["model"] == model and d["config"] == config
            and key_rtt(d["rtt_ms"]) == key_rtt(rtt)
            and (tol is None or (d["tolerance"] is not None and abs(d["tolerance"] - tol) < 1e-9))]

def per_rep_ratio(ref, runs):
    """speedup of runs over ref, repeat by repeat (same repeat = same stretch of time)."""
    refs = {d["rep"]: d["ms_per_token"] for d in ref}
    return [refs[d["rep"]] / d["ms_per_token"] for d in runs if d["rep"] in refs and d["ms_per_token"]]

models = []
for d in results:
    if d["model"] not in models: models.append(d["model"])
synthetic = {d["model"]: d["synthetic"] for d in results}

def spec_tol(d):
    return d["tolerance"]

# ---- summary: model x configuration at the base RTT -----------------------------------
def summarise(model, config, rtt, tol=None):
    runs = pick(model, config, rtt, tol)
    allruns = [d for d in results if d["model"] == model and d["config"] == config
               and (config == "single" or key_rtt(d["rtt_ms"]) == key_rtt(rtt))
               and (tol is None or (d["tolerance"] is not None and abs(d["tolerance"] - tol) < 1e-9))]
    if not allruns: return None
    layer = pick(model, "layer", rtt)
    s = {"model": model, "config": config, "rtt_ms": None if config == "single" else rtt,
         "tolerance": tol,
         "runs": len(allruns), "ok": len(runs),
         "failed": ",".join(sorted({d["status"] for d in allruns if d["status"] != "ok"}))}
    v = [d["ms_per_token"] / 1000 for d in runs]
    s["s_per_token_median"], s["s_per_token_min"], s["s_per_token_max"] = med(v), mn(v), mx(v)
    s["s_per_256_median"] = s["s_per_token_median"] * 256 if v else None
    s["s_per_256_min"] = s["s_per_token_min"] * 256 if v else None
    s["s_per_256_max"] = s["s_per_token_max"] * 256 if v else None
    lm = med([d["ms_per_token"] for d in layer])
    timed = config != "single"  # the reference's time is the host's: no speedup
    s["speedup_vs_layer"] = (lm / (s["s_per_token_median"] * 1000)) if lm and v and timed else None
    rr = per_rep_ratio(layer, runs) if timed else []
    s["speedup_min"], s["speedup_max"] = mn(rr), mx(rr)
    # the best layer-wise baseline: the faster (median) of naive N stages and the best plan
    # over subsets of the boards (--placement dp)
    lw = [(med([d["ms_per_token"] for d in pick(model, c, rtt)]), c) for c in LAYERWISE]
    lw = [x for x in lw if x[0]]
    if lw and v and timed:
        bm, bc = min(lw)
        s["best_layerwise"] = bc
        s["speedup_vs_best_layerwise"] = bm / (s["s_per_token_median"] * 1000)
    s["boards"] = ",".join(str(b) for b in sorted({d["boards"] for d in runs if d.get("boards")}))
    s["gen_tokens_per_s_median"] = med([d.get("gen_tokens_per_s") for d in runs])
    s["n_gen_tokens_min"] = mn([d.get("n_gen_tokens") for d in runs])
    s["n_predict"] = mx([d.get("n_predict") for d in allruns])
    for k in ("hops_per_token", "bytes_per_token", "mb_per_256", "spec_acceptance",
              "wire_bytes_per_token", "msgs_per_token",
              "energy_per_token_j", "edp_js", "energy_per_token_steady_j", "edp_steady_js",
              "first_position_s", "load_s", "predicted_ms_per_token", "deadline_misses",
              "auto_predicted_layer_ms", "auto_predicted_head_ms", "auto_predicted_slice_ms"):
        s[k] = med([num(d.get(k)) for d in runs])
    s["spec_tried"] = sum(d.get("spec_tried") or 0 for d in runs)
    s["spec_kept"] = sum(d.get("spec_kept") or 0 for d in runs)
    s["peak_rss_worker_max_mb"] = mx([d.get("peak_rss_worker_max_mb") for d in runs])
    s["energy_source"] = ",".join(sorted({d.get("energy_source", "") for d in runs if d.get("energy_source")}))
    s["auto_choice"] = ",".join(sorted({d["auto_choice"] for d in runs if d.get("auto_choice")})) if config == "auto" else ""
    # Same tokens as the single process in the same repeat? (exact configurations must agree)
    same = [d["same_tokens_as_single"] for d in runs if d.get("same_tokens_as_single") is not None]
    s["same_tokens_as_single"] = ("reference" if config == "single" else
                                  "yes" if same and all(same) else "no" if same and not any(same)
                                  else f"{sum(same)}/{len(same)}" if same else "")
    cmp_ = [d for d in runs if d.get("logits_vs_single")]
    if config == "single":
        s["exact"] = "reference"
    elif not cmp_:
        s["exact"] = "?"
    elif all(d["logits_vs_single"] == "identical" for d in cmp_):
        s["exact"] = "yes"
    else:
        dm = mx([d.get("logits_max_abs_diff") for d in cmp_])
        rows = sum(d.get("argmax_rows_differ") or 0 for d in cmp_)
        s["exact"] = (f"no: logits within {dm:.1e}" if dm is not None else "no") + \
                     (f", argmax differs in {rows} rows" if rows else ", same argmax")
    s["logits_max_abs_diff"] = mx([d.get("logits_max_abs_diff") for d in cmp_])
    s["load_wait_s_max"] = mx([d.get("load_wait_s") for d in allruns])
    s["loadavg_max"] = mx([d.get("loadavg_1min") for d in allruns])
    s["loadavg_median"] = med([d.get("loadavg_1min") for d in allruns])
    return s

summary = []
for model in models:
    for c in MAIN_ORDER:
        rtt = base_rtt
        tol = None
        if "spec" in c:
            cands = [d for d in results if d["model"] == model and d["config"] == c
                     and "main" in d["groups"].split(",")]
            tol = cands[0]["tolerance"] if cands else None
        if not any(d for d in results if d["model"] == model and d["config"] == c
                   and "main" in d["groups"].split(",")):
            continue
        s = summarise(model, c, rtt, tol)
        if s: summary.append(s)

SUMCOLS = ["model", "config", "exact", "rtt_ms", "tolerance", "runs", "ok", "failed",
           "s_per_token_median", "s_per_token_min", "s_per_token_max", "s_per_256_median",
           "s_per_256_min", "s_per_256_max", "speedup_vs_layer", "speedup_min", "speedup_max",
           "hops_per_token", "bytes_per_token", "mb_per_256", "spec_acceptance", "spec_tried",
           "spec_kept", "energy_per_token_j", "edp_js", "energy_per_token_steady_j",
           "edp_steady_js", "energy_source", "peak_rss_worker_max_mb", "first_position_s",
           "load_s", "same_tokens_as_single", "auto_choice", "predicted_ms_per_token",
           "boards", "best_layerwise", "speedup_vs_best_layerwise", "gen_tokens_per_s_median",
           "n_gen_tokens_min", "n_predict",
           "deadline_misses", "loadavg_median", "loadavg_max", "load_wait_s_max",
           "logits_max_abs_diff"]
with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(SUMCOLS)
    for s in summary:
        w.writerow([fmt(s.get(c)) for c in SUMCOLS])

# ---- RTT sweep --------------------------------------------------------------------------
rtt_rows = []
sweep_models = []
for d in results:
    if "rtt" in d["groups"].split(",") and d["model"] not in sweep_models:
        sweep_models.append(d["model"])
for model in sweep_models:
    rtts = sorted({d["rtt_ms"] for d in results if d["model"] == model and d["rtt_ms"] is not None
                   and "rtt" in d["groups"].split(",")})
    for rtt in rtts:
        cells = {}
        for c in SWEEP_CONFIGS:
            s = summarise(model, c, rtt)
            if s and s["ok"]: cells[c] = s
        if not cells: continue
        exact = {c: s for c, s in cells.items() if c != "auto"}
        best = min(exact, key=lambda c: exact[c]["s_per_token_median"]) if exact else None
        for c, s in cells.items():
            r = {"model": model, "rtt_ms": rtt, "config": c,
                 "s_per_token_median": s["s_per_token_median"],
                 "s_per_token_min": s["s_per_token_min"], "s_per_token_max": s["s_per_token_max"],
                 "speedup_vs_layer": s["speedup_vs_layer"], "hops_per_token": s["hops_per_token"],
                 "bytes_per_token": s["bytes_per_token"], "auto_choice": s["auto_choice"],
                 "predicted_ms_per_token": s["predicted_ms_per_token"],
                 "best_fixed_config": best,
                 "vs_best": (s["s_per_token_median"] / exact[best]["s_per_token_median"]
                             if best else None), "runs": s["runs"], "ok": s["ok"]}
            if c == "auto":
                # auto passes when it picked the best fixed partition (then a measured gap is
                # run-to-run noise) or when what it picked measured within 10% of the best.
                r["auto_same_as_best"] = bool(best) and s["auto_choice"] == best
                r["auto_ok"] = r["auto_same_as_best"] or (r["vs_best"] is not None and r["vs_best"] <= 1.10)
                for p_ in ("layer", "head", "slice"):
                    r[f"auto_predicted_{p_}_ms"] = s.get(f"auto_predicted_{p_}_ms")
                    cc = cand_config(p_, cells)
                    r[f"measured_{p_}_ms"] = (cells[cc]["s_per_token_median"] * 1000
                                              if cc in cells else None)
            rtt_rows.append(r)
RTTCOLS = ["model", "rtt_ms", "config", "s_per_token_median", "s_per_token_min",
           "s_per_token_max", "speedup_vs_layer", "hops_per_token", "bytes_per_token",
           "auto_choice", "predicted_ms_per_token", "best_fixed_config", "vs_best",
           "auto_same_as_best", "auto_ok", "auto_predicted_layer_ms", "auto_predicted_head_ms",
           "auto_predicted_slice_ms", "measured_layer_ms", "measured_head_ms", "measured_slice_ms",
           "runs", "ok"]
with open(os.path.join(out, "rtt_sweep.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(RTTCOLS)
    for r in rtt_rows:
        w.writerow([fmt(r.get(c)) for c in RTTCOLS])

# ---- tolerance sweep ---------------------------------------------------------------------
tol_rows = []
tol_models = []
for d in results:
    if "tol" in d["groups"].split(",") and d["model"] not in tol_models:
        tol_models.append(d["model"])
for model in tol_models:
    tols = sorted({d["tolerance"] for d in results if d["model"] == model and d["tolerance"] is not None
                   and "tol" in d["groups"].split(",")})
    head = pick(model, "head/greedy", base_rtt)
    hm = med([d["ms_per_token"] for d in head])
    for tol in tols:
        s = summarise(model, "head+spec/greedy", base_rtt, tol)
        if not s or not s["ok"]: continue
        runs = pick(model, "head+spec/greedy", base_rtt, tol)
        hr = per_rep_ratio(head, runs)
        href = {d["rep"]: d["tokens_checksum"] for d in head}
        same = [d["tokens_checksum"] == href[d["rep"]] for d in runs if d["rep"] in href]
        tol_rows.append({
            "model": model, "tolerance": tol, "synthetic": synthetic.get(model, False),
            "spec_acceptance": s["spec_acceptance"], "spec_tried": s["spec_tried"],
            "spec_kept": s["spec_kept"], "s_per_token_median": s["s_per_token_median"],
            "head_s_per_token_median": hm / 1000 if hm else None,
            "speedup_vs_head": (hm / 1000 / s["s_per_token_median"]) if hm else None,
            "speedup_vs_head_min": mn(hr), "speedup_vs_head_max": mx(hr),
            "speedup_vs_layer": s["speedup_vs_layer"],
            "same_tokens_as_head": ("yes" if same and all(same) else "no" if same and not any(same)
                                    else f"{sum(same)}/{len(same)}" if same else ""),
            "runs": s["runs"], "ok": s["ok"]})
TOLCOLS = ["model", "tolerance", "synthetic", "spec_acceptance", "spec_tried", "spec_kept",
           "s_per_token_median", "head_s_per_token_median", "speedup_vs_head",
           "speedup_vs_head_min", "speedup_vs_head_max", "speedup_vs_layer",
           "same_tokens_as_head", "runs", "ok"]
with open(os.path.join(out, "tolerance_sweep.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(TOLCOLS)
    for r in tol_rows:
        w.writerow([fmt(r.get(c)) for c in TOLCOLS])

# ---- headline figures ------------------------------------------------------------------
# Exact for the headline: bit-identical logits, or (slice: sums in another order) the same
# argmax everywhere with logits within 1e-4 of the single process's.
def exact_tokens(s):
    e = s.get("exact") or ""
    return e in ("yes", "reference") or (e.endswith("same argmax")
                                         and (s.get("logits_max_abs_diff") or 1) <= 1e-4)

headline = {}
for model in models:
    # The best exact configuration is a fixed one (auto is judged against it).
    exact = [s for s in summary if s["model"] == model and s["config"] not in ("auto", "single")
             and exact_tokens(s) and s["s_per_token_median"] is not None]
    layer = [s for s in exact if s["config"] == "layer"]
    if not exact or not layer: continue
    best = min(exact, key=lambda s: s["s_per_token_median"])
    allbest = min([s for s in summary if s["model"] == model and s["config"] not in ("auto", "single")
                   and s["s_per_token_median"] is not None],
                  key=lambda s: s["s_per_token_median"])
    lws = [s for s in exact if s["config"] in LAYERWISE]
    blw = min(lws, key=lambda s: s["s_per_token_median"])
    autos = [s for s in summary if s["model"] == model and s["config"] == "auto"]
    h = {"layer_s_per_token": layer[0]["s_per_token_median"], "best_exact": best["config"],
         "best_exact_s_per_token": best["s_per_token_median"],
         "best_exact_speedup": layer[0]["s_per_token_median"] / best["s_per_token_median"],
         "best_any": allbest["config"], "best_any_speedup":
         layer[0]["s_per_token_median"] / allbest["s_per_token_median"],
         "best_layerwise": blw["config"], "best_layerwise_s_per_token": blw["s_per_token_median"],
         "best_exact_vs_best_layerwise": blw["s_per_token_median"] / best["s_per_token_median"]}
    if autos and autos[0]["s_per_token_median"]:
        h["auto_choice"] = autos[0]["auto_choice"]
        h["auto_hops"], h["best_exact_hops"] = autos[0]["hops_per_token"], best["hops_per_token"]
        h["auto_vs_best_exact"] = autos[0]["s_per_token_median"] / best["s_per_token_median"]
    sw = [r for r in rtt_rows if r["model"] == model]
    if sw:
        per = {}
        for r in sw:
            if r["config"] == "auto": per[r["rtt_ms"]] = r
        if per:
            h["auto_vs_best_by_rtt"] = {f"{k:g}": v["vs_best"] for k, v in sorted(per.items())}
            h["auto_choice_by_rtt"] = {f"{k:g}": (v["auto_choice"], v["best_fixed_config"])
                                       for k, v in sorted(per.items())}
            h["auto_within_10pct_everywhere"] = all(v["auto_ok"] for v in per.values())
        # Where head-level parallelism (best of head, slice) stops beating layer-wise.
        pts = []
        for rtt in sorted({r["rtt_ms"] for r in sw}):
            cs = {r["config"]: r for r in sw if r["rtt_ms"] == rtt}
            if "layer" in cs and ("head/greedy" in cs or "slice" in cs):
                hb = min(cs[c]["s_per_token_median"] for c in ("head/greedy", "slice") if c in cs)
                pts.append((rtt, cs["layer"]["s_per_token_median"] / hb))
        cross = None
        for (r0, s0), (r1, s1) in zip(pts, pts[1:]):
            if s0 >= 1 > s1:
                cross = r0 + (r1 - r0) * (s0 - 1) / (s0 - s1)
                break
        h["head_level_speedup_by_rtt"] = {f"{r:g}": s for r, s in pts}
        if pts:
            if cross is not None:
                h["head_level_breakeven_rtt_ms"] = cross
            elif all(s_ < 1 for _, s_ in pts):
                h["head_level_breakeven_rtt_ms"] = f"never: layer-wise is faster at every RTT from {pts[0][0]:g} to {pts[-1][0]:g} ms"
            elif all(s_ >= 1 for _, s_ in pts):
                h["head_level_breakeven_rtt_ms"] = f"not reached: head-level is faster at every RTT up to {pts[-1][0]:g} ms"
            else:
                h["head_level_breakeven_rtt_ms"] = "no single crossing: " + ", ".join(f"{r_:g} ms {s_:.2f}x" for r_, s_ in pts)
    headline[model] = h

json.dump({"meta": meta, "headline": headline, "summary": summary, "rtt_sweep": rtt_rows,
           "tolerance_sweep": tol_rows, "runs": results},
          open(os.path.join(out, "results.json"), "w"), indent=1)

# ---- Markdown ----------------------------------------------------------------------------
def f2(v, nd=2, suf=""):
    return "–" if v is None else f"{v:.{nd}f}{suf}"

def fsig(v, sig=3):
    if v is None: return "–"
    if v == 0: return "0"
    mag = math.floor(math.log10(abs(v)))
    nd = max(0, sig - 1 - mag)
    return f"{v:,.{nd}f}"

def rng(lo, hi, nd=2):
    if lo is None or hi is None: return ""
    if abs(hi - lo) < 10 ** -nd: return ""
    return f" ({lo:.{nd}f}–{hi:.{nd}f})"

def human_bytes(b):
    if b is None: return "–"
    for unit, div in (("MB", 1e6), ("kB", 1e3)):
        if b >= div: return f"{b / div:.3g} {unit}"
    return f"{b:.0f} B"

# ---- where the time goes on a shared channel: airtime and latency floors per configuration
def link_params(spec):
    """(bw B/s, rtt s, frame s, shared, relay) of a link spec as cluster_parse_link reads it."""
    bw, rtt, frame, shared, relay = 0.0, 0.0, 0.0, False, False
    for item in (spec or "").split(","):
        k, _, v = item.partition("=")
        if not v:
            if k == "wifi": bw, rtt, frame, shared, relay = 25e6, 10e-3, 0.2e-3, True, True
            if k == "ethernet": bw, rtt, shared, relay = 125e6, 0.2e-3, False, False
            continue
        def t(x):
            for u, f in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0)):
                if x.endswith(u): return float(x[:-len(u)]) * f
            return float(x) * 1e-3
        def r(x):
            for u, f in (("gbit", 1e9 / 8), ("mbit", 1e6 / 8), ("kbit", 1e3 / 8), ("bit", 1 / 8), ("MB", 1e6)):
                if x.endswith(u): return float(x[:-len(u)]) * f
            return float(x) * 1e6 / 8
        if k == "rtt": rtt = t(v)
        elif k == "frame": frame = t(v)
        elif k == "bw": bw = r(v)
        elif k == "medium": shared = v == "shared"
        elif k == "relay": relay = v == "ap"
    return bw, rtt, frame, shared, relay

def air_of(s_):
    """(airtime, latency, the rest) in s per position of a summary row on a shared link."""
    runs_ = pick(s_["model"], s_["config"], s_["rtt_ms"], s_["tolerance"])
    if not runs_: return None
    bw, rtt, frame, shared, relay = link_params(runs_[0]["link"])
    if not shared or not bw or s_.get("wire_bytes_per_token") is None: return None
    air = (s_["wire_bytes_per_token"] / bw + (s_.get("msgs_per_token") or 0) * frame) * (2 if relay else 1)
    lat = (s_.get("hops_per_token") or 0) * rtt / 2
    return air, lat, s_["s_per_token_median"] - air - lat

L = []
reps = meta.get("repeats", "?")
L.append(f"Base link: `{meta.get('link', '?')}`; device: `{meta.get('device', '?')}`; "
         f"launcher: `{meta.get('launcher', '?')}`; repeats: {reps}; "
         f"new tokens per run: {meta.get('tokens_desc', '?')} after the prompt "
         f"\"{meta.get('prompt', '?')}\" (`--batch {meta.get('batch', '?')}`).")
L.append("")
if headline:
    L.append("### Headline")
    L.append("")
    for model, h in headline.items():
        line = (f"- **{model}**: layer-wise {h['layer_s_per_token']:.3f} s/token; best exact "
                f"configuration `{h['best_exact']}` {h['best_exact_s_per_token']:.3f} s/token = "
                f"**{h['best_exact_speedup']:.2f}x** layer-wise")
        if h.get("best_any") != h.get("best_exact"):
            line += f" (fastest of all: `{h['best_any']}`, {h['best_any_speedup']:.2f}x)"
        line += (f"; against the best layer-wise plan (`{h['best_layerwise']}`, "
                 f"{h['best_layerwise_s_per_token']:.3f} s/token): "
                 f"**{h['best_exact_vs_best_layerwise']:.2f}x**")
        if "auto_choice" in h:
            same = h["auto_choice"] == h["best_exact"]
            line += (f"; `auto` chose `{h['auto_choice']}`"
                     + (" (the best)" if same else f" (not the best, `{h['best_exact']}`)")
                     + f", measured {(h['auto_vs_best_exact'] - 1) * 100:+.0f}% vs the best"
                     + ((" (same partition and hops/token: the gap is run-to-run variation)"
                         if h.get("auto_hops") == h.get("best_exact_hops") else
                         f" (same partition, another plan: {h.get('auto_hops') or 0:g} vs "
                         f"{h.get('best_exact_hops') or 0:g} hops/token)")
                        if same and abs(h['auto_vs_best_exact'] - 1) > 0.03 else ""))
        line += "."
        L.append(line)
        ss = {x["config"]: x for x in summary if x["model"] == model}
        if h["best_exact_speedup"] < 2.0 and ss.get(h["best_exact"]) and air_of(ss[h["best_exact"]]):
            a_, l_, r_ = air_of(ss[h["best_exact"]])
            lay = air_of(ss["layer"]) if "layer" in ss else None
            L.append(f"  Short of 2x: of `{h['best_exact']}`'s {h['best_exact_s_per_token']:.3f} "
                     f"s/token, {a_:.3f} s is the channel's airtime, {l_:.3f} s the latency of its "
                     f"{ss[h['best_exact']].get('hops_per_token') or 0:g} hops, {r_:.3f} s compute "
                     f"and waits" + (f" (layer-wise: {lay[2]:.3f} s compute and waits)" if lay else "")
                     + f"; 2x needs {h['layer_s_per_token'] / 2:.3f} s/token.")
        if "head/seed" in ss or "head/seed+spec" in ss:
            def sp_(c):
                x = ss.get(c)
                return (f"{x['speedup_vs_layer']:.2f}x{rng(x['speedup_min'], x['speedup_max'])}"
                        if x and x["speedup_vs_layer"] else "–")
            L.append(f"  The reference design (heads spread over the workers, FFN whole): "
                     f"`head/seed` {sp_('head/seed')}, with speculation `head/seed+spec` "
                     f"{sp_('head/seed+spec')} layer-wise; the article claims 1.24-1.31x for "
                     f"heads alone and 1.56x with speculation.")
        if "auto_vs_best_by_rtt" in h:
            parts = []
            for k, v in h["auto_vs_best_by_rtt"].items():
                ch, be = h["auto_choice_by_rtt"][k]
                parts.append(f"{k} ms: {ch or '?'}" + (" = best" if ch == be else f" (best {be})")
                             + (f" {(v - 1) * 100:+.0f}%" if v is not None else ""))
            L.append(f"  RTT sweep, `auto`'s pick and its measured gap to the best fixed configuration: "
                     f"{'; '.join(parts)} -> best or within 10% at every RTT: "
                     f"**{'yes' if h.get('auto_within_10pct_everywhere') else 'no'}**.")
        if "head_level_breakeven_rtt_ms" in h:
            be = h["head_level_breakeven_rtt_ms"]
            be = f"at RTT {be:.1f} ms" if isinstance(be, (int, float)) else be
            L.append(f"  Head-level (the better of head and slice) vs layer-wise: break-even {be}.")
    L.append("")

if str(reps) == "1":
    L.append("One repeat per configuration (no min-max): on a shared host, measurements of one "
             "configuration repeated in separate runs vary by 10-20%, so smaller gaps between "
             "configurations are not significant; `--full` repeats each three times.")
    L.append("")
L.append(f"### Main matrix (RTT {base_rtt:g} ms)" if base_rtt is not None else "### Main matrix")
L.append("")
L.append("Median over repeats, (min–max) where repeats differ. **s/token**: the median of the "
         "decode positions alone (the engine's `decode_ms_per_token`: the prompt's batched pass "
         "left out); **tok/s**: the engine's `gen_tokens_per_s` (the new tokens after the first "
         "over the time after it); **new tokens**: the fewest any run generated / asked. "
         "Speedup = naive layer-wise (`layer`, N stages) median / configuration median (range: "
         "per-repeat ratios); **vs best layer-wise**: against the faster of `layer` and "
         "`layer/dp` (the best layer-wise plan over subsets of the boards). **boards**: the "
         "controller and the workers holding weights. `single` is the reference, one process on "
         "the host outside the emulation: its time is not a board's. s/256 tok = median s/token x 256.")
L.append("")
L.append("| model | configuration | boards | exact | same tokens as single | s/token | tok/s | new tokens "
         "| s/256 tok | speedup vs layer-wise | vs best layer-wise | hops/token "
         "| bytes/token | MB/256 tok | acceptance | J/token | EDP J·s/token "
         "| peak RSS/worker | runs ok | load at start (max) |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for s in summary:
    acc = (f"{s['spec_acceptance']:.2f} ({s['spec_kept']}/{s['spec_tried']})"
           if "spec" in s["config"] and s["spec_acceptance"] is not None else "–")
    cfg = s["config"] + (f" -> {s['auto_choice']}" if s["auto_choice"] else "")
    sp = (f"{s['speedup_vs_layer']:.2f}x{rng(s['speedup_min'], s['speedup_max'])}"
          if s["speedup_vs_layer"] is not None else "–")
    blw = (f"{s['speedup_vs_best_layerwise']:.2f}x ({s['best_layerwise']})"
           if s.get("speedup_vs_best_layerwise") is not None else "–")
    L.append(
        f"| {s['model']} | {cfg} | {s['boards'] or '–'} | {s['exact']} | {s['same_tokens_as_single'] or '–'} "
        f"| {fsig(s['s_per_token_median'])}{rng(s['s_per_token_min'], s['s_per_token_max'], 3)} "
        f"| {fsig(s['gen_tokens_per_s_median'])} "
        f"| {s['n_gen_tokens_min'] if s['n_gen_tokens_min'] is not None else '–'}/{s['n_predict'] or '?'} "
        f"| {fsig(s['s_per_256_median'])} | {sp} | {blw} "
        f"| {f2(s['hops_per_token'], 0)} | {human_bytes(s['bytes_per_token'])} "
        f"| {f2(s['mb_per_256'], 2)} | {acc} "
        f"| {fsig(s['energy_per_token_steady_j'])} "
        f"| {fsig(s['edp_steady_js'])} "
        f"| {f2(s['peak_rss_worker_max_mb'], 0, ' MB')} "
        f"| {s['ok']}/{s['runs']}{' (' + s['failed'] + ')' if s['failed'] else ''} "
        f"| {f2(s['loadavg_max'], 1)} |")
srcs = sorted({s["energy_source"] for s in summary if s["energy_source"]})
L.append("")
L.append(f"Energy source: {', '.join(srcs) if srcs else '–'}. J/token is the steady state: the "
         "first position of a run also waits for the workers to finish loading, so the token "
         "loop's energy is scaled to the later positions' share of its time and divided by "
         "their number (an approximation: assumes even power over the loop). EDP = J/token x "
         "s/token. **exact**: the run's logits against the single process's of the same repeat "
         "(`--logits-out`): `yes` bit-identical; otherwise the largest difference and whether "
         "any position's argmax differs. **load at start**: the host's 1-minute load average "
         "when the run began (the harness waits, bounded, for it to fall below "
         f"{meta.get('max_load', '?')}).")
L.append("")

air_rows = []
for s_ in summary:
    a_ = air_of(s_)
    if a_: air_rows.append((s_,) + a_)
if air_rows:
    L.append("### Where the time goes on the shared channel")
    L.append("")
    L.append("Per position: airtime = what the ranks sent (bytes / bandwidth + 0.2 ms per "
             "transmission, twice through the access point: the channel's busy time, a floor "
             "when transmissions cannot overlap); latency = hops on the critical path x RTT/2; "
             "the rest is compute and waiting (s/token minus both, an approximation: a "
             "transmission can overlap other ranks' compute).")
    L.append("")
    L.append("| model | configuration | s/token | messages | MB on the air | airtime s | latency s | compute + waits s |")
    L.append("|---|---|---|---|---|---|---|---|")
    for s_, air, lat, rest in air_rows:
        L.append(f"| {s_['model']} | {s_['config']} | {fsig(s_['s_per_token_median'])} "
                 f"| {f2(s_.get('msgs_per_token'), 0)} | {f2(s_['wire_bytes_per_token'] / 1e6, 2)} "
                 f"| {f2(air, 3)} | {f2(lat, 3)} | {f2(rest, 3)} |")
    L.append("")

if rtt_rows:
    L.append("### RTT sweep")
    L.append("")
    L.append("Median s/token (speedup over layer-wise at the same RTT); jitter scales with the RTT "
             "(20%); bandwidth as the base link. `auto`: its choice and how far it is from the best "
             "fixed configuration.")
    L.append("")
    for model in sweep_models:
        rr = [r for r in rtt_rows if r["model"] == model]
        cfgs = [c for c in SWEEP_CONFIGS if any(r["config"] == c for r in rr)]
        L.append(f"**{model}**")
        L.append("")
        L.append("| RTT ms | " + " | ".join(cfgs) + " | best fixed | auto vs best |")
        L.append("|---" * (len(cfgs) + 3) + "|")
        for rtt in sorted({r["rtt_ms"] for r in rr}):
            cs = {r["config"]: r for r in rr if r["rtt_ms"] == rtt}
            cells = []
            for c in cfgs:
                r = cs.get(c)
                if not r: cells.append("–"); continue
                t = f"{fsig(r['s_per_token_median'])} ({r['speedup_vs_layer']:.2f}x)" if r["speedup_vs_layer"] else fsig(r["s_per_token_median"])
                if c == "auto" and r["auto_choice"]: t += f" -> {r['auto_choice']}"
                cells.append(t)
            any_r = next(iter(cs.values()))
            a = cs.get("auto")
            L.append(f"| {rtt:g} | " + " | ".join(cells) + f" | {any_r['best_fixed_config'] or '–'} | "
                     + (f"{(a['vs_best'] - 1) * 100:+.0f}%" if a and a["vs_best"] is not None else "–") + " |")
        L.append("")

autos = [r for r in rtt_rows if r["config"] == "auto" and any(
    r.get(f"auto_predicted_{p_}_ms") is not None for p_ in ("layer", "head", "slice"))]
if True:
    seen = {(r["model"], key_rtt(r["rtt_ms"])) for r in autos}
    for s in summary:
        if s["config"] == "auto" and s.get("auto_predicted_layer_ms") is not None \
                and (s["model"], key_rtt(base_rtt)) not in seen:
            have = {x["config"] for x in summary if x["model"] == s["model"] and x["s_per_token_median"]}
            meas = {p_: next((x["s_per_token_median"] * 1000 for x in summary if x["model"] == s["model"]
                              and x["config"] == cand_config(p_, have) and x["s_per_token_median"]), None)
                    for p_ in ("layer", "head", "slice")}
            exact_ = {p_: v for p_, v in meas.items() if v is not None}
            autos.append({"model": s["model"], "rtt_ms": base_rtt, "auto_choice": s["auto_choice"],
                          "best_fixed_config": cand_config(min(exact_, key=exact_.get), have) if exact_ else None,
                          **{f"auto_predicted_{p_}_ms": s.get(f"auto_predicted_{p_}_ms") for p_ in meas},
                          **{f"measured_{p_}_ms": v for p_, v in meas.items()}})
if autos:
    L.append("### `auto`: the cost model's prediction against the measurement")
    L.append("")
    L.append("ms/token predicted by `--partition auto` (its log line) and measured (median of the fixed "
             "configuration in the same run).")
    L.append("")
    L.append("| model | RTT ms | layer pred / meas | head pred / meas | slice pred / meas | auto picked | measured best |")
    L.append("|---|---|---|---|---|---|---|")
    for r in autos:
        cells = [f"{fsig(r.get(f'auto_predicted_{p_}_ms'))} / {fsig(r.get(f'measured_{p_}_ms'))}"
                 for p_ in ("layer", "head", "slice")]
        L.append(f"| {r['model']} | {r['rtt_ms']:g} | " + " | ".join(cells)
                 + f" | {r['auto_choice'] or '?'} | {r['best_fixed_config'] or '?'} |")
    L.append("")

if tol_rows:
    L.append("### Tolerance sweep (heads + speculation, greedy placement)")
    L.append("")
    L.append("Acceptance = kept / tried speculations. Speedup over heads without speculation "
             "(same placement, same RTT) and over layer-wise.")
    L.append("")
    L.append("| model | weights | tolerance | acceptance (kept/tried) | s/token | speedup vs heads only "
             "| speedup vs layer-wise | same tokens as heads only |")
    L.append("|---|---|---|---|---|---|---|---|")
    for r in tol_rows:
        L.append(f"| {r['model']} | {'synthetic' if r['synthetic'] else 'trained'} | {r['tolerance']:g} "
                 f"| {f2(r['spec_acceptance'], 2)} ({r['spec_kept']}/{r['spec_tried']}) "
                 f"| {fsig(r['s_per_token_median'])} "
                 f"| {f2(r['speedup_vs_head'], 2, 'x')}{rng(r['speedup_vs_head_min'], r['speedup_vs_head_max'])} "
                 f"| {f2(r['speedup_vs_layer'], 2, 'x')} | {r['same_tokens_as_head'] or '–'} |")
    if any(r["synthetic"] for r in tol_rows):
        L.append("")
        L.append("On synthetic (random) weights the acceptance says nothing about a trained model: "
                 "`||FFN(Z)|| / ||Z||` of random matrices is not what a trained network produces. "
                 "Those rows measure the cost of trying speculation, not its benefit.")
    L.append("")

failed = [d for d in results if d["status"] != "ok"]
if failed:
    L.append("### Runs that did not complete")
    L.append("")
    for d in failed:
        L.append(f"- {d['model']} {d['config']} RTT {d['rtt_ms']:g} ms rep {d['rep']}: "
                 f"{d['status']} (exit {d['rc']}); log `{d['log']}`")
    L.append("")

open(os.path.join(out, "table.md"), "w").write("\n".join(L) + "\n")

# ---- plot data --------------------------------------------------------------------------
pd = os.path.join(out, "plot")
os.makedirs(pd, exist_ok=True)
def g(v):
    return "NaN" if v is None else f"{v:.6g}"
main_models = [m for m in models if any(s["model"] == m for s in summary)]
for i, model in enumerate(main_models):
    with open(os.path.join(pd, f"seconds_{i}.dat"), "w") as f:
        f.write("# config s_per_256_median min max\n")
        for s in summary:
            if s["model"] == model:
                f.write(f"\"{s['config']}\" {g(s['s_per_256_median'])} {g(s['s_per_256_min'])} {g(s['s_per_256_max'])}\n")
cfgs_present = [c for c in MAIN_ORDER if any(s["config"] == c for s in summary)]
with open(os.path.join(pd, "speedup.dat"), "w") as f:
    f.write("# config " + " ".join(f"{m} min max" for m in main_models) + "\n")
    for c in cfgs_present:
        vals = []
        for m in main_models:
            s = next((s for s in summary if s["model"] == m and s["config"] == c), None)
            vals += [g(s["speedup_vs_layer"]) if s else "NaN",
                     g(s["speedup_min"] if s and s["speedup_min"] is not None else (s["speedup_vs_layer"] if s else None)),
                     g(s["speedup_max"] if s and s["speedup_max"] is not None else (s["speedup_vs_layer"] if s else None))]
        f.write(f"\"{c}\" " + " ".join(vals) + "\n")
for i, model in enumerate(sweep_models):
    rr = [r for r in rtt_rows if r["model"] == model]
    with open(os.path.join(pd, f"rtt_{i}.dat"), "w") as f:
        f.write("# rtt " + " ".join(f"{c}_s {c}_min {c}_max {c}_speedup" for c in SWEEP_CONFIGS) + "\n")
        for rtt in sorted({r["rtt_ms"] for r in rr}):
            cs = {r["config"]: r for r in rr if r["rtt_ms"] == rtt}
            vals = []
            for c in SWEEP_CONFIGS:
                r = cs.get(c)
                vals += [g(r["s_per_token_median"]) if r else "NaN", g(r["s_per_token_min"]) if r else "NaN",
                         g(r["s_per_token_max"]) if r else "NaN", g(r["speedup_vs_layer"]) if r else "NaN"]
            f.write(f"{rtt:g} " + " ".join(vals) + "\n")
for i, model in enumerate(tol_models):
    with open(os.path.join(pd, f"tol_{i}.dat"), "w") as f:
        f.write("# tolerance acceptance speedup_vs_head min max speedup_vs_layer\n")
        for r in tol_rows:
            if r["model"] == model:
                f.write(f"{r['tolerance']:g} {g(r['spec_acceptance'])} {g(r['speedup_vs_head'])} "
                        f"{g(r['speedup_vs_head_min'])} {g(r['speedup_vs_head_max'])} {g(r['speedup_vs_layer'])}\n")
def names(lst, tag=lambda m: ""):
    return " ".join(m + tag(m) for m in lst)
with open(os.path.join(pd, "lists.gp"), "w") as f:
    f.write(f"main_models = \"{names(main_models)}\"\n")
    f.write(f"sweep_models = \"{names(sweep_models)}\"\n")
    f.write(f"tol_models = \"{names(tol_models, lambda m: '(synthetic)' if synthetic.get(m) else '')}\"\n")
    f.write(f"n_cfg = {len(cfgs_present)}\n")
    f.write(f"base_rtt = \"{'' if base_rtt is None else f'{base_rtt:g}'}\"\n")
    sp = [v for s in summary for v in (s["speedup_vs_layer"], s["speedup_max"]) if v is not None]
    f.write(f"speedup_ymax = {max(sp + [2.0]) * 1.12:.3g}\n")
    f.write(f"tol_any_synthetic = {1 if any(synthetic.get(m) for m in tol_models) else 0}\n")
    dev = meta.get("device", "none")
    f.write("caveat = \"" + (f"emulated {dev} boards" if dev != "none" else "no device emulation")
            + (", emulated links" if meta.get("link", "none") != "none" else "")
            + (", synthetic weights" if any(synthetic.get(m) for m in main_models + sweep_models)
               else "")
            + f", {meta.get('repeats', '?')} repeats (median, min-max)\"\n")
print(f"aggregate: {len(results)} runs ({len(ok)} ok), {len(summary)} summary rows, "
      f"{len(rtt_rows)} RTT-sweep rows, {len(tol_rows)} tolerance-sweep rows", file=sys.stderr)
