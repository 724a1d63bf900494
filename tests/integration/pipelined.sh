# --ubatch: a pass split into passes of at most N rows, and on a layer-wise chain of stages
# several of them in flight at once (the pipelined prompt).  Logits must be bit-identical to
# one process and to unsplit passes, on every plan (split but not pipelined where the plan is
# not a chain), with inter-layer speculation at tolerance 0, with the emulated WiFi link, and
# with a draft model's verification passes; the metrics report the depth and passes sent.
# HEADSPLIT_TEST_QUICK=1 (the sanitizer build): the 4-stage chain with --ubatch 7 and auto
# only (1 and 64 take the same lines), no separate 2-stage check: the runs after the
# head-partitioned ones (speculation, now together with the emulated WiFi link; draft; bytes
# without the --ubatch 0 run read in full; --wire without the split-only run) go over 2 workers
# (a chain of 2 stages, one pass ahead), and the head partition over 2 workers.
. "$(dirname "$0")/common.sh"
M="$SRC/weights/austen-llama.h5"        # 6 layers: 4 workers make a chain of 4 stages
D="$SRC/weights/austen-llama-draft.h5"
P=$(head -c 400 "$SRC/weights/heldout.txt")
fail() { echo "FAIL: $*"; exit 1; }
V=1024
# Equal speeds pin the layer-wise plan (it otherwise follows the speeds probed at start-up).
printf '1 speed=1\n2 speed=1\n3 speed=1\n4 speed=1\n' > "$T/dev.txt"
printf '1 speed=1\n2 speed=1\n' > "$T/dev2.txt"
# The runs after the chain's own checks: NPL ranks pinned by DEVL (a chain of NPL - 1 stages).
NPL=$(quick 3 5)
DEVL=$(quick "$T/dev2.txt" "$T/dev.txt")
NPH=$(quick 3 4) # the head partition's ranks
run_hs 1 --model "$M" --prompt "$P" -n 12 --quiet --batch 64 --logits-out "$T/base.bin" \
  --metrics "$T/base.json"
np=$(( $(jq .n_forward "$T/base.json") - 11 )) # positions of the prompt's passes
[ "$np" -gt 100 ] || fail "the prompt has $np tokens; the test wants more than 100"
check() { # TAG NP ARGS...: bit-identical logits to one process; leaves metrics in $T/r.json
  local tag=$1 n=$2
  shift 2
  run_hs "$n" --model "$M" --prompt "$P" -n 12 --quiet --metrics "$T/r.json" \
    --logits-out "$T/r.bin" --rtt-pings 1 "$@" 2> "$T/err" || { cat "$T/err"; fail "$tag: run failed"; }
  "$CMP" "$T/r.bin" "$T/base.bin" --cols "$V" --exact >/dev/null || fail "$tag: logits not bit-identical"
}
# Layer-wise over 4 workers: a chain of 4 stages, 3 passes ahead.
for ub in $(quick 7 "1 7 64"); do
  check "layer ubatch $ub" 5 --partition layer --placement layer --batch 64 --ubatch $ub \
    --devices "$T/dev.txt"
  [ "$(jq .pipeline_depth "$T/r.json")" = 3 ] || fail "layer ubatch $ub: depth $(jq .pipeline_depth "$T/r.json"), expected 3"
  want=11 # the new tokens: one pass each; the prompt: chunks of 64 in passes of ub
  for ((left = np; left > 0; left -= 64)); do
    c=$((left < 64 ? left : 64))
    want=$((want + (c + ub - 1) / ub))
  done
  got=$(jq .wire_passes "$T/r.json")
  [ "$got" = "$want" ] || fail "layer ubatch $ub: $got passes sent, expected $want"
done
echo "ok: layer-wise chain, --ubatch $(quick 7 "1 7 64")"
# The default (auto): on the chain a chunk of c >= 32 rows goes in 4 passes of at least 16
# rows; a shorter one in one pass.
check "layer ubatch auto" 5 --partition layer --placement layer --batch 64 --devices "$T/dev.txt"
[ "$(jq -r .ubatch "$T/r.json")" = auto ] || fail "auto: ubatch reported as $(jq .ubatch "$T/r.json")"
[ "$(jq .pipeline_depth "$T/r.json")" = 3 ] || fail "auto: depth $(jq .pipeline_depth "$T/r.json"), expected 3"
want=11
for ((left = np; left > 0; left -= 64)); do
  c=$((left < 64 ? left : 64))
  if [ $c -lt 32 ]; then want=$((want + 1)); else
    ub=$(( (c + 3) / 4 )); [ $ub -lt 16 ] && ub=16; want=$((want + (c + ub - 1) / ub)); fi
done
[ "$(jq .wire_passes "$T/r.json")" = "$want" ] || fail "auto: $(jq .wire_passes "$T/r.json") passes, expected $want"
echo "ok: --ubatch auto on the chain ($want passes)"
# A chain of 2 stages (1 ahead); a head-partitioned plan is not a chain: split, never ahead.
if ! is_quick; then
  check "layer 2 workers" 3 --partition layer --placement layer --batch 32 --ubatch 5 \
    --devices "$T/dev2.txt"
  [ "$(jq .pipeline_depth "$T/r.json")" = 1 ] || fail "2 workers: depth $(jq .pipeline_depth "$T/r.json"), expected 1"
fi
check "head" $NPH --partition head --placement greedy --batch 32 --ubatch 8
[ "$(jq .pipeline_depth "$T/r.json")" = 0 ] || fail "head: depth $(jq .pipeline_depth "$T/r.json"), expected 0"
check "head auto" $NPH --partition head --placement greedy --batch 32
[ "$(jq .wire_passes "$T/r.json")" = $(( (np + 31) / 32 + 11 )) ] || fail "head, auto: $(jq .wire_passes "$T/r.json") passes (auto splits only chains)"
echo "ok: 2-stage chain; head partition split without passes ahead, and not split by auto"
# Inter-layer speculation at tolerance 0 is exact; the emulated link delays, never reorders.
if is_quick; then
  check "speculation, wifi" $NPL --partition layer --placement layer --batch 64 --ubatch 16 \
    --devices "$DEVL" --speculate all --tolerance 0 --emulate-link wifi
else
  check "speculation" 5 --partition layer --placement layer --batch 64 --ubatch 16 \
    --devices "$T/dev.txt" \
    --speculate all --tolerance 0
  check "wifi" 5 --partition layer --placement layer --batch 64 --ubatch 16 --emulate-link wifi
fi
echo "ok: speculation at tolerance 0, emulated WiFi"
# Draft verification passes (K+1 rows) split into passes of 2.
check "draft" $NPL --partition layer --placement layer --batch 64 --ubatch 2 --draft "$D" \
  --draft-tokens 3
echo "ok: draft verification"
# Without --logits-out the controller reads one row of the prompt's result: the last layer
# sends only that row back (the others stay on the worker).  Same tokens; the bytes on the
# wire fall by exactly the rows not sent; a pass split in ubatches adds only headers.
bytes_of() { # UBATCH [ARGS...]: bytes_total of a pinned layer-wise run (tokens checked)
  local ub=$1
  shift
  run_hs $NPL --model "$M" --prompt "$P" -n 12 --quiet --partition layer --placement layer \
    --devices "$DEVL" --rtt-pings 1 --batch 64 --ubatch "$ub" --metrics "$T/b.json" "$@" \
    2> "$T/err" || { cat "$T/err"; fail "bytes run (--ubatch $ub $*)"; }
  jq -c .tokens "$T/b.json" | cmp -s - <(jq -c .tokens "$T/base.json") || fail "tokens differ (--ubatch $ub $*)"
  jq .bytes_total "$T/b.json"
}
is_quick || b_all=$(bytes_of 0 --logits-out "$T/x.bin")
b_last=$(bytes_of 0)
b_last16=$(bytes_of 16)
row=$(($(jq .model.dim "$T/base.json") * 4))
is_quick || [ $((b_all - b_last)) = $(((np - 1) * row)) ] ||
  fail "the result rows not read: $((b_all - b_last)) bytes saved, expected $(((np - 1) * row))"
passes16=0
for ((left = np; left > 0; left -= 64)); do c=$((left < 64 ? left : 64)); passes16=$((passes16 + (c + 15) / 16)); done
extra=$(( (passes16 - (np + 63) / 64) * NPL * 32 )) # NPL hops, a 32-byte header each
[ $((b_last16 - b_last)) = $extra ] || fail "--ubatch 16 moved $((b_last16 - b_last)) more bytes, expected $extra (headers only)"
echo "ok: only the rows read come back ($b_last bytes against ${b_all:-(not run)}); --ubatch 16 adds $extra bytes of headers"
# --wire f16 and q8 round the activations between ranks: with the plan pinned (a devices
# file: the layer cuts otherwise follow the speeds probed at start-up, and the rounding
# happens at the cuts), split, pipelined and speculating (tolerance 0) runs give the same
# bits; the bytes on the wire shrink to about a half and a quarter of f32's.
wire_run() { # OUT ARGS...
  local out=$1
  shift
  run_hs $NPL --model "$M" --prompt "$P" -n 12 --quiet --partition layer --placement layer \
    --devices "$DEVL" --rtt-pings 1 --batch 64 --metrics "$T/$out.json" \
    --logits-out "$T/$out.bin" "$@" 2> "$T/err" || { cat "$T/err"; fail "wire run $out ($*)"; }
}
wire_run f32
for w in f16 q8; do
  wire_run $w.0 --wire $w
  if ! is_quick; then
    wire_run $w.16 --wire $w --ubatch 16
    cmp -s "$T/$w.0.bin" "$T/$w.16.bin" || fail "--wire $w: --ubatch 16 changed the logits"
  fi
  wire_run $w.s --wire $w --ubatch 16 --speculate all --tolerance 0
  cmp -s "$T/$w.0.bin" "$T/$w.s.bin" || fail "--wire $w: speculation at tolerance 0 changed the logits"
  "$CMP" "$T/$w.0.bin" "$T/f32.bin" --cols "$V" --tol 0.5 >/dev/null || fail "--wire $w: logits far from f32's"
  cmp -s "$T/$w.0.bin" "$T/f32.bin" && fail "--wire $w: logits bit-identical to f32 (not rounded?)"
  b32=$(jq .bytes_total "$T/f32.json"); bw=$(jq .bytes_total "$T/$w.0.json")
  lim=$([ $w = f16 ] && echo 0.56 || echo 0.33)
  awk -v a="$bw" -v b="$b32" -v l="$lim" 'BEGIN { exit !(a < l * b) }' ||
    fail "--wire $w: $bw bytes against $b32 for f32 (expected under $lim of it)"
  echo "ok: --wire $w: $bw bytes against $b32; split, pipelined and speculating runs identical"
done
# Bad values name the option.
if run_hs 1 --model "$M" --prompt hi --ubatch -1 2> "$T/err"; then fail "--ubatch -1 accepted"; fi
grep -q -- "--ubatch" "$T/err" || { cat "$T/err"; fail "--ubatch -1: the message does not name the option"; }
echo "ok: bad --ubatch refused"
