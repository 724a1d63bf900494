#!/usr/bin/env bash
# --serve stops cleanly: with one streamed generation running and two requests queued (one
# streamed, one not), SIGTERM to rank 0 of a 3-rank server and, separately, SIGINT to a
# single-process server: the process exits (every rank, mpirun with them) within
# --shutdown-grace plus 1 s, status 0; the running client gets a last chunk with a
# finish_reason and [DONE]; the queued stream an error event and [DONE], the queued plain
# request a 503 with Retry-After; nothing connects afterwards.
# Quick: the same two cases (they are the point).  The sanitizer build's exit (a leak check on
# every rank, Open MPI's teardown under it: 4 to 13 s on a loaded host) comes after the drain,
# so there the process may take 15 s more; the drain itself (rank 0's "server stopped after S
# s") is held to the grace period plus 1 s in both builds.
. "$(dirname "$0")/common.sh"
command -v curl > /dev/null || { [ "${CI:-}" != true ] || fail "curl missing"; echo "SKIP: curl missing"; exit 77; }
# a model slow enough that a long reply outlasts the grace period on any host
"$CONVERT" --synthetic "llama:dim=512,layers=8,heads=8,kv_heads=8,head_dim=64,ffn=2048,vocab=4096,ctx=4096" \
  --out "$T/slow.h5" > /dev/null
GRACE=2
EXIT_SLACK=$(quick 15 1)
SERVER=
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

# drain NP SIGNAL: one case
drain() {
  local np=$1 sig=$2 port url
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  url=http://127.0.0.1:$port
  # one slot: the two requests after the first wait in the queue (serve_parallel.sh drains
  # several running ones)
  local args=(--model "$T/slow.h5" --serve 127.0.0.1:$port --threads 1 --shutdown-grace $GRACE --queue 4
              --parallel 1)
  rm -f "$T"/*.sse "$T"/*.json "$T/serve.err"
  if [ "$np" = 1 ]; then
    OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 120 "$HS" "${args[@]}" > "$T/serve.out" 2> "$T/serve.err" &
  else
    timeout -k 5 120 mpirun $MPI_FLAGS -np "$np" "$HS" "${args[@]}" > "$T/serve.out" 2> "$T/serve.err" &
  fi
  SERVER=$!
  URL=$url serve_wait serve 200
  local pid=$SPID
  [ -n "$pid" ] || { cat "$T/serve.err"; fail "np=$np: no pid in the serving line"; }
  # the running stream: long enough to be cut
  curl -s -N -d '{"prompt":"hello","max_tokens":4000,"stream":true}' "$url/v1/completions" > "$T/run.sse" &
  local c1=$!
  for _ in $(seq 300); do grep -q '^data: {' "$T/run.sse" 2>/dev/null && break; sleep 0.1; done
  grep -q '^data: {' "$T/run.sse" || fail "np=$np: the running stream sent nothing"
  # two queued behind it
  curl -s -N -d '{"prompt":"hi","max_tokens":8,"stream":true}' "$url/v1/completions" > "$T/q1.sse" &
  local c2=$!
  curl -s -o "$T/q2.json" -D "$T/q2.head" -w '%{http_code}' -d '{"prompt":"hi","max_tokens":8}' \
    "$url/v1/completions" > "$T/q2.code" &
  local c3=$!
  for _ in $(seq 100); do
    curl -s "$url/health" | grep -q '"queued":2' && break
    sleep 0.1
  done
  curl -s "$url/health" | grep -q '"queued":2' || fail "np=$np: the two requests never queued"
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  kill -$sig "$pid"
  wait $SERVER || rc=$?
  t1=$(date +%s.%N)
  SERVER=
  wait $c1 $c2 $c3 || true
  python3 -c "import sys; sys.exit(0 if $t1 - $t0 < $GRACE + $EXIT_SLACK else 1)" \
    || { cat "$T/serve.err"; fail "np=$np $sig: exit took $(python3 -c "print(round($t1 - $t0, 2))") s, more than $GRACE + $EXIT_SLACK s"; }
  local drained
  drained=$(sed -n 's/^headsplit: server stopped after \([0-9.]*\) s of draining$/\1/p' "$T/serve.err")
  [ -n "$drained" ] && python3 -c "import sys; sys.exit(0 if $drained < $GRACE + 1 else 1)" \
    || { cat "$T/serve.err"; fail "np=$np $sig: the drain took '$drained' s, more than $GRACE + 1 s"; }
  [ $rc = 0 ] || { cat "$T/serve.err"; fail "np=$np $sig: exit status $rc"; }
  # the running client: a last chunk with a finish_reason, then [DONE]
  tail -n 4 "$T/run.sse" | grep -q '"finish_reason":"length"' \
    || { tail -n 4 "$T/run.sse"; fail "np=$np $sig: the running stream got no finish_reason"; }
  [ "$(grep -v '^$' "$T/run.sse" | tail -n 1)" = "data: [DONE]" ] \
    || { tail -n 3 "$T/run.sse"; fail "np=$np $sig: the running stream did not end with [DONE]"; }
  # the queued: an error event and [DONE]; a 503 with Retry-After
  grep -q '^data: {"error":{"message":"the server is shutting down' "$T/q1.sse" \
    && [ "$(grep -v '^$' "$T/q1.sse" | tail -n 1)" = "data: [DONE]" ] \
    || { cat "$T/q1.sse"; fail "np=$np $sig: the queued stream got no error event and [DONE]"; }
  [ "$(cat "$T/q2.code")" = 503 ] && grep -q "shutting down" "$T/q2.json" \
    || { cat "$T/q2.code" "$T/q2.json"; fail "np=$np $sig: the queued request got no 503"; }
  grep -qi '^Retry-After:' "$T/q2.head" || { cat "$T/q2.head"; fail "np=$np: no Retry-After"; }
  grep -q "cut by the shutdown" "$T/serve.err" && grep -q "2 queued requests refused" "$T/serve.err" \
    || { cat "$T/serve.err"; fail "np=$np $sig: the drain was not logged"; }
  ! curl -s -m 2 "$url/health" > /dev/null 2>&1 || fail "np=$np: something still answers on $url"
  echo "ok: np=$np SIG$sig: drained in $drained s, exit in $(python3 -c "print(round($t1 - $t0, 2))") s (grace $GRACE s)"
}

drain 3 TERM
drain 1 INT
echo "PASS: serve_drain (3-rank SIGTERM and 1-process SIGINT drain within the grace period)"
