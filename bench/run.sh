#!/usr/bin/env bash
# bench/run.sh: the HeadSplit benchmark matrix on the emulated 4-worker edge testbed (or on a
# cluster allocation with srun), in one run, all configurations interleaved.  See bench/README.md.
#
#   bench/run.sh [--quick|--full] [--launcher mpirun|srun] [--out DIR] [--tokens N]
#                [--batch B] [--prompt TEXT] [--repeats K] [--models LIST] [--media LIST]
#                [--rtts LIST] [--tolerances LIST] [--max-load L] [--dry-run]
#
# Every run decodes --tokens new tokens after the prompt (`-n N`, the prompt's pass(es) of
# --batch positions first): s/token is the median of the decode positions alone (the
# engine's `decode_ms_per_token`), tok/s its `gen_tokens_per_s`; a run that generates fewer
# tokens than asked is a failure ("short").  Each model also runs once per repeat as a single
# process (`single`: -np 1, on the host, outside the device emulation): the reference of the
# "exact" and "same tokens" columns.
#
# Options:
#   --quick            (default) 32 new tokens per run, 3 repeats, RTT sweep on gpt2-small only (0,10,20,30 ms), tolerance
#                      sweep on stories260K and trained models: ~75 minutes on 2 cores
#   --full             256 new tokens per run, 3 repeats, RTT sweep 0,2,5,10,20,30 ms and tolerance
#                      sweep on every model: 6-8 hours on a 2-core machine (the estimate
#                      for the plan at hand is printed before the first run)
#   --launcher L       mpirun (default) or srun (inside a Slurm allocation)
#   --device P|none    wrap each rank in scripts/emulate-device P (default pi4 with mpirun,
#                      none with srun unless --emulate)
#   --device-model M   dilate (default) or quota: how emulate-device slows a rank (see
#                      docs/testbed.md; dilate keeps ranks that compute at once from
#                      competing for the host's cores)
#   --link SPEC|none   --emulate-link of the base configuration (default wifi: 10 ms RTT,
#                      2 ms jitter, 200 Mbit/s, one shared channel through an access point,
#                      with mpirun; none with srun unless --emulate)
#   --media LIST       run the whole matrix on each medium of the link: shared (through an
#                      access point: medium=shared,relay=ap) and/or switched
#                      (medium=switched,relay=none); rows are labelled model@medium; the RTT
#                      sweep runs on the first (default: the link as given)
#   --emulate          with srun: emulate the testbed anyway (device pi4, the default link)
#   --ranks N          MPI ranks: the controller + N-1 workers (default 5; srun: $SLURM_NTASKS)
#   --build DIR        where headsplit and headsplit-convert are (default build)
#   --out DIR          results (default out/bench-YYYYmmdd-HHMMSS)
#   --tokens N         new tokens per run (the prompt not counted; -n N) for every model, or
#                      per model (tinyllama=32,gpt2-small=64; the others keep the mode's
#                      default); the KV cache holds the prompt and them (--ctx-size)
#   --batch B          prompt positions per pass, passed as --batch B (default 64, the
#                      engine's default, explicit)
#   --prompt TEXT      the prompt of every run (default "Once upon a time")
#   --repeats K        repeats of the whole interleaved matrix
#   --models LIST      comma-separated: tinyllama, gpt2-small, stories260K, tiny or FILE.h5
#                      (default tinyllama,gpt2-small,stories260K).  The synthetic models
#                      carry a real tokenizer: Llama 2's (../shared/models/llama2-tokenizer)
#                      for tinyllama and tiny (a 4-layer dim-128 Llama of the same
#                      vocabulary, for tests), GPT-2's (../shared/models/gpt2-tiny-random)
#                      for gpt2-small; without it, a synthetic one (with a note)
#   --configs LIST     subset of layer (naive: N stages, --placement layer), layer/dp (the
#                      best layer-wise plan over subsets of the boards, --placement dp),
#                      head (= head/greedy), head/greedy, head/seed (the
#                      reference design: --placement spread), head/seed+spec,
#                      head+spec/random, head+spec/roundrobin, head+spec/greedy, slice,
#                      slice/f16 (--wire f16), slice/q8 (--wire q8: Q8_0 blocks),
#                      slice/lm-ctl (the LM head on the controller),
#                      auto (default: all the engine supports)
#   --rtts LIST        RTT sweep in ms (quick 0,10,20,30; full 0,2,5,10,20,30; "none": off)
#   --rtt-models LIST  models of the RTT sweep (quick gpt2-small; full: all of --models)
#   --tolerances LIST  tolerance sweep of heads + speculation (0.02,0.05,0.10; "none": off)
#   --tol-models LIST  models of the tolerance sweep (quick: stories260K and the trained
#                      weights/*.h5; full: those and the synthetic models)
#   --model-dir DIR    where converted models are kept and reused (default out/models)
#   --timeout S        per-run wall-clock limit (default: 4x the estimate, at least 300 s)
#   --max-load L       a run starts only when the host's 1-minute load average is below L
#                      (default 3; 0: no gate), recorded per run with the time waited
#   --load-wait S      the longest wait for that, per run (default 600 s; then it runs and
#                      the run is marked as started above the threshold)
#   --deadline TIME    start no run after TIME (anything `date -d` reads, e.g. 16:55); the
#                      runs done are aggregated as usual and the page says how many were left
#   --report           run bench/report.sh afterwards (rewrites docs/results.md)
#   --dry-run          print the plan, the commands and the time estimate; run nothing
#   -h, --help
#
# Exit status: 0 when every run completed, 1 when some failed (the rest are still reported),
# 2 on a usage or set-up error.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
. "$ROOT/bench/lib.sh"
ARGV=("$@")

die() { echo "bench: $*" >&2; exit 2; }

DEVICE_MODEL=dilate
MODE=quick LAUNCHER=mpirun DEVICE='' LINK='' EMULATE=0 RANKS='' BUILD=build OUT='' TOKENS='' REPEATS=''
BATCH=64 PROMPT="Once upon a time"
MODELS=tinyllama,gpt2-small,stories260K CONFIGS='' RTTS='' RTT_MODELS='' TOLS='' TOL_MODELS=''
MODEL_DIR=out/models TIMEOUT='' REPORT=0 DRY=0 MEDIA=- MAX_LOAD=3 LOAD_WAIT=600 DEADLINE=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) MODE=quick; shift ;;
    --full) MODE=full; shift ;;
    --launcher) LAUNCHER=${2:?}; shift 2 ;;
    --device) DEVICE=${2:?}; shift 2 ;;
    --device-model) DEVICE_MODEL=${2:?}; shift 2 ;;
    --link) LINK=${2:?}; shift 2 ;;
    --emulate) EMULATE=1; shift ;;
    --ranks) RANKS=${2:?}; shift 2 ;;
    --build) BUILD=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --tokens) TOKENS=${2:?}; shift 2 ;;
    --batch) BATCH=${2:?}; shift 2 ;;
    --prompt) PROMPT=${2?}; shift 2 ;;
    --repeats) REPEATS=${2:?}; shift 2 ;;
    --models) MODELS=${2:?}; shift 2 ;;
    --configs) CONFIGS=${2:?}; shift 2 ;;
    --rtts) RTTS=${2:?}; shift 2 ;;
    --media) MEDIA=${2:?}; shift 2 ;;
    --max-load) MAX_LOAD=${2:?}; shift 2 ;;
    --load-wait) LOAD_WAIT=${2:?}; shift 2 ;;
    --deadline) DEADLINE=$(date -d "${2:?}" +%s) || die "--deadline: cannot read '$2'"; shift 2 ;;
    --rtt-models) RTT_MODELS=${2:?}; shift 2 ;;
    --tolerances) TOLS=${2:?}; shift 2 ;;
    --tol-models) TOL_MODELS=${2:?}; shift 2 ;;
    --model-dir) MODEL_DIR=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    --report) REPORT=1; shift ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
case $LAUNCHER in mpirun|srun) ;; *) die "--launcher must be mpirun or srun" ;; esac
case $DEVICE_MODEL in dilate|quota) ;; *) die "--device-model must be dilate or quota" ;; esac
case $MODE in
  quick) : "${REPEATS:=3}" "${RTTS:=0,10,20,30}" "${TOLS:=0.02,0.05,0.10}" ;;
  full) : "${REPEATS:=3}" "${RTTS:=0,2,5,10,20,30}" "${TOLS:=0.02,0.05,0.10}" ;;
esac
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || die "--repeats must be a positive integer"
[ -z "$TOKENS" ] || [[ $TOKENS =~ ^[1-9][0-9]*$ ]] || [[ $TOKENS =~ ^([^=,]+=[1-9][0-9]*,?)+$ ]] ||
  die "--tokens must be a positive integer or MODEL=N,..."
[[ $BATCH =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer"
[ -n "$PROMPT" ] || die "--prompt must not be empty (the runs compare their tokens after it)"
[[ $MAX_LOAD =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--max-load must be a number"
[[ $LOAD_WAIT =~ ^[0-9]+$ ]] || die "--load-wait must be whole seconds"
for md in ${MEDIA//,/ }; do
  case $md in shared|switched|-) ;; *) die "--media: '$md' is not shared or switched" ;; esac
done
MEDIA_LIST=(${MEDIA//,/ })
TESTBED_LINK=wifi
if [ "$LAUNCHER" = mpirun ] || [ "$EMULATE" = 1 ]; then
  : "${DEVICE:=pi4}" "${LINK:=$TESTBED_LINK}"
else
  : "${DEVICE:=none}" "${LINK:=none}"
fi
if [ -z "$RANKS" ]; then
  if [ "$LAUNCHER" = srun ]; then RANKS=${SLURM_NTASKS:-5}; else RANKS=5; fi
fi
[ -n "$OUT" ] || OUT=out/bench-$(date +%Y%m%d-%H%M%S)
SPEC_TOL=0.05          # tolerance of the main matrix's heads + speculation
SHARED=${HEADSPLIT_SHARED:-$ROOT/../shared/models}

# ---- the engine --------------------------------------------------------------------------
[ -x "$BUILD/headsplit" ] || die "$BUILD/headsplit missing: build first (cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release && cmake --build $BUILD)"
HELP=$("$BUILD/headsplit" --help 2>&1)
HAVE_AUTO=0 HAVE_SLICE=0
grep -qE -- '--partition [a-z|]*auto' <<<"$HELP" && HAVE_AUTO=1
grep -qE -- '--partition [a-z|]*slice' <<<"$HELP" && HAVE_SLICE=1
HAVE_WIRE=0 HAVE_Q8=0
grep -qE -- '--wire f32\|f16' <<<"$HELP" && HAVE_WIRE=1
grep -qE -- '--wire f32\|f16\|q8' <<<"$HELP" && HAVE_Q8=1
HAVE_LMHEAD=0
grep -qE -- '--lm-head split\|controller' <<<"$HELP" && HAVE_LMHEAD=1
NOTES=""
note() { NOTES+="$*"$'\n'; echo "bench: note: $*" >&2; }

# name -> partition placement speculate
cfg_def() {
  case $1 in
    single) echo "single - none" ;;
    layer) echo "layer layer none" ;;
    layer/dp) echo "layer dp none" ;;
    head|head/greedy) echo "head greedy none" ;;
    head/seed) echo "head spread none" ;;
    head/seed+spec) echo "head spread all" ;;
    head+spec/random) echo "head random all" ;;
    head+spec/roundrobin) echo "head roundrobin all" ;;
    head+spec/greedy) echo "head greedy all" ;;
    slice) echo "slice greedy none" ;;
    slice/f16) echo "slice greedy none f16" ;;
    slice/q8) echo "slice greedy none q8" ;;
    slice/lm-ctl) echo "slice greedy none f32 controller" ;;
    auto) echo "auto greedy none" ;;
    *) return 1 ;;
  esac
}
HAVE_DP=0
grep -qE -- '--placement [a-z|]*\|dp' <<<"$HELP" && HAVE_DP=1
ALL_CONFIGS="layer"
[ "$HAVE_DP" = 1 ] && ALL_CONFIGS+=" layer/dp" || note "the engine has no --placement dp: layer/dp skipped"
ALL_CONFIGS+=" head/greedy head/seed head/seed+spec head+spec/random head+spec/roundrobin head+spec/greedy"
[ "$HAVE_SLICE" = 1 ] && ALL_CONFIGS+=" slice" || note "the engine has no --partition slice: slice skipped"
[ "$HAVE_SLICE$HAVE_WIRE" = 11 ] && ALL_CONFIGS+=" slice/f16"
[ "$HAVE_SLICE$HAVE_Q8" = 11 ] && ALL_CONFIGS+=" slice/q8"
[ "$HAVE_SLICE$HAVE_LMHEAD" = 11 ] && ALL_CONFIGS+=" slice/lm-ctl"
[ "$HAVE_AUTO" = 1 ] && ALL_CONFIGS+=" auto" || note "the engine has no --partition auto: auto skipped"
if [ -n "$CONFIGS" ]; then
  SEL=""
  for c in ${CONFIGS//,/ }; do
    cfg_def "$c" >/dev/null || die "unknown configuration '$c'"
    [ "$c" = single ] && continue  # always run: the reference
    [[ " $ALL_CONFIGS " == *" $c "* ]] || { note "configuration $c not supported by this engine: skipped"; continue; }
    SEL+=" $c"
  done
  CONFIGS=${SEL# }
else
  CONFIGS=$ALL_CONFIGS
fi
[[ " $CONFIGS " == *" layer "* ]] || note "layer-wise is not in --configs: no speedups"
SWEEP_CONFIGS=""
for c in layer layer/dp head head/greedy slice auto; do [[ " $CONFIGS " == *" $c "* ]] && SWEEP_CONFIGS+=" $c"; done

# ---- the link --------------------------------------------------------------------------
BASE_RTT=none JIT_RATIO=0.2
case ${LINK%%,*} in  # a preset first: its RTT and jitter unless the spec overrides them
  wifi) [[ $LINK == *rtt=* ]] || LINK+=",rtt=10ms"; [[ $LINK == *jitter=* ]] || LINK+=",jitter=2ms" ;;
  ethernet) [[ $LINK == *rtt=* ]] || LINK+=",rtt=0.2ms"; [[ $LINK == *jitter=* ]] || LINK+=",jitter=0ms" ;;
esac
if [ "$LINK" != none ]; then
  BASE_RTT=$(sed -n 's/.*rtt=\([0-9.]*\)ms.*/\1/p; s/.*rtt=\([0-9.]*\)$/\1/p; s/.*rtt=\([0-9.]*\),.*/\1/p' <<<"$LINK" | head -1)
  [ -n "$BASE_RTT" ] || die "cannot read rtt= from --link '$LINK'"
  bj=$(sed -n 's/.*jitter=\([0-9.]*\)\(ms\)\{0,1\}\(,.*\)\{0,1\}$/\1/p' <<<"$LINK")
  if [ -n "$bj" ] && awk -v r="$BASE_RTT" 'BEGIN{exit !(r>0)}'; then
    JIT_RATIO=$(awk -v j="$bj" -v r="$BASE_RTT" 'BEGIN{printf "%.4g", j/r}')
  fi
fi
# link_for RTT: the base link with this RTT, jitter scaled in proportion (10 ms/2 ms -> 20%).
# With a medium (second argument), the link on that medium.
link_for() {
  local r=$1 md=${2:--} j l
  [ "$LINK" = none ] && { echo none; return; }
  j=$(awk -v r="$r" -v k="$JIT_RATIO" 'BEGIN{printf "%.3g", r*k}')
  l=$(sed -E "s/rtt=[0-9.]+(ms)?/rtt=${r}ms/; s/jitter=[0-9.]+(ms)?/jitter=${j}ms/" <<<"$LINK")
  case $md in
    shared) l+=",medium=shared,relay=ap" ;;
    switched) l+=",medium=switched,relay=none" ;;
  esac
  echo "$l"
}
# The label of a model's rows: its name, and the medium when there are several.
label_of() { if [ "${2:--}" = - ]; then short_name "$1"; else echo "$(short_name "$1")@$2"; fi; }
if [ "$RTTS" != none ] && [ "$LINK" = none ]; then
  note "RTT sweep skipped: it needs --link emulation (the real network's RTT is what it is)"
  RTTS=none
fi

# ---- models ------------------------------------------------------------------------------
mkdir_p() { [ "$DRY" = 1 ] || mkdir -p "$@"; }
mkdir_p "$MODEL_DIR"
# model_path NAME: prints the model file, converting it when absent (empty + a note: skipped).
declare -A MPATH MSYN MLAYERS MBYTES MNP
is_synthetic() {
  local src
  src=$(hs_h5attr "$1" source)
  if [ -n "$src" ]; then [[ $src == SYNTHETIC* ]]; else [[ $(basename "$1") == *synth* ]]; fi
}
convert() {  # convert OUT ARGS...: runs headsplit-convert unless --dry-run
  local out=$1; shift
  if [ "$DRY" = 1 ]; then echo "(dry run: would run $BUILD/headsplit-convert $* --out $out)" >&2; return 0; fi
  [ -x "$BUILD/headsplit-convert" ] || die "$BUILD/headsplit-convert missing"
  echo "bench: writing $out ($BUILD/headsplit-convert $*)" >&2
  "$BUILD/headsplit-convert" "$@" --out "$out" >&2 || die "headsplit-convert failed for $out"
}
LLAMA_TOK=$SHARED/llama2-tokenizer/tokenizer.bin GPT2_TOK=$SHARED/gpt2-tiny-random
# has_real_tokenizer FILE: the synthetic model FILE was written with --tokenizer (its source
# attribute names it), or is not synthetic.
has_real_tokenizer() {
  local src
  src=$(hs_h5attr "$1" source)
  [[ $src != SYNTHETIC* ]] || [[ $src == *", tokenizer "* ]]
}
# synth_model FILE TOKENIZER ARGS...: FILE from headsplit-convert --synthetic ARGS with the
# real TOKENIZER where it exists; a FILE written without it is rewritten when it does.
synth_model() {
  local f=$1 tok=$2; shift 2
  if [ -e "$f" ] && [ -e "$tok" ] && ! has_real_tokenizer "$f"; then
    echo "bench: $f has a synthetic tokenizer: rewriting it with $tok" >&2
    [ "$DRY" = 1 ] || rm -f "$f"
  fi
  [ -e "$f" ] && return 0
  if [ -e "$tok" ]; then convert "$f" --synthetic "$@" --tokenizer "$tok"
  else
    note "$(basename "$f"): $tok is absent: synthetic tokenizer (a prompt of bytes)"
    convert "$f" --synthetic "$@"
  fi
}
resolve_model() {
  local name=$1 f src
  case $name in
    tinyllama|tinyllama-1.1b)
      f=$MODEL_DIR/tinyllama.h5
      if [ -L "$f" ] && [ ! -e "$f" ]; then  # a link to a model that is gone (/tmp cleaned)
        echo "bench: removing the dangling link $f" >&2
        [ "$DRY" = 1 ] || rm -f "$f"
      fi
      if [ ! -e "$f" ]; then
        for src in weights/tinyllama-1.1b-synthetic.h5 /tmp/tinyllama-synth.h5; do
          if [ -f "$src" ] && [[ $(hs_h5attr "$src" source) == *"--synthetic tinyllama-1.1b --seed 1 "* ]] &&
             { [ ! -e "$LLAMA_TOK" ] || has_real_tokenizer "$src"; }; then
            echo "bench: reusing $src for $f (same synthetic model, seed 1)" >&2
            [ "$DRY" = 1 ] || ln -s "$(cd "$(dirname "$src")" && pwd)/$(basename "$src")" "$f"
            break
          fi
        done
      fi
      if [ -L "$f" ] && [ -e "$LLAMA_TOK" ] && ! has_real_tokenizer "$f"; then
        echo "bench: $f links to a model with a synthetic tokenizer: writing one with $LLAMA_TOK" >&2
        [ "$DRY" = 1 ] || rm -f "$f"
      fi
      [ -e "$f" ] || echo "bench: TinyLlama-1.1B-shaped synthetic model: 4.4 GB, about 100 s to write" >&2
      synth_model "$f" "$LLAMA_TOK" tinyllama-1.1b --seed 1 ;;
    gpt2-small|gpt2)
      f=$MODEL_DIR/gpt2-small.h5
      synth_model "$f" "$GPT2_TOK" gpt2-small --seed 1 ;;
    tiny)
      f=$MODEL_DIR/tiny.h5
      synth_model "$f" "$LLAMA_TOK" "llama:dim=128,layers=4,heads=4,kv_heads=2,ffn=352,vocab=32000,ctx=512,tied=0,rope=half" --seed 1 ;;
    stories260K|stories260k)
      f=$MODEL_DIR/stories260K.h5
      if [ ! -e "$f" ]; then
        if [ -f "$SHARED/stories260K/stories260K.bin" ]; then
          convert "$f" --format llama2c --checkpoint "$SHARED/stories260K/stories260K.bin" \
            --tokenizer "$SHARED/stories260K/tok512.bin"
        else
          note "stories260K skipped: $SHARED/stories260K/stories260K.bin is absent"
          return 1
        fi
      fi ;;
    *.h5)
      f=$name
      [ -f "$f" ] || { note "model $f skipped: no such file"; return 1; } ;;
    *) die "unknown model '$name' (tinyllama, gpt2-small, stories260K, tiny or a .h5 file)" ;;
  esac
  MPATH[$name]=$f
  if [ -e "$f" ]; then
    MLAYERS[$name]=$(hs_h5attr "$f" n_layers)
    MBYTES[$name]=$(stat -L -c %s "$f" 2>/dev/null || echo 0)
    if is_synthetic "$f"; then MSYN[$name]=1; else MSYN[$name]=0; fi
    # the prompt's tokens under the model's tokenizer: the KV cache holds them and the new ones
    MNP[$name]=$("$BUILD/headsplit-tokenize" --model "$f" "$PROMPT" 2>/dev/null | tr -cd ',0-9' | tr ',' '\n' | grep -c .)
    [ "${MNP[$name]:-0}" -gt 0 ] || die "headsplit-tokenize cannot encode the prompt for $f"
  else  # dry run, not converted yet
    MNP[$name]=16
    case $name in
      tinyllama*) MLAYERS[$name]=22 MBYTES[$name]=4400000000 MSYN[$name]=1 ;;
      gpt2*) MLAYERS[$name]=12 MBYTES[$name]=500000000 MSYN[$name]=1 ;;
      *) MLAYERS[$name]=5 MBYTES[$name]=1100000 MSYN[$name]=0 ;;
    esac
  fi
  return 0
}
short_name() { local b; b=$(basename "$1"); echo "${b%.h5}"; }

MODEL_LIST=()
for m in ${MODELS//,/ }; do resolve_model "$m" && MODEL_LIST+=("$m"); done
# Trained models in weights/ join the tolerance sweep (acceptance means something there).
TRAINED=()
for f in weights/*.h5; do
  [ -f "$f" ] || continue
  if ! is_synthetic "$f"; then TRAINED+=("$f"); fi
done
if [ -z "$RTT_MODELS" ]; then
  if [ "$MODE" = quick ]; then RTT_MODELS=gpt2-small; else RTT_MODELS=$(IFS=,; echo "${MODEL_LIST[*]}"); fi
fi
if [ -z "$TOL_MODELS" ]; then
  TOL_MODELS=""
  for m in "${MODEL_LIST[@]}"; do
    if [ "$MODE" = full ] || [ "${MSYN[$m]}" = 0 ]; then TOL_MODELS+=",$m"; fi
  done
  for f in "${TRAINED[@]}"; do TOL_MODELS+=",$f"; done
  TOL_MODELS=${TOL_MODELS#,}
  [ ${#TRAINED[@]} -gt 0 ] || note "no trained models in weights/*.h5: the tolerance sweep runs on stories260K only$([ "$MODE" = full ] && echo ' (and, for speed only, the synthetic models)')"
fi
SWEPT=""  # the sweeps' models, those of a sweep that runs
[ "$RTTS" = none ] || SWEPT+=" ${RTT_MODELS//,/ }"
[ "$TOLS" = none ] || SWEPT+=" ${TOL_MODELS//,/ }"
for m in $SWEPT; do
  [ -n "${MPATH[$m]:-}" ] || resolve_model "$m" || true
done
[ ${#MODEL_LIST[@]} -gt 0 ] || die "no model to run"

default_tokens() {  # new tokens per run
  if [[ $TOKENS == *=* ]]; then  # per model: tinyllama=32,gpt2-small=64
    local kv
    for kv in ${TOKENS//,/ }; do
      [ "${kv%%=*}" = "$1" ] || [ "${kv%%=*}" = "$(short_name "$1")" ] && { echo "${kv#*=}"; return; }
    done
  elif [ -n "$TOKENS" ]; then echo "$TOKENS"; return; fi
  if [ "$MODE" = full ]; then echo 256; else echo 32; fi
}

# ---- the plan ----------------------------------------------------------------------------
# One line per distinct run; a run that belongs to several tables (main, rtt, tol) runs once.
declare -A PIDX
PLAN=()  # "model|config|rtt|tol|medium|groups"
MD=${MEDIA_LIST[0]}  # the medium of the runs add_run adds; the sweeps run on the first
add_run() {  # add_run MODEL CONFIG RTT TOL GROUP
  local k="$1|$2|$3|$4|$MD"
  if [ -n "${PIDX[$k]:-}" ]; then
    local i=${PIDX[$k]} line=${PLAN[${PIDX[$k]}]}
    [[ ",${line##*|}," == *",$5,"* ]] || PLAN[i]="$line,$5"
  else
    PIDX[$k]=${#PLAN[@]}
    PLAN+=("$k|$5")
  fi
}
spec_cfgs() { for c in $CONFIGS; do [[ $c == head+spec* ]] && echo "$c"; done; }
tol_of() { [[ $1 == *spec* ]] && echo "$2" || echo -; }
in_list() { [[ ",$2," == *",$1,"* ]]; }
# add_ref MODEL GROUP: the single-process reference run (no link, no medium).
add_ref() { local md=$MD; MD=-; add_run "$1" single none - "$2"; MD=$md; }
for m in "${MODEL_LIST[@]}"; do
  add_ref "$m" main
  for MD in "${MEDIA_LIST[@]}"; do
    for c in $CONFIGS; do add_run "$m" "$c" "$BASE_RTT" "$(tol_of "$c" $SPEC_TOL)" main; done
  done
  MD=${MEDIA_LIST[0]}
  if [ "$RTTS" != none ] && in_list "$m" "$RTT_MODELS"; then
    for r in ${RTTS//,/ }; do
      for c in $SWEEP_CONFIGS; do add_run "$m" "$c" "$r" - rtt; done
    done
  fi
  if [ "$TOLS" != none ] && in_list "$m" "$TOL_MODELS" && [[ " $CONFIGS " == *" head+spec/greedy "* || -z "$(spec_cfgs)" ]]; then
    for t in ${TOLS//,/ }; do add_run "$m" head+spec/greedy "$BASE_RTT" "$t" tol; done
  fi
done
# Sweep models that are not in --models: their own references and the sweep.
for m in ${RTT_MODELS//,/ } ${TOL_MODELS//,/ }; do
  in_list "$m" "$(IFS=,; echo "${MODEL_LIST[*]}")" && continue
  [ -n "${MPATH[$m]:-}" ] || continue
  if [ "$RTTS" != none ] && in_list "$m" "$RTT_MODELS"; then
    add_ref "$m" ref
    for r in ${RTTS//,/ }; do for c in $SWEEP_CONFIGS; do add_run "$m" "$c" "$r" - rtt; done; done
  fi
  if [ "$TOLS" != none ] && in_list "$m" "$TOL_MODELS"; then
    add_ref "$m" ref
    [ "$MODE" = full ] && add_run "$m" layer "$BASE_RTT" - tol  # quick: heads only as reference
    add_run "$m" head "$BASE_RTT" - tol
    for t in ${TOLS//,/ }; do add_run "$m" head+spec/greedy "$BASE_RTT" "$t" tol; done
  fi
done
# Sweep runs in ascending RTT per model after the main matrix (stable: the order built above).
NU=${#PLAN[@]}
NRUNS=$((NU * REPEATS))

# ---- time estimate (for the ETA; calibrated on the emulated testbed of a 2-core EPYC) ------
# A run costs a start-up (loading, and the first position, which waits for the workers'
# loading: ~12 s per GB of model on pi4 ranks, plus mpirun) and, per position, compute that
# scales with the model's bytes (layer-wise ~130 ms per GB: the four pi4 ranks stream the
# weights one after the other) times a partition factor, plus each hop's one-way latency.
est_run() {  # est_run MODEL CONFIG RTT -> seconds
  local m=$1 c=$2 r=$3 steps L gb
  steps=$(($(default_tokens "$m") + ${MNP[$m]:-16})); L=${MLAYERS[$m]:-12}; gb=$(awk -v b="${MBYTES[$m]:-0}" 'BEGIN{print b/1e9}')
  [ "$r" = none ] && r=0
  awk -v s="$steps" -v L="$L" -v gb="$gb" -v r="$r" -v c="$c" -v w=$((RANKS - 1)) 'BEGIN{
    f = 1; hops = w + 1
    if (c ~ /^head/) { f = 0.65; hops = 2 * L + 1 }
    if (c == "slice") { f = 0.45; hops = 2 * L + 2 }
    if (c == "auto") { f = 0.8; hops = (r > 3 ? w + 1 : 2 * L + 1) }
    if (c ~ /spec/) f = 0.7
    if (c == "single") { f = 0.15; hops = 0 }  # the host, undilated
    t = 8 + 12 * gb + s * (130 * gb * f + hops * (r / 2 + 0.3)) / 1000
    printf "%.0f", t }'
}
declare -A EST
TOTAL_EST=0
for line in "${PLAN[@]}"; do
  IFS='|' read -r m c r t md g <<<"$line"
  e=$(est_run "$m" "$c" "$r"); EST[$line]=$e
  TOTAL_EST=$((TOTAL_EST + e * REPEATS))
done

# ---- launch ------------------------------------------------------------------------------
if [ "$LAUNCHER" = mpirun ]; then
  . "$ROOT/scripts/mpi-env.sh"
  LAUNCH=(mpirun $MPI_FLAGS -np "$RANKS") LAUNCH1=(mpirun $MPI_FLAGS -np 1)
else
  [ -n "${SLURM_JOB_ID:-}" ] || [ "$DRY" = 1 ] || die "--launcher srun needs a Slurm allocation (SLURM_JOB_ID unset)"
  LAUNCH=(srun --ntasks="$RANKS" --kill-on-bad-exit=1 ${SRUN_MPI:+--mpi=$SRUN_MPI})
  LAUNCH1=(srun --ntasks=1 --kill-on-bad-exit=1 ${SRUN_MPI:+--mpi=$SRUN_MPI})
fi
WRAP=()
[ "$DEVICE" != none ] && WRAP=("$ROOT/scripts/emulate-device" "$DEVICE")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 HEADSPLIT_EMU_MODE=$DEVICE_MODEL

TOKDESC=""
for m in "${MODEL_LIST[@]}" ${TOL_MODELS//,/ }; do
  [[ $TOKDESC == *"$(short_name "$m") "* ]] && continue
  TOKDESC+="$(short_name "$m") $(default_tokens "$m"), "
done
TOKDESC=${TOKDESC%, }

echo "bench: $MODE matrix: ${#MODEL_LIST[@]} model(s) [${MODEL_LIST[*]}], configurations [$CONFIGS]," \
     "RTT sweep [${RTTS}] on [${RTT_MODELS}], tolerance sweep [${TOLS}] on [${TOL_MODELS:-none}]" >&2
echo "bench: $NU distinct runs x $REPEATS repeat(s) = $NRUNS runs; new tokens per run: $TOKDESC (prompt \"$PROMPT\", --batch $BATCH);" \
     "device $DEVICE ($DEVICE_MODEL), link $LINK, launcher $LAUNCHER ($RANKS ranks)" >&2
echo "bench: estimated duration ~$(hs_fmt_dur "$TOTAL_EST") (from a model of the 2-core emulated testbed; the ETA refines it as runs finish)" >&2

cmd_for() {  # cmd_for MODEL CONFIG RTT TOL MEDIUM REP METRICS -> sets CMD array
  local m=$1 c=$2 r=$3 t=$4 md=$5 rep=$6 metrics=$7 part pl spec wire lmhead link
  read -r part pl spec wire lmhead <<<"$(cfg_def "$c")"
  # the prompt, its passes of --batch positions, the new tokens and a KV cache for both
  local gen; gen=$(default_tokens "$m")
  local run=(--model "${MPATH[$m]}" --prompt "$PROMPT" --batch "$BATCH" --n-predict "$gen"
             --ctx-size $((${MNP[$m]:-16} + gen)) --seed $((41 + rep)) --metrics "$metrics"
             --quiet --logits-out "${metrics%.json}.logits")
  if [ "$c" = single ]; then  # the reference: one process on the host, no board, no link
    CMD=("${LAUNCH1[@]}" "$BIN" "${run[@]}")
    return 0
  fi
  link=$(link_for "$r" "$md")
  CMD=("${LAUNCH[@]}" "${WRAP[@]}" "$BIN" "${run[@]}" --partition "$part" --placement "$pl"
       --speculate "$spec" --timeout 120)
  [ -n "$wire" ] && CMD+=(--wire "$wire")
  [ -n "$lmhead" ] && CMD+=(--lm-head "$lmhead")
  [ "$t" != - ] && CMD+=(--tolerance "$t")
  [ "$link" != none ] && CMD+=(--emulate-link "$link")
  return 0
}
keyname() {  # file-name-safe key
  local m=$1 c=$2 r=$3 t=$4 md=${5:--}
  c=${c//+/-}; c=${c//\//-}
  echo "$(label_of "$m" "$md")__${c}__rtt${r}__tol${t}"
}

if [ "$DRY" = 1 ]; then
  BIN=$OUT/bin/headsplit
  i=0
  for rep in $(seq 1 "$REPEATS"); do
    ORDER=("${PLAN[@]}")
    if [ $((rep % 2)) = 0 ]; then ORDER=(); for ((j = ${#PLAN[@]} - 1; j >= 0; j--)); do ORDER+=("${PLAN[j]}"); done; fi
    for line in "${ORDER[@]}"; do
      IFS='|' read -r m c r t md g <<<"$line"
      i=$((i + 1))
      cmd_for "$m" "$c" "$r" "$t" "$md" "$rep" "$OUT/runs/$(keyname "$m" "$c" "$r" "$t" "$md").r$rep.json"
      printf '[%d/%d] %s %s rtt %s tol %s rep %d/%d (%s; ~%ss):' "$i" "$NRUNS" "$(label_of "$m" "$md")" "$c" "$r" "$t" "$rep" "$REPEATS" "$g" "${EST[$line]}"
      printf ' %q' "${CMD[@]}"; echo
    done
  done
  exit 0
fi

# ---- set up the output -------------------------------------------------------------------
mkdir -p "$OUT/runs" "$OUT/bin" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
# The engine is copied: other work may rebuild $BUILD while the matrix runs.
cp "$BUILD/headsplit" "$OUT/bin/headsplit" || die "cannot copy $BUILD/headsplit"
BIN=$OUT/bin/headsplit
if [ "$DEVICE" != none ]; then
  if [ "$LAUNCHER" = srun ]; then chk=(srun --ntasks=1 "$ROOT/scripts/emulate-device" --check "$DEVICE")
  else chk=("$ROOT/scripts/emulate-device" --check "$DEVICE"); fi
  "${chk[@]}" >"$OUT/emulate-check.txt" 2>&1 ||
    { cat "$OUT/emulate-check.txt" >&2; die "device emulation unavailable (see above); --device none runs unconstrained"; }
fi
GITREV=$(git -C "$ROOT" describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)
export HS_META_COMMAND="$(hs_shell_words bench/run.sh "${ARGV[@]}")" HS_META_MODE=$MODE HS_META_LAUNCHER=$LAUNCHER \
  HS_META_DEVICE=$DEVICE HS_META_DEVICE_MODEL=$DEVICE_MODEL HS_META_LINK=$LINK HS_META_BASE_RTT=$BASE_RTT HS_META_RANKS=$RANKS \
  HS_META_REPEATS=$REPEATS HS_META_N_RUNS=$NRUNS HS_META_N_UNIQUE=$NU \
  HS_META_CONFIGS="$CONFIGS" HS_META_MODELS="${MODEL_LIST[*]}" HS_META_RTTS=$RTTS \
  HS_META_RTT_MODELS=$RTT_MODELS HS_META_TOLERANCES=$TOLS HS_META_TOL_MODELS=$TOL_MODELS \
  HS_META_SPEC_TOLERANCE=$SPEC_TOL HS_META_TOKENS_DESC="$TOKDESC" HS_META_PROMPT="$PROMPT" HS_META_BATCH=$BATCH \
  HS_META_GIT_REVISION=$GITREV HS_META_MACHINE="$(hs_machine_line)" HS_META_HOST=$(hostname) \
  HS_META_STARTED=$(date -Iseconds) HS_META_LOADAVG_START="$(hs_loadavg)" \
  HS_META_ESTIMATE_S=$TOTAL_EST HS_META_BINARY_SHA256=$(sha256sum "$BIN" | cut -c1-16) \
  HS_META_JITTER_RATIO=$JIT_RATIO HS_META_NOTES="$NOTES" HS_META_MEDIA=$MEDIA \
  HS_META_MAX_LOAD=$MAX_LOAD HS_META_LOAD_WAIT_S=$LOAD_WAIT
hs_write_meta "$OUT"
for m in "${!MPATH[@]}"; do echo "$m ${MPATH[$m]} synthetic=${MSYN[$m]} layers=${MLAYERS[$m]} bytes=${MBYTES[$m]}"; done >"$OUT/models.txt"
RUNS_TSV=$OUT/runs.tsv
printf 'model\tmodel_path\tconfig\tpartition\tplacement\tspeculate\ttolerance\trtt_ms\tlink\tn_predict\tgroups\trep\tseed\tstatus\trc\twall_s\tload1\tstarted\tsynthetic\tmetrics\tlog\tcommand\tload_wait_s\tmax_load\n' >"$RUNS_TSV"

CHILD=0
on_signal() {
  echo >&2
  echo "bench: interrupted; summarising what ran" >&2
  [ "$CHILD" != 0 ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD" 2>/dev/null
  hs_aggregate "$OUT" && hs_plots "$OUT"
  exit 130
}
trap on_signal INT TERM

# ---- run, interleaved: every repeat runs every configuration once, alternating direction ---
# The loop forks little: on a loaded 2-core host every fork of the harness costs 0.1 s or more.
declare -A KEY LNK STP
for line in "${PLAN[@]}"; do
  IFS='|' read -r m c r t md g <<<"$line"
  KEY[$line]=$(keyname "$m" "$c" "$r" "$t" "$md"); STP[$line]=$(default_tokens "$m")
  if [ "$c" = single ]; then LNK[$line]=none; else LNK[$line]=$(link_for "$r" "$md"); fi
done
if [ -n "${EPOCHREALTIME:-}" ]; then now() { NOW=${EPOCHREALTIME/,/.}; }
else now() { NOW=$(date +%s.%N); }; fi
jnum() {  # jnum KEY FILE [last]: the first (last) "KEY": value in a pretty-printed metrics file
  local l v=""
  while IFS= read -r l; do
    if [[ $l =~ ^\ *\"$1\":\ *\"?([^\",]*) ]]; then
      v=${BASH_REMATCH[1]}; [ "${3:-}" = last ] || break
    fi
  done <"$2"
  printf '%s' "$v"
}
now; T0=${NOW%.*}
DONE_EST=0 DONE_REAL=0 REM_EST=$TOTAL_EST FAILED=0 i=0 LEFT=0
for rep in $(seq 1 "$REPEATS"); do
  ORDER=("${PLAN[@]}")
  if [ $((rep % 2)) = 0 ]; then  # even repeats backwards: a drift in load hits all equally
    ORDER=(); for ((j = ${#PLAN[@]} - 1; j >= 0; j--)); do ORDER+=("${PLAN[j]}"); done
  fi
  for line in "${ORDER[@]}"; do
    IFS='|' read -r m c r t md g <<<"$line"
    if [ -n "$DEADLINE" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then LEFT=$((LEFT + 1)); continue; fi
    i=$((i + 1))
    k=${KEY[$line]}
    metrics=$OUT/runs/$k.r$rep.json log=$OUT/runs/$k.r$rep.log
    read -r part pl spec _ <<<"$(cfg_def "$c")"   # for the runs table
    cmd_for "$m" "$c" "$r" "$t" "$md" "$rep" "$metrics"
    e=${EST[$line]}
    now; el=$((${NOW%.*} - T0))
    if [ "$DONE_EST" -gt 0 ]; then eta=$((REM_EST * DONE_REAL / DONE_EST)); else eta=$REM_EST; fi
    rl=""; [ "$r" != none ] && rl=" rtt ${r}ms"; tl=""; [ "$t" != - ] && tl=" tol $t"
    mm=${m##*/}; mm=${mm%.h5}
    printf '[%d/%d] %s %s%s%s rep %d/%d ... elapsed %s, ETA %s ' "$i" "$NRUNS" "$mm" \
      "$c" "$rl" "$tl" "$rep" "$REPEATS" "$(hs_fmt_dur $el)" "$(hs_fmt_dur "$eta")" >&2
    lim=$TIMEOUT; [ -n "$lim" ] || lim=$((e * 4 > 300 ? e * 4 : 300))
    # The load gate: wait (bounded) until the host's 1-minute load is below --max-load.
    waited=0
    read -r load1 _ </proc/loadavg 2>/dev/null || load1=""
    if [ "$MAX_LOAD" != 0 ] && [ -n "$load1" ]; then
      while ! awk -v l="$load1" -v m="$MAX_LOAD" 'BEGIN{exit !(l < m)}'; do
        [ "$waited" -ge "$LOAD_WAIT" ] && { printf '(load %s after %ss: running anyway) ' "$load1" "$waited" >&2; break; }
        [ "$waited" = 0 ] && printf '(load %s, waiting for < %s) ' "$load1" "$MAX_LOAD" >&2
        sleep 10; waited=$((waited + 10))
        read -r load1 _ </proc/loadavg
      done
    fi
    printf -v started '%(%Y-%m-%dT%H:%M:%S%z)T' -1
    cmdq=$(hs_shell_words "${CMD[@]}")
    { echo "# $cmdq"; echo "# started $started, load average $(</proc/loadavg)"; } >"$log" 2>/dev/null
    rm -f "$metrics"
    now; s0=$NOW
    timeout --signal=TERM --kill-after=30 "$lim" "${CMD[@]}" >>"$log" 2>&1 </dev/null &
    CHILD=$!
    wait "$CHILD"; rc=$?
    CHILD=0
    now; wall=$(awk -v a="$s0" -v b="$NOW" 'BEGIN{printf "%.2f", b-a}')
    if [ "$rc" = 0 ] && [ -s "$metrics" ]; then status=ok
      ng=$(jnum n_gen_tokens "$metrics")  # a run that generated fewer tokens than asked
      [ "${ng:-0}" -ge "${STP[$line]}" ] || status=short
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=timeout
    else status=failed; fi
    [ "$status" = ok ] || FAILED=$((FAILED + 1))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
      "$(label_of "$m" "$md")" "${MPATH[$m]}" "$c" "$part" "$pl" "$spec" "$t" "$r" "${LNK[$line]}" \
      "${STP[$line]}" "$g" "$rep" $((41 + rep)) "$status" "$rc" "$wall" "$load1" "$started" \
      "${MSYN[$m]}" "$metrics" "$log" "$cmdq" "$waited" "$MAX_LOAD" >>"$RUNS_TSV"
    if [ "$status" = ok ]; then
      res="$(printf "%.4g" "$(jnum decode_ms_per_token "$metrics")")"; res="$res ms/token decoding $ng tokens, $(jnum hops_per_token "$metrics") hops"
      [ "$c" = auto ] && res+=" -> $(jnum partition "$metrics" last)"
      echo "| $res in ${wall%.*}s" >&2
    elif [ "$status" = short ]; then
      echo "| short: generated ${ng:-?} of ${STP[$line]} tokens (stopped by $(jnum stopped_by "$metrics")) in ${wall%.*}s" >&2
    else
      echo "| $status (exit $rc) after ${wall%.*}s: $(grep -m1 -iE 'error|exceeded|timeout|abort' "$log" | cut -c1-160)" >&2
    fi
    DONE_EST=$((DONE_EST + e)); DONE_REAL=$((DONE_REAL + ${wall%.*}))
    REM_EST=$((REM_EST - e))
  done
done
trap - INT TERM
if [ "$LEFT" -gt 0 ]; then
  note "stopped at the deadline: $LEFT of $NRUNS runs did not start (the later repeats are incomplete)"
  export HS_META_NOTES="$NOTES" HS_META_RUNS_LEFT=$LEFT
fi
export HS_META_FINISHED=$(date -Iseconds) HS_META_LOADAVG_END="$(hs_loadavg)" \
  HS_META_ELAPSED_S=$(($(date +%s) - T0)) HS_META_FAILED_RUNS=$FAILED
hs_write_meta "$OUT"
hs_aggregate "$OUT"
hs_plots "$OUT"
echo "bench: done in $(hs_fmt_dur $(($(date +%s) - T0))); $FAILED of $NRUNS runs failed; results in $OUT" >&2
echo "bench: table: $OUT/table.md; summary: $OUT/summary.csv; docs: bench/report.sh $OUT" >&2
if [ "$REPORT" = 1 ]; then "$ROOT/bench/report.sh" "$OUT" || true; fi
[ "$FAILED" = 0 ]
