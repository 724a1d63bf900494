#!/usr/bin/env python3
"""bench/meta.py OUT: merges the run's description (the HS_META_* environment variables that
bench/run.sh sets) into OUT/meta.json.  Called by hs_write_meta in bench/lib.sh."""
import json, os, sys
if len(sys.argv) != 2:
    print("usage: bench/meta.py OUT", file=sys.stderr)
    sys.exit(2)
out = sys.argv[1]
meta = {k[8:].lower(): v for k, v in os.environ.items() if k.startswith("HS_META_")}
for k in ("repeats", "n_runs", "n_unique"):
    if k in meta:
        try: meta[k] = int(meta[k])
        except ValueError: pass
for k in ("notes",):
    if k in meta:
        meta[k] = [l for l in meta[k].split("\n") if l.strip()]
path = os.path.join(out, "meta.json")
old = {}
if os.path.exists(path):
    try: old = json.load(open(path))
    except Exception: old = {}
old.update(meta)
json.dump(old, open(path, "w"), indent=1, sort_keys=True)
