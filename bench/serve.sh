#!/usr/bin/env bash
# bench/serve.sh: many conversations at once against the OpenAI-compatible server.  For each
# plan it starts `headsplit --serve` on NP ranks (on emulated boards with --device, over an
# emulated link with --link), then, for each number of clients N and each repeat, sends N
# streamed completions at the same moment with the official openai npm client
# (bench/serve_load.mjs: temperature 0, the same prompt, -n tokens each) and prints the
# aggregate generated tokens/s (all clients' tokens over the round's wall time), the time to
# first token and the inter-token latency (median and p90 over every client of every repeat)
# per N, the ratio of aggregate tokens/s to N = 1's, with the host's load and the revision.
# Rounds of all N interleave within each repeat.  The tables go to OUT/serve.md, the rounds to
# OUT/rounds.jsonl and a plot of aggregate tokens/s against N to OUT/serve.png (gnuplot).
#
#   bench/serve.sh [--model M.h5] [--np 5] [--plan "NAME=ARGS"]... [--clients "1 2 4 8"]
#                  [--repeats 3] [-n 32] [--prompt TEXT] [--device pi4|none]
#                  [--link wifi|ethernet|none|SPEC] [--ctx-size 1024] [--out DIR]
#   --plan NAME=ARGS  a server configuration (repeatable; default: layer=--partition layer
#                     and auto=--partition auto); ARGS are headsplit options
#   --device pi4      every rank under scripts/emulate-device pi4 (dilated unless
#                     HEADSPLIT_EMU_MODE is set)
# Needs tests/node's packages (scripts/install-deps.sh: npm ci) and node.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$SRC/build}
model=$SRC/weights/austen-llama.h5 np=5 clients="1 2 4 8" repeats=3 steps=32
prompt="It is a truth universally acknowledged" device=none link=none ctx=1024 outdir=""
plans=()
die() { echo "bench/serve.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --plan) plans+=("$2"); shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    -n|--steps) steps=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --link) link=$2; shift 2 ;;
    --ctx-size) ctx=$2; shift 2 ;;
    --out) outdir=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ ${#plans[@]} -gt 0 ] || plans=("layer=--partition layer" "auto=--partition auto")
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats $repeats: must be a positive integer"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "-n $steps: must be a positive integer"
[[ $np =~ ^[1-9][0-9]*$ ]] || die "--np $np: must be a positive integer"
for n in $clients; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "--clients: '$n' is not a positive integer"; done
for p in "${plans[@]}"; do [[ $p == *=* ]] || die "--plan '$p': expected NAME=ARGS"; done
[ -f "$model" ] || die "--model $model: no such file"
[ -x "$BUILD/headsplit" ] || die "$BUILD/headsplit not built (scripts/build.sh)"
OPENAI=$SRC/tests/node/node_modules/openai/index.mjs
[ -f "$OPENAI" ] || die "no $OPENAI: run scripts/install-deps.sh (npm ci in tests/node)"
command -v node > /dev/null || die "node not found"
. "$SRC/scripts/mpi-env.sh"
wrap=()
if [ "$device" != none ]; then
  "$SRC/scripts/emulate-device" --check "$device" > /dev/null || die "--device $device: emulate-device --check failed"
  wrap=("$SRC/scripts/emulate-device" "$device")
  export HEADSPLIT_EMU_MODE=${HEADSPLIT_EMU_MODE:-dilate}
fi
linkargs=()
[ "$link" = none ] || linkargs=(--emulate-link "$link")
if [ -n "$outdir" ]; then mkdir -p "$outdir"; out=$outdir; else out=$(mktemp -d); fi
rev=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$SRC" status --porcelain --untracked-files=no 2>/dev/null)" ] || rev="$rev+changes"
header="revision $rev (binary: $("$BUILD/headsplit" --version 2>/dev/null | head -1)); $(getconf _NPROCESSORS_ONLN) cores; $(lscpu | sed -n 's/^Model name: *//p' | head -1); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$header"
echo "model $(basename "$model"), $np ranks, device $device, link $link, clients: $clients, $repeats repeats, $steps tokens each"
: > "$out/rounds.jsonl"
SERVER=
cleanup() { [ -z "$SERVER" ] || { kill -TERM "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; }; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for p in "${plans[@]}"; do
  name=${p%%=*}
  read -r -a args <<< "${p#*=}"
  port=$(free_port)
  url=http://127.0.0.1:$port
  log=$out/server-$name.log
  # shellcheck disable=SC2086
  mpirun $MPI_FLAGS -np "$np" "${wrap[@]}" "$BUILD/headsplit" --model "$model" --ctx-size "$ctx" \
    "${linkargs[@]}" "${args[@]}" --serve 127.0.0.1:$port > "$log" 2>&1 &
  SERVER=$!
  ok=0
  for _ in $(seq 1800); do # loading on emulated boards takes minutes for a large model
    if curl -sf "$url/health" > /dev/null 2>&1; then ok=1; break; fi
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.5
  done
  [ $ok = 1 ] || { tail -20 "$log" >&2; die "plan $name: the server did not come up (log above)"; }
  node "$SRC/bench/serve_load.mjs" "$OPENAI" "$url" 1 2 "$prompt" > /dev/null # warm-up
  for rep in $(seq "$repeats"); do
    for n in $clients; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$(timeout 3600 node "$SRC/bench/serve_load.mjs" "$OPENAI" "$url" "$n" "$steps" "$prompt") ||
        { tail -20 "$log" >&2; die "plan $name: $n clients: the client failed"; }
      printf '{"plan":"%s","repeat":%d,"load":%s,"round":%s}\n' "$name" "$rep" "$load" "$line" >> "$out/rounds.jsonl"
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("  %-8s repeat %d  %2d clients  %6.2f tok/s  wall %6.2f s  load %s" % (sys.argv[2], int(sys.argv[3]), r["clients"], r["aggregate_tokens_per_s"], r["wall_s"], sys.argv[4]))' \
        "$line" "$name" "$rep" "$load"
    done
  done
  kill -TERM "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  SERVER=
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$SRC/bench/serve_report.py" "$out" "$header" | tee "$out/serve.md"
if command -v gnuplot > /dev/null; then
  gnuplot -e "dir='$out'" "$SRC/bench/serve.gp" 2> "$out/gnuplot.log" &&
    echo "plot: $out/serve.png" || echo "bench/serve.sh: gnuplot failed ($out/gnuplot.log)" >&2
fi
echo "rounds: $out/rounds.jsonl"
