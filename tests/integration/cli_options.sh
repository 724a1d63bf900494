#!/usr/bin/env bash
# llama.cpp's reflexes at headsplit's command line (issue 29): its short forms mean what they
# mean there (-m -p -f -n -c -t -s -b -ub -md -cnv, seen in the metrics' configuration, the
# prompt's tokens and the chat's banner); -np and --parallel (--serve's slots) without --serve
# say what they are and what to use instead, on one rank and under mpirun -np 2; a long option is never taken
# from its prefix (--step is not --steps); every error names the word typed.  Then
# headsplit-tokenize and the engine encode a prompt with special-token text to the same ids,
# with and without --no-special (and the two differ, so that the check can fail).  On a
# terminal, a single process's load bar ends at 100% and the converter's has its total and
# ends before its summary.
# A chat whose context fills goes on, on one rank and three alike.
# HEADSPLIT_TEST_QUICK=1: the mpirun -np 2 case and the chat on three ranks are left out.
. "$(dirname "$0")/common.sh"
stories_model "$T/m.h5" 11
TOKENIZE="$BUILD/headsplit-tokenize"
jqv() { jq -r "$2" "$1"; }

# The short forms: the same run as with the long names.
printf '%s' "$P" > "$T/p.txt"
run_hs 1 -m "$T/m.h5" -p "$P" -n 6 -c 64 -t 1 -s 7 -b 4 -ub 2 --quiet --metrics "$T/short.json" \
  2> "$T/err" || { cat "$T/err"; fail "the short forms"; }
run_hs 1 --model "$T/m.h5" --prompt "$P" --n-predict 6 --ctx-size 64 --threads 1 --seed 7 \
  --batch 4 --ubatch 2 --quiet --metrics "$T/long.json" 2> "$T/err" || { cat "$T/err"; fail "the long names"; }
want="6 64 1 7 4 2"
for f in short long; do
  got=$(jq -r '[.config.n_predict, .config.ctx_size, .config.threads, .config.seed,
                .config.batch, .config.ubatch] | map(tostring) | join(" ")' "$T/$f.json")
  [ "$got" = "$want" ] || fail "$f: configuration $got, expected $want (-n -c -t -s -b -ub)"
done
[ "$(jqv "$T/short.json" .tokens_checksum)" = "$(jqv "$T/long.json" .tokens_checksum)" ] \
  || fail "the short forms' tokens differ from the long names'"
[ "$(jqv "$T/short.json" .config.prompt)" = "$P" ] || fail "-p: prompt $(jqv "$T/short.json" .config.prompt)"
run_hs 1 -m "$T/m.h5" -f "$T/p.txt" -n 6 -c 64 -t 1 -s 7 --quiet --metrics "$T/file.json" \
  2> "$T/err" || { cat "$T/err"; fail "-f"; }
[ "$(jqv "$T/file.json" .tokens_checksum)" = "$(jqv "$T/short.json" .tokens_checksum)" ] \
  || fail "-f FILE gave other tokens than -p"
# -md FILE is the draft model (the model drafting for itself: the same tokens)
run_hs 1 -m "$T/m.h5" -p "$P" -n 6 -c 64 -t 1 -md "$T/m.h5" --quiet --metrics "$T/draft.json" \
  2> "$T/err" || { cat "$T/err"; fail "-md"; }
[ "$(jqv "$T/draft.json" .config.draft)" = "$T/m.h5" ] || fail "-md: config.draft is $(jqv "$T/draft.json" .config.draft)"
[ "$(jqv "$T/draft.json" .draft_tokens)" -gt 0 ] || fail "-md: nothing drafted"
[ "$(jqv "$T/draft.json" .tokens_checksum)" = "$(jqv "$T/short.json" .tokens_checksum)" ] \
  || fail "-md: the tokens differ from decoding without a draft"
# -cnv is --chat (llama.cpp's conversation mode)
printf '%s\n/exit\n' "$P" | run_hs 1 -m "$T/m.h5" -cnv --chat-template zephyr -n 4 -t 1 \
  > "$T/out" 2> "$T/err" || { cat "$T/err"; fail "-cnv"; }
grep -q "headsplit: chat (zephyr template)" "$T/err" || { cat "$T/err"; fail "-cnv did not chat"; }
grep -q "chat: 1 reply" "$T/err" || { cat "$T/err"; fail "-cnv: no reply"; }
# A chat whose context fills (the first turn dropped at the second message), /reset, then
# the first message again: on three ranks the same replies as in one process (the workers'
# KV caches are overwritten from the kept prefix on).
printf '%s\nTell me more\nAnd then?\n/reset\n%s\n/exit\n' "$P" "$P" > "$T/chat.in"
for np in 1 $(quick "" 3); do
  run_hs $np -m "$T/m.h5" -cnv --chat-template zephyr --system "You tell stories." -n 24 -c 96 \
    -t 1 < "$T/chat.in" > "$T/chat$np.out" 2> "$T/chat$np.err" || { cat "$T/chat$np.err"; fail "chat on $np rank(s)"; }
  grep -q "dropped the 1 oldest turn" "$T/chat$np.err" || { cat "$T/chat$np.err"; fail "chat on $np rank(s): no turn dropped"; }
  grep -q "chat: 4 replies" "$T/chat$np.err" || { cat "$T/chat$np.err"; fail "chat on $np rank(s): not 4 replies"; }
done
if ! is_quick; then
  cmp "$T/chat1.out" "$T/chat3.out" || { diff "$T/chat1.out" "$T/chat3.out"; fail "chat: 3 ranks differ from 1"; }
fi

# -np and --parallel: --serve's slots; without --serve, what they are and what to use instead
np_msg="-np/--parallel N: --serve's slots (requests generated at once), only with --serve; the number of ranks is mpirun's -np"
expect_error "-np 4" "$np_msg" run_hs 1 -m "$T/m.h5" -np 4
grep -q "n-predict" "$T/err" && fail "-np 4 was read as -n: $(cat "$T/err")"
expect_error "--parallel 4" "$np_msg" run_hs 1 -m "$T/m.h5" --parallel 4
expect_error "--serve -np 0" "--parallel: '0' is not a count" run_hs 1 -m "$T/m.h5" --serve 127.0.0.1:0 -np 0
if ! is_quick; then
  expect_error "mpirun -np 2 headsplit -np 4" "$np_msg" run_hs 2 -m "$T/m.h5" -np 4
  [ "$(grep -c "only with --serve" "$T/err")" = 1 ] || fail "-np 4 under mpirun: said $(grep -c "only with --serve" "$T/err") times"
fi

# No prefixes; the word typed in every message
expect_error "--step 8" "unknown option '--step' (did you mean --steps?)" run_hs 1 -m "$T/m.h5" --step 8
expect_error "--temp=x" "--temperature: 'x' is not in 0..100" run_hs 1 -m "$T/m.h5" --temp=x
expect_error "-ub x" "--ubatch: 'x' is not a count" run_hs 1 -m "$T/m.h5" -ub x
expect_error "-md (no file)" "-md needs a value" run_hs 1 -m "$T/m.h5" -md
expect_error "-md missing" "$T/none.h5" run_hs 1 -m "$T/m.h5" -md "$T/none.h5" -p "$P" -n 2
expect_error "-cnvx" "unknown option '-cnvx'" run_hs 1 -m "$T/m.h5" -cnvx
expect_error "-npx" "unknown option '-npx'" run_hs 1 -m "$T/m.h5" -npx 3
expect_error "-steps 8" "unknown option '-steps' (did you mean --steps?)" run_hs 1 -m "$T/m.h5" -steps 8
expect_error "-n x" "-n/--n-predict: 'x' is not a count" run_hs 1 -m "$T/m.h5" -n x
expect_error "--chat=yes" "--chat takes no value" run_hs 1 -m "$T/m.h5" --chat=yes
run_hs 1 --help > "$T/help.txt" 2> "$T/err" || { cat "$T/err"; fail "--help"; }
for w in "-m, --model" "-cnv, --chat" "-ub, --ubatch" "-md, --draft" "-np/--parallel"; do
  grep -q -- "$w" "$T/help.txt" || fail "--help does not list '$w'"
done

# headsplit-tokenize encodes as the engine does: special-token text is the token unless
# --no-special, for each.
SP="$P</s> and <unk><s> then"
prompt_ids() { jq -c '.tokens[:.n_prompt_tokens]' "$1"; }
run_hs 1 -m "$T/m.h5" -p "$SP" -n 1 --quiet --metrics "$T/sp.json" 2> "$T/err" || { cat "$T/err"; fail "special prompt"; }
run_hs 1 -m "$T/m.h5" -p "$SP" -n 1 --no-special --quiet --metrics "$T/plain.json" 2> "$T/err" \
  || { cat "$T/err"; fail "--no-special prompt"; }
eng_sp=$(prompt_ids "$T/sp.json")
eng_plain=$(prompt_ids "$T/plain.json")
tok_sp=$("$TOKENIZE" --model "$T/m.h5" "$SP" | jq -c .)
tok_plain=$("$TOKENIZE" --model "$T/m.h5" --no-special "$SP" | jq -c .)
[ "$tok_sp" = "$eng_sp" ] || fail "special tokens: headsplit-tokenize $tok_sp, the engine $eng_sp"
[ "$tok_plain" = "$eng_plain" ] || fail "--no-special: headsplit-tokenize $tok_plain, the engine $eng_plain"
[ "$tok_sp" != "$tok_plain" ] || fail "'$SP' encodes the same with and without --no-special"
# --no-bos with the special parsing: the same ids without the BOS put in front
tok_nobos=$("$TOKENIZE" --model "$T/m.h5" --no-bos "$SP" | jq -c .)
[ "$(echo "$tok_sp" | jq -c '.[1:]')" = "$tok_nobos" ] || fail "--no-bos: $tok_nobos, not $tok_sp without its BOS"
# The progress bars on a terminal (script(1) gives the programs one): a single process's load
# ends at 100%, the converter's line has its total and ends before its summary line.
if command -v script > /dev/null; then
  OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 120 script -qec \
    "'$HS' -m '$T/m.h5' -p hi -n 2 --quiet" /dev/null > "$T/load.tty" || fail "the load on a terminal"
  last=$(tr '\r' '\n' < "$T/load.tty" | grep "^loading " | tail -n 1)
  echo "$last" | grep -q "\[####################\] 100%" || fail "the load's bar ends at: $last"
  timeout -k 5 120 script -qec "'$CONVERT' --synthetic stories260k --seed 3 --out '$T/bar.h5'" \
    /dev/null > "$T/conv.tty" || fail "the converter on a terminal"
  tr '\r' '\n' < "$T/conv.tty" | grep -n . > "$T/conv.lines"
  bar=$(grep "headsplit-convert: writing: " "$T/conv.lines" | tail -n 1)
  echo "$bar" | grep -q "\[####################\] 100%  *[0-9.]* / [0-9.]* MB" \
    || fail "the converter's last bar line: $bar"
  [ "${bar%%:*}" -lt "$(grep "headsplit-convert: wrote" "$T/conv.lines" | cut -d: -f1)" ] \
    || fail "the converter's bar comes after its summary: $(cat "$T/conv.lines")"
else
  echo "note: script(1) absent (util-linux): the progress bars are not checked"
fi
echo "PASS: llama.cpp's short forms mean the same, -np/--parallel without --serve refused with what to use, no" \
     "prefix matching, the typed word in every error; headsplit-tokenize encodes special tokens" \
     "as the engine does; the progress bars end at 100%"
