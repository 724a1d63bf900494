#!/usr/bin/env python3
"""bench/serve_report.py OUT HEADER: bench/serve.sh's tables from OUT/rounds.jsonl.

Per plan and number of clients N: the aggregate generated tokens/s (median over the repeats,
with their range), its ratio to N = 1's median, the time to first token and the inter-token
latency (median and p90 over every client of every repeat), whether every client got the same
text (the same request at temperature 0) and the load at the rounds' starts.  Also writes
OUT/serve.dat (plan blocks: N, median, min, max aggregate tokens/s) for bench/serve.gp."""
import json
import statistics
import sys
from collections import OrderedDict


def pct(xs, q):
    """The q-th percentile by linear interpolation between the closest ranks."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    out, header = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
    plans = OrderedDict()
    with open(f"{out}/rounds.jsonl") as f:
        for line in f:
            r = json.loads(line)
            plans.setdefault(r["plan"], OrderedDict()).setdefault(r["round"]["clients"], []).append(r)
    print("# bench/serve.sh\n")
    if header:
        print(header + "\n")
    with open(f"{out}/serve.dat", "w") as dat:
        for plan, by_n in plans.items():
            print(f"## {plan}\n")
            print("| clients | aggregate tok/s (median, range) | vs 1 client | TTFT median / p90 (s) "
                  "| inter-token median / p90 (ms) | same text | load |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            base = None
            dat.write(f"{plan} median min max\n")
            for n, rounds in sorted(by_n.items()):
                agg = [r["round"]["aggregate_tokens_per_s"] for r in rounds]
                med = statistics.median(agg)
                if n == 1:
                    base = med
                ttft = [c["ttft_s"] for r in rounds for c in r["round"]["per_client"] if c["ttft_s"] is not None]
                gaps = [g for r in rounds for c in r["round"]["per_client"] for g in c["gaps_s"]]
                same = all(r["round"]["texts_equal"] for r in rounds)
                loads = [r["load"] for r in rounds]
                ratio = f"{med / base:.2f}x" if base else "-"
                print(f"| {n} | {med:.2f} ({min(agg):.2f}-{max(agg):.2f}) | {ratio} "
                      f"| {statistics.median(ttft):.2f} / {pct(ttft, 90):.2f} "
                      f"| {1e3 * statistics.median(gaps):.0f} / {1e3 * pct(gaps, 90):.0f} "
                      f"| {'yes' if same else 'NO'} | {min(loads):.1f}-{max(loads):.1f} |"
                      if gaps else
                      f"| {n} | {med:.2f} | {ratio} | - | - | {'yes' if same else 'NO'} | - |")
                dat.write(f"{n} {med} {min(agg)} {max(agg)}\n")
            dat.write("\n\n")
            print()


if __name__ == "__main__":
    main()
