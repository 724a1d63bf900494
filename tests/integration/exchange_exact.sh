# --exchange exact (issue 14): SLICE layers without partial sums (wo and w_down by rows, four
# all-gathers per layer) give the single process's logits bit for bit: the project's trained
# LLaMA and GPT-2 (biases), a synthetic model, 2 to 6 workers (member counts and FFN cuts that
# divide nothing evenly), several rows per pass (--batch), the LM head split or on the
# controller; and, with ../shared present, a quantized GGUF import (Q8_0 and Q4_K_M: every
# matvec input quantized, where partial sums drift), also held to llama.cpp's reference
# logits; qwen2, llama3 and phi3 Q8_0 imports.  --wire f16|q8 with it is refused; AUTO never
# picks it.
. "$(dirname "$0")/common.sh"
W="$SRC/weights"
"$CONVERT" --synthetic stories260k --seed 5 --out "$T/synth.h5"
P="It is a truth universally acknowledged"

# same NAME MODEL NP ARGS...: NP ranks with ARGS give $T/NAME.base.bin's logits bit for bit.
same() {
  local name=$1 m=$2 np=$3 vocab
  shift 3
  vocab=$(jq .model.vocab_size "$T/$name.base.json")
  run_hs "$np" --model "$m" --prompt "$P" --steps 12 --quiet --rtt-pings 1 \
    --metrics "$T/r.json" --logits-out "$T/r.bin" "$@" > "$T/run.log" 2>&1 ||
    { cat "$T/run.log"; fail "$name np=$np $*: run failed"; }
  [ "$(jq -r .plan.exchange "$T/r.json")" = exact ] || fail "$name np=$np: plan not exact"
  "$CMP" "$T/r.bin" "$T/$name.base.bin" --cols "$vocab" --exact > /dev/null ||
    fail "$name np=$np $*: logits not bit-identical to one process"
  echo "ok: $name np=$np $*"
}

for m in "$W/austen-llama.h5" "$W/austen-gpt2.h5" "$T/synth.h5"; do
  name=$(basename "$m" .h5)
  run_hs 1 --model "$m" --prompt "$P" --steps 12 --quiet --metrics "$T/$name.base.json" \
    --logits-out "$T/$name.base.bin" || fail "$name: single process failed"
  same "$name" "$m" 5 --partition slice --exchange exact
done
m="$W/austen-llama.h5"
for np in 3 7; do
  same austen-llama "$m" "$np" --partition slice --exchange exact
done
same austen-llama "$m" 5 --partition slice --exchange exact --lm-head controller
same austen-gpt2 "$W/austen-gpt2.h5" 4 --partition slice --exchange exact --batch 4
same austen-llama "$m" 4 --partition slice --exchange exact --batch 3
# Unequal devices: the FFN cuts (and so the rows of wo and w_down) follow the speeds.
printf '1 speed=1\n2 speed=0.5\n3 speed=0.25\n4 speed=1\n' > "$T/dev.txt"
same austen-llama "$m" 5 --partition slice --exchange exact --devices "$T/dev.txt"

expect_error "--exchange exact --wire f16" "--exchange exact sends whole values" \
  run_hs 2 --model "$m" --prompt "$P" --steps 2 --partition slice --exchange exact --wire f16
expect_error "--exchange exact --wire q8" "--wire q8 would round them" \
  run_hs 2 --model "$m" --prompt "$P" --steps 2 --partition slice --exchange exact --wire q8
# auto never chooses it (runs that did not ask keep their bits)
run_hs 5 --model "$m" --prompt "$P" --steps 2 --quiet --partition slice --metrics "$T/a.json" ||
  fail "--exchange auto: run failed"
[ "$(jq -r .plan.exchange "$T/a.json")" != exact ] || fail "--exchange auto chose exact"

G="$SHARED/gguf"
if [ -e "$G/stories260K-pad256-Q8_0.gguf" ]; then
  for name in stories260K-pad256-Q8_0 rand-llama-d256-Q4_K_M; do
    R="$G/reference/$name"
    n=$(wc -l < "$R/tokens.txt")
    "$CONVERT" --format gguf --file "$G/$name.gguf" --out "$T/$name.h5" --quiet
    for np in 1 5; do
      args=()
      [ "$np" = 5 ] && args=(--partition slice --exchange exact)
      run_hs "$np" --model "$T/$name.h5" --prompt "$(cat "$R/prompt.txt")" --steps "$n" \
        --quiet --rtt-pings 1 --metrics "$T/m$np.json" --logits-out "$T/q$np.bin" \
        "${args[@]}" > "$T/run.log" 2>&1 || { cat "$T/run.log"; fail "$name np=$np: failed"; }
    done
    "$CMP" "$T/q5.bin" "$T/q1.bin" --cols 512 --exact > /dev/null ||
      fail "$name: --exchange exact on 5 ranks not bit-identical to one process"
    jq -r '.tokens[]' "$T/m5.json" | head -n "$n" | diff -q - "$R/tokens.txt" > /dev/null ||
      fail "$name: --exchange exact tokens differ from llama.cpp's"
    "$CMP" "$T/q5.bin" "$R/logits_f32le.bin" --cols 512 --rows "$n" --tol 2e-3 ||
      fail "$name: --exchange exact logits differ from llama.cpp's by more than 2e-3"
    echo "ok: $name np=5 --exchange exact: one process's bits, within 2e-3 of llama.cpp"
  done
else
  echo "note: $G absent; the quantized GGUF checks are skipped"
fi
# Other architectures (qwen2's q/k/v biases, llama3's rope_freqs, phi3's fused q/k/v and
# sliding window), Q8_0: the single process's bits.
A="$SHARED/gguf-arch"
for fam in qwen2 llama3 phi3; do
  name=$fam-d128-Q8_0
  [ -e "$A/$name.gguf" ] || { echo "note: $A/$name.gguf absent; skipped"; continue; }
  R="$A/reference/$name"
  "$CONVERT" --format gguf --file "$A/$name.gguf" --out "$T/$name.h5" --quiet
  for np in 1 5; do
    args=()
    [ "$np" = 5 ] && args=(--partition slice --exchange exact)
    run_hs "$np" --model "$T/$name.h5" --prompt "$(cat "$R/prompt.txt")" \
      --steps "$(wc -l < "$R/tokens.txt")" --quiet --rtt-pings 1 --logits-out "$T/a$np.bin" \
      "${args[@]}" > "$T/run.log" 2>&1 || { cat "$T/run.log"; fail "$name np=$np: failed"; }
  done
  cmp -s "$T/a5.bin" "$T/a1.bin" || fail "$name: --exchange exact not bit-identical to one process"
  echo "ok: $name np=5 --exchange exact: one process's bits"
done
echo "PASS: --exchange exact gives the single process's logits bit for bit"
