#!/usr/bin/env bash
# --chat driven through tmux (send-keys, capture-pane) as a user at a terminal would:
# two turns on stories260K, each reply equal to a fresh run of the whole conversation (the
# second turn reuses the first's KV entries); then, on a slower synthetic model, Ctrl-C
# stops a reply without ending the chat, and /exit ends it with status 0; then a small
# --ctx-size that fills, /help, an unknown /word and /reset (below).
. "$(dirname "$0")/common.sh"
command -v tmux >/dev/null || { echo "SKIP: tmux not installed (scripts/install-deps.sh)"; exit 77; }
text_model "$T/m.h5" 5
N=20
SOCK="hs-chat-$$"
TM=(tmux -L "$SOCK")
trap '"${TM[@]}" kill-server 2>/dev/null || true; rm -rf "$T"' EXIT

# wait_for PANE PATTERN COUNT: until capture-pane shows PATTERN (grep -c) COUNT times.
wait_for() {
  local pane=$1 pat=$2 count=$3
  for _ in $(seq 300); do
    "${TM[@]}" capture-pane -p -J -S - -t "$pane" > "$T/pane.txt" 2>/dev/null || true
    [ "$(grep -c -- "$pat" "$T/pane.txt" || true)" -ge "$count" ] && return 0
    sleep 0.1
  done
  cat "$T/pane.txt"
  fail "tmux pane $pane never showed '$pat' $count times"
}

# The chat in a pane (a single process: Ctrl-C reaches headsplit itself).
"${TM[@]}" new-session -d -s chat -x 200 -y 60 \
  "$HS --model $T/m.h5 --chat --chat-template zephyr -n $N --threads 1 2>$T/chat.err; echo EXIT=\$?; sleep 60"
wait_for chat '^> ' 1
"${TM[@]}" send-keys -t chat "$P" Enter
wait_for chat '^> ' 2
"${TM[@]}" send-keys -t chat "Tell me more" Enter
wait_for chat '^> ' 3
"${TM[@]}" send-keys -t chat "/exit" Enter
wait_for chat '^EXIT=0' 1
cp "$T/pane.txt" "$T/chat.txt"

# References: fresh runs of the conversation as text.
run_hs 1 --model "$T/m.h5" --prompt "$P" --chat-template zephyr -n $N --quiet \
  --metrics "$T/r1.json" > /dev/null 2> "$T/r1.err" || { cat "$T/r1.err"; fail "reference 1"; }
python3 - "$T" "$P" <<'PY'
import json, sys
t, p = sys.argv[1], sys.argv[2]
r1 = json.load(open(t + "/r1.json"))["gen_text"].rstrip()
open(t + "/r1.txt", "w").write(r1)
conv = ("<|user|>\n" + p + "</s>\n<|assistant|>\n" + r1 + "</s>\n<|user|>\nTell me more</s>\n"
        "<|assistant|>\n")
open(t + "/conv2.txt", "w").write(conv)
PY
run_hs 1 --model "$T/m.h5" --prompt-file "$T/conv2.txt" --stop "</s>" -n $N --quiet \
  --metrics "$T/r2.json" > /dev/null 2> "$T/r2.err" || { cat "$T/r2.err"; fail "reference 2"; }
python3 - "$T" <<'PY' || { cat "$T/chat.txt"; fail "chat replies differ from fresh runs"; }
import json, sys
t = sys.argv[1]
pane = "\n" + open(t + "/chat.txt").read()
r1 = open(t + "/r1.txt").read()
r2 = json.load(open(t + "/r2.json"))["gen_text"].rstrip()
turns = pane.split("\n> ")
# turns[1] is "PROMPT\nREPLY1\n", turns[2] "Tell me more\nREPLY2\n"
rep1 = turns[1].split("\n", 1)[1].rstrip()
rep2 = turns[2].split("\n", 1)[1].rstrip()
ok = rep1 == r1 and rep2 == r2 and r1 and r2
print("turn 1: %r\n  ref: %r\nturn 2: %r\n  ref: %r" % (rep1, r1, rep2, r2))
sys.exit(0 if ok else 1)
PY

# Ctrl-C stops a long reply, not the chat.
"$CONVERT" --synthetic "llama:dim=512,layers=8,heads=8,kv_heads=8,head_dim=64,ffn=2048,vocab=4096,ctx=4096" \
  --out "$T/slow.h5" > /dev/null
"${TM[@]}" new-session -d -s slow -x 200 -y 60 \
  "$HS --model $T/slow.h5 --chat --chat-template chatml -n 3000 --threads 1 2>$T/slow.err; echo EXIT=\$?; sleep 60"
wait_for slow '^> ' 1
"${TM[@]}" send-keys -t slow "hello" Enter
sleep 1.5
"${TM[@]}" send-keys -t slow C-c
wait_for slow '^\[stopped\]' 1
wait_for slow '^> ' 2
"${TM[@]}" send-keys -t slow "again" Enter
sleep 0.5
"${TM[@]}" send-keys -t slow C-c
wait_for slow '^\[stopped\]' 2
"${TM[@]}" send-keys -t slow "/exit" Enter
wait_for slow '^EXIT=0' 1
# A context of 96 positions (stories260K spells the template and the system message out in
# some 50) with 24 kept for each reply: the second message does not fit beside the first
# turn, which is dropped (the system message stays), and the reply equals a fresh run of the
# system message and that message alone; /help and an unknown /word are not
# sent to the model; /reset forgets the conversation, after which the first message gets
# the first reply again; the closing summary counts the whole session.
SYS="You tell stories."
"${TM[@]}" new-session -d -s fill -x 200 -y 60 \
  "$HS -m $T/m.h5 -cnv --chat-template zephyr --system '$SYS' -n 24 -c 96 -t 1 --metrics $T/fill.json 2>$T/fill.err; echo EXIT=\$?; sleep 60"
wait_for fill '^> ' 1
"${TM[@]}" send-keys -t fill "$P" Enter
wait_for fill '^> ' 2
"${TM[@]}" send-keys -t fill "Tell me more" Enter
wait_for fill '^> ' 3
"${TM[@]}" send-keys -t fill "/help" Enter
wait_for fill '^> ' 4
"${TM[@]}" send-keys -t fill "/frobnicate now" Enter
wait_for fill '^> ' 5
"${TM[@]}" send-keys -t fill "/reset" Enter
wait_for fill '^> ' 6
"${TM[@]}" send-keys -t fill "$P" Enter
wait_for fill '^> ' 7
"${TM[@]}" send-keys -t fill "/exit" Enter
wait_for fill '^EXIT=0' 1
cp "$T/pane.txt" "$T/fill.txt"
for m in "$P" "Tell me more"; do
  run_hs 1 -m "$T/m.h5" -p "$m" --system "$SYS" --chat-template zephyr -n 24 -c 96 --quiet \
    --metrics "$T/ref.json" > /dev/null 2> "$T/ref.err" || { cat "$T/ref.err"; fail "reference '$m'"; }
  jq -r .gen_text "$T/ref.json" > "$T/ref-$(echo "$m" | tr ' ' _).txt"
done
grep -q "context (96 positions) is full: dropped the 1 oldest turn (the system message is kept)" \
  "$T/fill.err" || { cat "$T/fill.err"; fail "no word on stderr of the turn dropped"; }
grep -q "unknown command '/frobnicate' (not sent to the model" "$T/fill.err" \
  || { cat "$T/fill.err"; fail "/frobnicate was not refused"; }
grep -q "conversation cleared (the system message is kept)" "$T/fill.err" \
  || { cat "$T/fill.err"; fail "/reset said nothing"; }
grep -q "chat: 3 replies; prompt eval: .* tokens/s); eval: .* tokens/s); 1 turn dropped to fit the context, 1 reset" \
  "$T/fill.err" || { cat "$T/fill.err"; fail "the closing summary is not the session's"; }
[ "$(jq '.chat.replies, .chat.turns_dropped, .chat.resets' "$T/fill.json" | tr '\n' ' ')" = "3 1 1 " ] \
  || fail "metrics .chat: $(jq -c .chat "$T/fill.json")"
python3 - "$T" "$P" <<'PY' || { cat "$T/fill.txt"; fail "chat with a full context differs from fresh runs"; }
import sys
t, p = sys.argv[1], sys.argv[2]
turns = ("\n" + open(t + "/fill.txt").read()).split("\n> ")
ref1 = open(t + "/ref-" + p.replace(" ", "_") + ".txt").read().rstrip()
ref2 = open(t + "/ref-Tell_me_more.txt").read().rstrip()
reply = lambda k: turns[k].split("\n", 1)[1].rstrip()
assert turns[3].startswith("/help\ncommands:"), turns[3]
assert turns[4].rstrip() == "/frobnicate now", turns[4]   # no reply: not sent
assert turns[5].rstrip() == "/reset", turns[5]
got = [reply(1), reply(2), reply(6)]
print("replies %r\n  refs %r" % (got, [ref1, ref2, ref1]))
sys.exit(0 if got == [ref1, ref2, ref1] and ref1 and ref2 else 1)
PY
echo "PASS: chat through tmux (two turns equal to fresh runs; Ctrl-C stops replies, /exit ends;" \
     "a full context drops the oldest turn and goes on; /help, /reset; the session's summary)"
