#!/usr/bin/env python3
"""bench/report.py OUT DOC ASSETS: writes the results page DOC (docs/results.md) from a
bench/run.sh output directory OUT whose tables bench/aggregate.py has made; ASSETS is where
bench/report.sh copied the plots and tables, as the page links them.  Called by
bench/report.sh."""
import json, os, sys, statistics
if len(sys.argv) != 4:
    print("usage: bench/report.py OUT DOC ASSETS", file=sys.stderr)
    sys.exit(2)
out, doc, assets = sys.argv[1:4]
meta = json.load(open(os.path.join(out, "meta.json")))
res = json.load(open(os.path.join(out, "results.json")))
table = open(os.path.join(out, "table.md")).read()
rel = os.path.relpath(assets, os.path.dirname(doc) or ".")
loads = [r["loadavg_1min"] for r in res["runs"] if r.get("loadavg_1min") is not None]
mode = meta.get("mode", "?")
L = []
L.append("# Benchmark results")
L.append("")
L.append("<!-- Written by bench/report.sh from a bench/run.sh output directory; do not edit by hand. -->")
L.append("")
L.append("Distributed inference of HeadSplit on the emulated edge testbed: a controller and four "
         "workers, five MPI ranks, each "
         + (f"in its own cgroup as a `{meta.get('device')}` board (`scripts/emulate-device`, "
            f"{'compute dilation' if meta.get('device_model') == 'dilate' else 'CPU quota'})"
            if meta.get("device", "none") != "none" else "without device emulation")
         + (f", every message delayed as over `{meta.get('link')}` (`--emulate-link`)"
            if meta.get("link", "none") != "none" else ", on the real network")
         + ". What each configuration means, how the harness works and how to reproduce: "
           "[bench/README.md](../bench/README.md); the testbed: [testbed.md](testbed.md).")
L.append("")
L.append("| | |")
L.append("|---|---|")
L.append(f"| command | `{meta.get('command', '?')}` |")
L.append(f"| matrix | **{mode}** ({'few positions: indicative figures' if mode == 'quick' else '256 positions'}); "
         f"{meta.get('n_runs', '?')} runs ({meta.get('n_unique', '?')} distinct x {meta.get('repeats', '?')} repeat(s)), "
         f"all configurations interleaved within each repeat |")
L.append(f"| positions per run | {meta.get('tokens_desc', '?')} (prompt \"{meta.get('prompt', '')}\" included; "
         f"s/token is the engine's median over the positions after the first) |")
L.append(f"| machine | {meta.get('machine', '?')} (host {meta.get('host', '?')}) |")
L.append(f"| date | {meta.get('started', '?')} to {meta.get('finished', '?')} "
         f"({int(meta.get('elapsed_s', 0)) // 60} min {int(meta.get('elapsed_s', 0)) % 60} s) |")
L.append(f"| git revision | `{meta.get('git_revision', '?')}` (engine binary sha256 {meta.get('binary_sha256', '?')}...) |")
L.append(f"| launcher | `{meta.get('launcher', '?')}`, {meta.get('ranks', '?')} ranks; device `{meta.get('device', '?')}` "
         f"({meta.get('device_model', 'quota')}); "
         f"link `{meta.get('link', '?')}` |")
lm = f", median {statistics.median(loads):.1f} at the runs' starts (range {min(loads):.1f}-{max(loads):.1f})" if loads else ""
waits = [r.get("load_wait_s") or 0 for r in res["runs"]]
if meta.get("max_load") not in (None, "", "0"):
    lm += (f"; each run waited (at most {meta.get('load_wait_s', '?')} s) for a load below "
           f"{meta.get('max_load')}: {sum(1 for w in waits if w)} of {len(waits)} runs waited, "
           f"{sum(1 for r in res['runs'] if (r.get('loadavg_1min') or 0) >= float(meta.get('max_load')))} "
           "started above it anyway")
L.append(f"| host load average (1/5/15 min) | start {meta.get('loadavg_start', '?')}, end "
         f"{meta.get('loadavg_end', '?')}{lm} |")
failed = meta.get("failed_runs")
if failed not in (None, "", "0", 0):
    L.append(f"| runs that failed | {failed} (listed below) |")
L.append("")
if int(float(loads and statistics.median(loads) or 0)) > 2:
    L.append(f"> The host was shared with other work during this run (load average around "
             f"{statistics.median(loads):.0f} on {meta.get('machine', '').split(', ')[1] if ', ' in meta.get('machine', '') else '?'}). "
             "The emulated boards have CPU quotas and a high scheduling weight, so they get their "
             "share, but memory bandwidth and caches are shared: absolute times are noisier than "
             "on an idle host; the interleaving keeps the ratios fair.")
    L.append("")
notes = meta.get("notes") or []
if notes:
    L.append("Notes from the run: " + "; ".join(notes) + ".")
    L.append("")
syn = sorted({r["model"].split("@")[0] for r in res["runs"] if r.get("synthetic")})
if syn:
    L.append(f"**Emulated boards, synthetic weights.** The boards are emulated on one host (above); "
             f"{', '.join(syn)} {'is' if len(syn) == 1 else 'are'} synthetic (random weights of "
             "the real shapes, `headsplit-convert --synthetic`): the timings hold for the shapes, "
             "the tokens and acceptance rates mean nothing. "
             f"{meta.get('repeats', '?')} repeats per configuration, interleaved.")
    L.append("")
L.append("## Results")
L.append("")
L.append(table.rstrip())
L.append("")
L.append("## Plots")
L.append("")
for f, cap in (("seconds_per_256.png", "Seconds per 256 tokens per configuration"),
               ("speedup.png", "Speedup over layer-wise"),
               ("rtt_sweep.png", "RTT sweep"),
               ("tolerance_sweep.png", "Tolerance sweep: acceptance and speedup")):
    if os.path.exists(os.path.join(assets, f)):
        L.append(f"![{cap}]({rel}/{f})")
        L.append("")
L.append("Data: " + ", ".join(f"[{f}]({rel}/{f})" for f in
                              ("summary.csv", "rtt_sweep.csv", "tolerance_sweep.csv", "results.csv")
                              if os.path.exists(os.path.join(assets, f))) + " (one row per run).")
L.append("")
L.append("## How to read this")
L.append("")
L.append("- **Configurations.** `layer`: whole layers per worker (EdgeShard-style, `--partition layer "
         "--placement layer`); `head/seed`: the reference design, attention heads spread over the "
         "workers, each layer's projection and FFN whole on one worker, a gather and a broadcast "
         "per layer (`--partition head --placement spread`); `head/seed+spec`: the same with "
         f"inter-layer speculation on every transition (`--speculate all --tolerance {meta.get('spec_tolerance', '0.05')}`); "
         "`head/greedy`: heads placed by the link-aware greedy (`--placement greedy`: on a slow "
         "network it keeps a layer's heads with its FFN); `slice`: heads plus FFN slices on every "
         "worker (`--partition slice`, the exchange pattern by the cost model), `slice/f16` with "
         "`--wire f16`; `auto`: `--partition auto`, the engine's cost model picks (its pick after "
         "the arrow).")
L.append("- **Media.** `model@shared`: `--emulate-link` on one WiFi channel shared by every "
         "station through an access point (every transmission queues and takes the air twice); "
         "`model@switched`: the same RTT, jitter and bandwidth with a private path per pair.")
L.append("- **Exact** is measured: each run's logits against the layer-wise run's of the same "
         "repeat; `slice` sums partials in another order (logits within ~1e-5, same argmax), "
         "`--wire f16` rounds them (within ~1e-2); speculation at a non-zero tolerance may change "
         "tokens (column \"same tokens\").")
L.append("- **Speedup** = layer-wise median s/token / the configuration's, in the same run; the range is "
         "the per-repeat ratios. **hops/token** and **bytes/token** are the engine's counts "
         "(`hops_per_token`, `bytes_per_token`).")
L.append("- **Energy** comes from the engine (`energy_source`; on the emulated testbed the CPU-time model "
         "with the board's 3.8 W idle / 5.0 W active). The first position of a run also waits for "
         "the workers to finish loading; J/token and EDP are the steady state, without it.")
L.append("- **Acceptance** on synthetic weights is meaningless (random matrices, not a trained "
         "network); only stories260K and trained models in `weights/` say something about it.")
L.append("")
L.append(f"Reproduce: `{meta.get('command', 'bench/run.sh')}`; remake this page from that run's output "
         f"(`out/` is not in git): `bench/report.sh {os.path.relpath(out)}`.")
open(doc, "w").write("\n".join(L) + "\n")
print(f"report: wrote {doc} and {assets}/", file=sys.stderr)
