#!/usr/bin/env python3
"""multipos.py OUT: the tables of bench/multipos.sh's runs (markdown on stdout).

Medians over the repeats of each configuration; the load column is the highest 1-minute load
average any of its repeats started at.  Figures come from each run's --metrics JSON:
generate_s, prompt_s, gen_tokens_per_s, prompt_tokens_per_s, n_prompt_tokens, n_gen_tokens,
passes, draft_acceptance, draft_k, the ranks' bytes_sent and hops_per_token.
"""
import csv
import json
import os
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, d=1):
    return "-" if x is None else ("%.*f" % (d, x))


def load_runs(out):
    runs = {}
    with open(os.path.join(out, "runs.tsv")) as f:
        for row in csv.DictReader(f, delimiter="\t"):
            key = (row["part"], row["config"], row["batch"], row["partition"])
            m = None
            if row["status"] == "ok":
                with open(os.path.join(out, row["metrics"])) as g:
                    m = json.load(g)
            runs.setdefault(key, []).append((float(row["load1"]), m, row["rep"]))
    return runs


def ok(rs):
    return [m for _, m, _ in rs if m]


def bytes_sent(m):
    return sum(r.get("bytes_sent", 0) for r in m.get("ranks", []))


def gen_ms_per_token(m):
    """Median wall time of a generated token (decoding passes only)."""
    g = m.get("gen_tokens_per_s")
    return 1e3 / g if g else None


def main():
    out = sys.argv[1]
    meta = json.load(open(os.path.join(out, "meta.json")))
    runs = load_runs(out)
    print("Run %s: target `%s`, draft `%s`, TinyLlama `%s`, device %s, link %s, %d repeats, "
          "revision %s, %s; extra flags: `%s`.\n" % (
              os.path.basename(out.rstrip("/")), meta["target"], meta["draft"],
              meta["tinyllama"], meta["device"], meta["link"], meta["reps"], meta["revision"],
              meta["host"], meta.get("args") or "none"))
    # --- prompt
    gen_ref = ok(runs.get(("prompt-gen", "8", str(meta["batch"]), "layer"), []))
    tok_ms = med([gen_ms_per_token(m) for m in gen_ref])
    rows = sorted((k for k in runs if k[0] == "prompt"), key=lambda k: (int(k[2]) == 1, int(k[1])))
    if rows:
        print("### Prompt processing (target, layer-wise)\n")
        print("Generated-token time (median of the decode run's tokens): %s ms.\n" % fmt(tok_ms))
        print("| prompt tokens | --batch | prompt + 1 new token (s) | in generated-token times "
              "| whole loop (s) | prompt tokens/s | max load |")
        print("|---|---|---|---|---|---|---|")
        for k in rows:
            ms = ok(runs[k])
            # prompt_s: from the first pass to the new token's logits (the loop's generate_s
            # also counts the stop message's trip through the pipeline)
            p = med([m.get("prompt_s") for m in ms])
            g = med([m.get("generate_s") for m in ms])
            pt = med([m.get("prompt_tokens_per_s") for m in ms])
            n = med([m.get("n_prompt_tokens") for m in ms])
            ratio = p * 1e3 / tok_ms if p and tok_ms else None
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                fmt(n, 0), k[2], fmt(p, 3), fmt(ratio, 2), fmt(g, 3), fmt(pt, 0),
                fmt(max(l for l, _, _ in runs[k]), 1)))
        print()
    # --- pi4
    rows = sorted(k for k in runs if k[0] == "pi4")
    if rows:
        print("### Compute-bound: TinyLlama shapes on emulated Pi 4 boards\n")
        print("| partition | --batch | prompt tokens/s | generated tokens/s | ratio | max load |")
        print("|---|---|---|---|---|---|")
        for k in rows:
            ms = ok(runs[k])
            pt = med([m.get("prompt_tokens_per_s") for m in ms])
            gt = med([m.get("gen_tokens_per_s") for m in ms])
            print("| %s | %s | %s | %s | %s | %s |" % (k[3], k[2], fmt(pt, 2), fmt(gt, 2),
                                                 fmt(pt / gt if pt and gt else None, 1),
                                                 fmt(max(l for l, _, _ in runs[k]), 1)))
        print()
    # --- draft
    rows = [k for k in runs if k[0] == "draft"]
    rows.sort(key=lambda k: (k[1] == "auto", int(k[1]) if k[1] != "auto" else 99))
    if rows:
        base = {rep: m for _, m, rep in runs.get(("draft", "0", str(meta["batch"]), "layer"), []) if m}
        base_tps = med([m.get("gen_tokens_per_s") for m in base.values()])
        print("### Speculative decoding with the draft model (temperature 0)\n")
        print("| K | generated tokens/s | speed-up | acceptance | tokens per pass | draft ms "
              "per token | verify ms per token | bytes per generated token | hops per "
              "generated token | tokens = no draft | max load |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for k in rows:
            rs = runs[k]
            ms = ok(rs)
            tps = med([m.get("gen_tokens_per_s") for m in ms])
            acc = med([m.get("draft_acceptance") for m in ms])
            tpp = med([m.get("tokens_per_pass") for m in ms])
            bpt = med([bytes_sent(m) / max(1, m.get("n_gen_tokens", 1)) for m in ms])
            hpt = med([m.get("hops_per_token", 0) * m.get("passes", m.get("n_forward", 0)) /
                       max(1, m.get("n_gen_tokens", 1)) for m in ms])
            dms = med([m.get("draft_s", 0) * 1e3 / max(1, m.get("n_gen_tokens", 1)) for m in ms])
            vms = med([m.get("verify_s", 0) * 1e3 / max(1, m.get("n_gen_tokens", 1)) for m in ms])
            same = all(m and rep in base and m.get("tokens") == base[rep].get("tokens")
                       for _, m, rep in rs)
            print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                "none" if k[1] == "0" else k[1], fmt(tps, 2),
                fmt(tps / base_tps if tps and base_tps else None, 2), fmt(acc, 2), fmt(tpp, 2),
                fmt(dms if k[1] != "0" else None, 1), fmt(vms if k[1] != "0" else None, 1),
                fmt(bpt, 0), fmt(hpt, 1), "yes" if same else "NO",
                fmt(max(l for l, _, _ in rs), 1)))
        print()
    failed = sum(1 for rs in runs.values() for _, m, _ in rs if not m)
    if failed:
        print("%d run(s) failed: see runs.tsv and runs/*.err.\n" % failed)


if __name__ == "__main__":
    main()
