#!/usr/bin/env bash
# The front door's options: --prompt-file (a file and standard input) equal to --prompt;
# -n counts new tokens; --stop cuts the text; special-token text becomes the token unless
# --no-special; chat templates applied to --prompt; sampling filters are seeded and
# deterministic; clear errors (unknown template, --serve beyond loopback without a key, a
# model in another format with the convert command); --version on every program; progress
# bars on a terminal, lines per rank in a log (mpirun), none when off.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 9
gen() { run_hs 1 --model "$T/m.h5" --quiet "$@"; }
text_of() { python3 -c "import json,sys; sys.stdout.write(str(json.load(open('$1'))['$2']))"; }

gen --prompt "$P" -n 12 --metrics "$T/a.json" 2> "$T/err" || { cat "$T/err"; fail "--prompt"; }
printf '%s' "$P" > "$T/p.txt"
gen --prompt-file "$T/p.txt" -n 12 --metrics "$T/b.json" 2> /dev/null
printf '%s' "$P" | gen --prompt-file - -n 12 --metrics "$T/c.json" 2> /dev/null
for f in b c; do
  [ "$(text_of "$T/$f.json" text)" = "$(text_of "$T/a.json" text)" ] || fail "--prompt-file ($f) differs from --prompt"
done
[ "$(text_of "$T/a.json" n_gen_tokens)" = 12 ] || fail "-n 12 gave $(text_of "$T/a.json" n_gen_tokens) new tokens"
[ "$(text_of "$T/a.json" stopped_by)" = n_predict ] || fail "-n: stopped_by is not n_predict"
grep -q "prompt eval: .* tokens/s); eval: 12 tokens" "$T/err" || { cat "$T/err"; fail "closing figures missing"; }

# --stop: the text ends before the stop string
full=$(text_of "$T/a.json" gen_text)
stop=$(python3 -c "import sys; t=sys.argv[1]; print(t[len(t)//2:len(t)//2+3])" "$full")
gen --prompt "$P" -n 12 --stop "$stop" --metrics "$T/s.json" 2> /dev/null
cut=$(text_of "$T/s.json" gen_text)
[ "$(text_of "$T/s.json" stopped_by)" = stop ] || fail "--stop '$stop' did not stop"
python3 -c "import sys; f,c,s=sys.argv[1:]; sys.exit(0 if c==f[:f.index(s)] else 1)" "$full" "$cut" "$stop" \
  || fail "--stop: '$cut' is not the text before '$stop' in '$full'"

# special tokens: </s> in a prompt is EOS (id 2) unless --no-special
gen --prompt "a</s>b" --steps 8 --metrics "$T/sp.json" 2> /dev/null
gen --prompt "a</s>b" --steps 8 --no-special --metrics "$T/ns.json" 2> /dev/null
python3 - "$T" <<'PY' || fail "special-token text"
import json, sys
t = sys.argv[1]
sp = json.load(open(t + "/sp.json")); ns = json.load(open(t + "/ns.json"))
ok = 2 in sp["tokens"][:sp["n_prompt_tokens"]] and 2 not in ns["tokens"][:ns["n_prompt_tokens"]]
sys.exit(0 if ok else 1)
PY

# a template applied to --prompt; the template's end of turn stops the reply
gen --prompt "$P" --chat-template chatml -n 6 --metrics "$T/t.json" 2> /dev/null
text_of "$T/t.json" text | grep -q "<|im_start|>assistant" || fail "--chat-template chatml not applied"

# sampling filters: seeded, so repeatable; and different from greedy
gen --prompt "$P" -n 16 --temperature 0.9 --top-k 5 --min-p 0.05 --repeat-penalty 1.3 --seed 3 --metrics "$T/k1.json" 2> /dev/null
gen --prompt "$P" -n 16 --temperature 0.9 --top-k 5 --min-p 0.05 --repeat-penalty 1.3 --seed 3 --metrics "$T/k2.json" 2> /dev/null
[ "$(text_of "$T/k1.json" text)" = "$(text_of "$T/k2.json" text)" ] || fail "seeded sampling is not repeatable"

expect_error "unknown template" "is not a built-in template" gen --prompt x --chat-template jinja
expect_error "serve beyond loopback" "requires --api-key" gen --serve 0.0.0.0:8080
expect_error "bad -n" "n-predict: '0'" gen -n 0
expect_error "missing prompt file" "cannot open" gen --prompt-file "$T/none.txt"
if [ -e "$SHARED/stories260K/stories260K.bin" ]; then
  expect_error "llama2.c checkpoint" "--format llama2c --checkpoint" gen --model "$SHARED/stories260K/stories260K.bin"
fi
printf 'GGUF\003\0\0\0' > "$T/x.gguf"
expect_error "GGUF file" "looks like a GGUF file" run_hs 1 --model "$T/x.gguf"
for p in headsplit headsplit-convert headsplit-tokenize headsplit-profile headsplit-sim; do
  [ -x "$BUILD/$p" ] || continue
  "$BUILD/$p" --version | grep -q "revision .*SIMD path" || "$BUILD/$p" --version | grep -q "SIMD path" \
    || fail "$p --version"
done
# --version and --help answer without MPI (no orted to find on this PATH: MPI_Init would fail)
env PATH=/nonexistent "$BUILD/headsplit" --version | grep -q "SIMD path" || fail "--version needs MPI"
env PATH=/nonexistent "$BUILD/headsplit" --help | grep "usage:" > /dev/null || fail "--help needs MPI"
# progress: a bar on a terminal (script(1) gives one), nothing when stderr is a file
gen --prompt "$P" --steps 4 2> "$T/plain.err" > /dev/null
! grep -q "loading" "$T/plain.err" || fail "a progress bar was drawn into a file"
# in a log (under mpirun stderr is a pipe) a load longer than HEADSPLIT_PROGRESS_EVERY seconds
# prints lines, each rank its own: every tick and a last line with 0
HEADSPLIT_PROGRESS_EVERY=0 run_hs 3 --model "$T/m.h5" --prompt "$P" --steps 4 --quiet \
  2> "$T/log.err" > /dev/null || { cat "$T/log.err"; fail "the load with progress lines"; }
for r in 1 2; do
  grep -q "^rank $r: loading $T/m.h5: .* MB/s, done in [0-9.]* s$" "$T/log.err" \
    || { cat "$T/log.err"; fail "no progress line of rank $r's load in the log"; }
done
! grep -q $'\r' "$T/log.err" || fail "a log's progress lines hold carriage returns"
HEADSPLIT_PROGRESS_EVERY=off run_hs 3 --model "$T/m.h5" --prompt "$P" --steps 4 --quiet \
  2> "$T/off.err" > /dev/null || { cat "$T/off.err"; fail "the load with progress off"; }
! grep -q "loading" "$T/off.err" || fail "HEADSPLIT_PROGRESS_EVERY=off printed progress"
if command -v script >/dev/null; then
  script -qec "$HS --model $T/m.h5 --prompt x --steps 4 --quiet" /dev/null > "$T/tty.out" 2>&1 || true
  grep -aq "loading $T/m.h5: \[" "$T/tty.out" || { cat "$T/tty.out"; fail "no loading bar on a terminal"; }
  script -qec "$CONVERT --synthetic stories260k --out $T/y.h5" /dev/null > "$T/tty2.out" 2>&1 || true
  grep -aq "headsplit-convert: writing: .*MB/s" "$T/tty2.out" || { cat "$T/tty2.out"; fail "no conversion progress on a terminal"; }
fi
echo "PASS: front options"
