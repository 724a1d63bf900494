#!/usr/bin/env bash
# multipos.sh: several positions per pass (issue 17) on the emulated testbed: five ranks
# (controller + 4 workers) in scripts/emulate-device pi4 (compute dilation), messages over
# --emulate-link wifi (10 ms RTT, one shared channel), layer-wise unless said otherwise.
#
#   prompt  the network-bound trained model (TARGET): prompt processing time against prompt
#           length (8..128 tokens) with --batch B (default 64) and with --batch 1, each
#           against the median generated-token time of the same repeat; the issue's bound:
#           a 128-token prompt plus one new token within 5 generated-token times.
#   pi4     compute-bound TinyLlama shapes (TINYLLAMA, a headsplit-convert --synthetic file):
#           prompt tokens/s against generated tokens/s for layer-wise and slice.
#   draft   speculative decoding with the trained pair (TARGET, DRAFT) at temperature 0:
#           no draft, then --draft-tokens K for K = 1..8 and auto; tokens/s, acceptance,
#           tokens per pass, bytes and hops per generated token; every run's tokens are
#           compared with the no-draft run's.
#
# Repeats are interleaved (every configuration once per round); the 1-minute load average
# is recorded at the start of every run.  Results: OUT/runs.tsv, OUT/runs/*.json and
# OUT/summary.md (bench/multipos.py).
#
#   bench/multipos.sh [--parts prompt,pi4,draft] [--reps N] [--out DIR] [--batch B]
#                     [--target FILE] [--draft FILE] [--tinyllama FILE] [--device P|none]
#                     [--link SPEC] [--gen N] [--args "FLAGS"] [--dry-run]
#   --args: more headsplit flags for every run (e.g. "--ubatch 32", "--wire q8 --exchange
#   rsag"), so that prompt and generation are measured with the same ones.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PARTS=prompt,pi4,draft REPS=3 OUT='' BATCH=64 DEVICE=pi4 LINK=wifi GEN=64 DRY=0 EXTRA=''
TARGET=${TARGET:-}
DRAFT=${DRAFT:-weights/austen-llama-draft.h5}
TINYLLAMA=${TINYLLAMA:-/tmp/parity/tl/tinyllama-q4_0.h5}
BUILD=${BUILD_DIR:-build}
die() { echo "multipos.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --parts) PARTS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --tinyllama) TINYLLAMA=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --link) LINK=$2; shift 2 ;;
    --gen) GEN=$2; shift 2 ;;
    --args) EXTRA=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps: a positive integer, not '$REPS'"
if [ -z "$TARGET" ]; then # the largest trained model in weights/ besides the draft
  TARGET=$(ls -S weights/austen-llama-*.h5 2>/dev/null | head -1 || true)
fi
[[ ,$PARTS, == *,prompt,* || ,$PARTS, == *,draft,* ]] && { [ -f "$TARGET" ] || die "target model '$TARGET' not found (--target)"; }
[[ ,$PARTS, == *,draft,* ]] && { [ -f "$DRAFT" ] || die "draft model '$DRAFT' not found (--draft)"; }
[[ ,$PARTS, == *,pi4,* ]] && { [ -f "$TINYLLAMA" ] || die "TinyLlama-shaped model '$TINYLLAMA' not found (--tinyllama; bench/quant.sh writes them)"; }
OUT=${OUT:-out/multipos-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$OUT/runs"
. scripts/mpi-env.sh
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HEADSPLIT_EMU_MODE=${HEADSPLIT_EMU_MODE:-dilate}
WRAP=()
[ "$DEVICE" != none ] && WRAP=(scripts/emulate-device "$DEVICE")
BIN=$BUILD/headsplit
[ "$DRY" = 1 ] || cmake --build "$BUILD" --target headsplit headsplit-tokenize >/dev/null

# A prompt of exactly N tokens of the target's tokenizer (BOS included): the longest prefix
# of weights/heldout.txt that encodes to N ids.
prompt_of() {
  python3 - "$1" "$2" "$BUILD/headsplit-tokenize" <<'EOF'
import json, subprocess, sys
n, model, tok = int(sys.argv[1]), sys.argv[2], sys.argv[3]
text = open("weights/heldout.txt", encoding="utf-8").read()[:20000]
def count(k):
    out = subprocess.run([tok, "--model", model, text[:k]], capture_output=True, text=True,
                         check=True).stdout
    return len(json.loads(out))
lo, hi = 1, len(text)
while lo < hi:  # the longest prefix with at most n ids
    mid = (lo + hi + 1) // 2
    if count(mid) <= n:
        lo = mid
    else:
        hi = mid - 1
sys.stdout.write(text[:lo])
EOF
}

declare -a PLAN=()
PLENS="8 32 64 128"
if [[ ,$PARTS, == *,prompt,* ]]; then
  for p in $PLENS; do PLAN+=("prompt|$p|$BATCH|layer") ; done
  PLAN+=("prompt|128|1|layer" "prompt-gen|8|$BATCH|layer")
fi
if [[ ,$PARTS, == *,pi4,* ]]; then
  for part in layer slice; do PLAN+=("pi4|64|$BATCH|$part" "pi4|64|1|$part"); done
fi
if [[ ,$PARTS, == *,draft,* ]]; then
  for k in 0 1 2 3 4 5 6 7 8 auto; do PLAN+=("draft|$k|$BATCH|layer"); done
fi
declare -A PROMPTS
printf 'part\tconfig\tbatch\tpartition\trep\tload1\tstatus\tmetrics\n' >"$OUT/runs.tsv"
cat >"$OUT/meta.json" <<EOF
{"target": "$TARGET", "draft": "$DRAFT", "tinyllama": "$TINYLLAMA", "device": "$DEVICE",
 "link": "$LINK", "batch": $BATCH, "reps": $REPS, "gen": $GEN, "args": "$EXTRA",
 "host": "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(getconf _NPROCESSORS_ONLN) cores",
 "revision": "$(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty)",
 "started": "$(date -u +%FT%TZ)"}
EOF
n=0
total=$((${#PLAN[@]} * REPS))
for ((rep = 1; rep <= REPS; rep++)); do
  for line in "${PLAN[@]}"; do
    IFS='|' read -r part cfg batch partition <<<"$line"
    n=$((n + 1))
    model=$TARGET
    [ "$part" = pi4 ] && model=$TINYLLAMA
    args=(--model "$model" --partition "$partition" --placement "$([ "$partition" = slice ] && echo greedy || echo layer)"
          --batch "$batch" --temperature 0 --quiet --timeout 300 --emulate-link "$LINK")
    # shellcheck disable=SC2206
    [ -n "$EXTRA" ] && args+=($EXTRA)
    case $part in
      prompt) plen=$cfg; args+=(-n 1) ;;
      prompt-gen) plen=$cfg; args+=(-n "$GEN") ;;
      pi4) plen=$cfg; args+=(-n 8) ;;
      draft) plen=32; args+=(-n "$GEN"); [ "$cfg" != 0 ] && args+=(--draft "$DRAFT" --draft-tokens "$cfg") ;;
    esac
    key="$model:$plen"
    if [ -z "${PROMPTS[$key]:-}" ]; then
      if [ "$DRY" = 1 ]; then PROMPTS[$key]="(a $plen-token prompt)"; else PROMPTS[$key]=$(prompt_of "$plen" "$model"); fi
    fi
    args+=(--prompt "${PROMPTS[$key]}")
    tag="${part}_${cfg}_b${batch}_${partition}.r$rep"
    args+=(--metrics "$OUT/runs/$tag.json")
    cmd=(mpirun $MPI_FLAGS -np 5 "${WRAP[@]}" "$BIN" "${args[@]}")
    if [ "$DRY" = 1 ]; then printf '[%d/%d]' "$n" "$total"; printf ' %q' "${cmd[@]}"; echo; continue; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    printf '[%d/%d] %s %s batch %s %s rep %d, load %s ... ' "$n" "$total" "$part" "$cfg" "$batch" "$partition" "$rep" "$load" >&2
    t0=$(date +%s.%N)
    if "${cmd[@]}" >"$OUT/runs/$tag.out" 2>"$OUT/runs/$tag.err"; then st=ok; else st=failed; fi
    printf '%s (%.1f s)\n' "$st" "$(echo "$(date +%s.%N) - $t0" | bc)" >&2
    printf '%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n' "$part" "$cfg" "$batch" "$partition" "$rep" "$load" "$st" "runs/$tag.json" >>"$OUT/runs.tsv"
  done
done
[ "$DRY" = 1 ] && exit 0
python3 bench/multipos.py "$OUT" | tee "$OUT/summary.md"
