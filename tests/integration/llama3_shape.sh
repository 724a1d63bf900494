# The llama3-8b preset's shapes end to end, on a model small enough for CI (two layers of
# width 256, about 50 MB): Llama 3's 128256-piece vocabulary, 32 query heads over 8 KV heads
# (GQA) of head_dim 128, theta 500000 and Llama 3.1's RoPE scaling as 64 rope_freq_factors;
# it generates the same tokens on 1 and 3 ranks (head and layer partitions).
. "$(dirname "$0")/common.sh"
"$CONVERT" --synthetic llama3-8b:dim=256,ffn=512,layers=2 --quantize q4_0 --seed 5 \
  --out "$T/m.h5" > "$T/conv.out"
grep -q "32 heads / 8 KV heads, head_dim 128, ffn 512, vocab 128256" "$T/conv.out" \
  || fail "unexpected shapes: $(cat "$T/conv.out")"
h5dump -a /config/n_kv_heads "$T/m.h5" | grep -q "(0): 8" || fail "n_kv_heads is not 8"
h5dump -a /config/rope_theta "$T/m.h5" | grep -q "(0): 500000" || fail "rope_theta is not 500000"
# Llama 3.1 8B's factors (llama.cpp's rope_freqs.weight of Meta-Llama-3.1-8B): frequencies
# 0..28 kept, 35..63 divided by 8, 29..34 smoothly between.
h5dump -d /config/rope_freq_factors "$T/m.h5" > "$T/rf.txt"
grep -q "SIMPLE { ( 64 ) / ( 64 ) }" "$T/rf.txt" || fail "rope_freq_factors: not 64 factors"
factors=$(sed -n '/DATA {/,/}/p' "$T/rf.txt" | sed -E 's/\([0-9]+\)://g' | tr -d ' {}DATA\n')
IFS=, read -r -a f <<< "$factors"
[ "${#f[@]}" = 64 ] || fail "rope_freq_factors: read ${#f[@]} values"
[ "${f[0]}" = 1 ] && [ "${f[28]}" = 1 ] && [ "${f[35]}" = 8 ] && [ "${f[63]}" = 8 ] \
  || fail "rope_freq_factors: ${f[0]} ${f[28]} ${f[35]} ${f[63]} (want 1 1 8 8)"
awk -v a="${f[29]}" -v b="${f[34]}" 'BEGIN { exit !(a > 1 && a < b && b < 8) }' \
  || fail "rope_freq_factors: ${f[29]} .. ${f[34]} do not rise between 1 and 8"
[ "$(h5dump -d /embed -H "$T/m.h5" | grep -c 128256)" -ge 1 ] || fail "embed rows are not 128256"
echo "ok: shapes (GQA 8 KV heads, vocab 128256, head_dim 128, rope_freqs 64 factors)"

# The synthetic tokenizer spells a prompt byte by byte: a short one leaves room for 10 tokens.
args=(--model "$T/m.h5" --prompt "hi" --steps 14 --quiet --rtt-pings 1)
run_hs 1 "${args[@]}" --metrics "$T/one.json"
jq -c .tokens "$T/one.json" > "$T/one.tok"
[ "$(jq .n_gen_tokens "$T/one.json")" -ge 8 ] || fail "1 rank: fewer than 8 generated tokens"
for part in head layer; do
  run_hs 3 "${args[@]}" --partition $part --metrics "$T/$part.json" \
    || fail "3 ranks, $part: run failed"
  jq -c .tokens "$T/$part.json" | cmp -s - "$T/one.tok" \
    || fail "3 ranks, $part: tokens differ from 1 rank ($(jq -c .tokens "$T/$part.json") vs $(cat "$T/one.tok"))"
  echo "ok: 3 ranks, --partition $part: the 1-rank tokens"
done
echo "PASS: llama3-8b shapes convert and run the same on 1 and 3 ranks"
