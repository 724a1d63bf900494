#!/usr/bin/env python3
"""bench/breakeven.py: the break-even map (docs/breakeven.md), by the simulator.

For every model shape x stored type x medium x RTT x bandwidth, headsplit-sim prices four
plans on five Raspberry Pi 4 boards (a controller and four workers, 3.5 GB each, the
emulated testbed's budget): the whole model on one board (where it fits), the best
layer-wise plan over any subset of the boards (--policy layer-dp: EdgeShard's DP), head-level
(--engine-partition head, greedy placement) and FFN slices (--engine-partition slice).  It
writes OUT/breakeven.tsv (one row per cell and plan), OUT/cells.tsv (per cell: the winner and
the best head/slice plan against the best layer-wise one) and OUT/map_*.dat for
bench/breakeven.gp.

The board's speed: --speed GB/s of stored bytes a board streams (default: the catalogue's pi4,
4.8; fitted by --calibrate, see breakeven.sh).  fp32 cells use the catalogue's figure (a Pi 4's
fp32 decode is memory-bound), quantized cells the --speed-q figure (default --speed).
"""
import argparse
import math
import json
import os
import subprocess
import sys

SHAPES = ["tinyllama-1.1b", "llama2-7b", "llama2-13b"]
TYPES = ["f32", "q4_0"]
MEDIA = ["shared", "switched"]
RTTS = [0.5, 1, 2, 5, 10, 20, 30]
BWS = [50, 100, 200, 500, 1000]
PLANS = [("one", ["--policy", "layer-dp"], 1),
         ("layer", ["--policy", "layer-dp"], 4),
         ("head", ["--engine-partition", "head"], 4),
         ("slice", ["--engine-partition", "slice"], 4)]


def devices_file(path, n_workers, speed, mem_mb):
    dev = {"name": "pi4", "speed_gbs": speed, "op_overhead_us": 0.0, "mem_mb": mem_mb,
           "load_mbs": 80.0}
    d = {"jitter": "halfnormal", "bcast": "auto",
         "devices": [dict(dev, name="controller")] + [dict(dev) for _ in range(n_workers)]}
    with open(path, "w") as f:
        json.dump(d, f, indent=1)


def link_spec(medium, rtt, bw):
    s = "rtt=%gms,jitter=%gms,bw=%gmbit" % (rtt, 0.2 * rtt, bw)
    return s + (",medium=shared,relay=ap,frame=0.2ms" if medium == "shared"
                else ",medium=switched")


def simulate(sim, shape, qtype, devices, link, args, tokens):
    cmd = [sim, "--shape", shape, "--quantize", qtype, "--devices", devices, "--links", link,
           "--tokens", str(tokens), "--seed", "1"] + args
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit %d" % p.returncode
        if "fits" in msg or "memory" in msg or "budget" in msg:
            return None, "no-fit"
        sys.exit("bench/breakeven.py: %s failed: %s" % (" ".join(cmd), msg))
    j = json.loads(p.stdout)
    if j.get("status") != "ok":
        return None, j.get("status", "failed")
    return j["ms_per_token_median"], "ok"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--speed", type=float, default=4.8)
    ap.add_argument("--speed-q", type=float, default=None)
    ap.add_argument("--mem-mb", type=float, default=3500)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--shapes", default=" ".join(SHAPES))
    ap.add_argument("--types", default=" ".join(TYPES))
    ap.add_argument("--rtts", default=" ".join(str(r) for r in RTTS))
    ap.add_argument("--bws", default=" ".join(str(b) for b in BWS))
    a = ap.parse_args()
    shapes, types = a.shapes.split(), a.types.split()
    rtts = [float(x) for x in a.rtts.split()]
    bws = [float(x) for x in a.bws.split()]
    os.makedirs(a.out, exist_ok=True)
    speed_q = a.speed_q if a.speed_q else a.speed
    devs = {}
    for q in types:
        sp = a.speed if q in ("f32",) else speed_q
        for n in (1, 4):
            path = os.path.join(a.out, "devices-%s-%d.json" % (q, n))
            devices_file(path, n, sp, a.mem_mb)
            devs[(q, n)] = path
    rows, cells = [], []
    for shape in shapes:
        for q in types:
            for medium in MEDIA:
                for rtt in rtts:
                    for bw in bws:
                        link = link_spec(medium, rtt, bw)
                        t = {}
                        for name, args, n in PLANS:
                            ms, st = simulate(a.sim, shape, q, devs[(q, n)], link, args,
                                              a.tokens)
                            t[name] = ms
                            rows.append((shape, q, medium, rtt, bw, name,
                                         "%.3f" % ms if ms else "-", st))
                        cells.append((shape, q, medium, rtt, bw, t))
                print("bench/breakeven.py: %s %s done" % (shape, q), file=sys.stderr)
    with open(os.path.join(a.out, "breakeven.tsv"), "w") as f:
        f.write("shape\ttype\tmedium\trtt_ms\tbw_mbit\tplan\tms_per_token\tstatus\n")
        for r in rows:
            f.write("\t".join(str(x) for x in r) + "\n")
    # per cell: the winner, the best layer-wise plan (one board or layer-dp) and the best of
    # head/slice against it (>1: heads or slices pay)
    with open(os.path.join(a.out, "cells.tsv"), "w") as f:
        f.write("shape\ttype\tmedium\trtt_ms\tbw_mbit\twinner\twinner_ms\tbest_layerwise\t"
                "best_layerwise_ms\tbest_split\tbest_split_ms\tsplit_over_layerwise\n")
        maps = {}
        for shape, q, medium, rtt, bw, t in cells:
            ok = {k: v for k, v in t.items() if v}
            if not ok:
                f.write("%s\t%s\t%s\t%g\t%g\t-\t-\t-\t-\t-\t-\t-\n" % (shape, q, medium, rtt, bw))
                maps.setdefault((shape, q, medium), []).append((rtt, bw, None, "-"))
                continue
            # the winner: the simplest plan within 2% of the fastest (one board, then
            # layer-wise, head, slice): a tie goes to the plan with less to go wrong
            fastest = min(ok.values())
            win = next(k for k in ("one", "layer", "head", "slice")
                       if k in ok and ok[k] <= 1.02 * fastest)
            lw = {k: ok[k] for k in ("one", "layer") if k in ok}
            sp = {k: ok[k] for k in ("head", "slice") if k in ok}
            blw = min(lw, key=lw.get) if lw else None
            bsp = min(sp, key=sp.get) if sp else None
            ratio = lw[blw] / sp[bsp] if blw and bsp else None
            f.write("%s\t%s\t%s\t%g\t%g\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\n" % (
                shape, q, medium, rtt, bw, win, ok[win], blw or "-",
                "%.3f" % lw[blw] if blw else "-", bsp or "-",
                "%.3f" % sp[bsp] if bsp else "-", "%.3f" % ratio if ratio else "-"))
            code = {"one": "1", "layer": "L", "head": "H", "slice": "S"}[win]
            maps.setdefault((shape, q, medium), []).append((rtt, bw, ratio, code))
    # gnuplot: one file per map, rows "ix iy log2(ratio) label" on the index grid
    lists = []
    for (shape, q, medium), pts in maps.items():
        name = "map_%s_%s_%s.dat" % (shape, q, medium)
        lists.append(name)
        with open(os.path.join(a.out, name), "w") as f:
            f.write("# %s %s %s: RTT index, bandwidth index, log2(best head/slice over best "
                    "layer-wise), label\n" % (shape, q, medium))
            for rtt, bw, ratio, code in pts:
                ix, iy = rtts.index(rtt), bws.index(bw)
                v = math.log2(ratio) if ratio else float("nan")
                lab = code if code in ("-",) else "%s%s" % (
                    code, "" if ratio is None else " %.2g" % ratio)
                f.write("%d %d %s \"%s\"\n" % (ix, iy, "NaN" if ratio is None else "%.4f" % v,
                                               lab))
    with open(os.path.join(a.out, "axes.gp"), "w") as f:
        f.write("rtts = \"%s\"\nbws = \"%s\"\nmaps = \"%s\"\n" % (
            " ".join("%g" % r for r in rtts), " ".join("%g" % b for b in bws),
            " ".join(sorted(lists))))


if __name__ == "__main__":
    main()
