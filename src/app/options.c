/* options.c: headsplit's command line: the usage text, parsing with a clear error naming the
 * option, and the options' JSON form for the metrics. */
#include "headsplit.h"

#include "argparse.h"
#include "chat.h"
#include "quant.h"
#include "draft.h"
#include "util.h"
#include "version.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>


void options_usage(FILE *out)
{
    fprintf(out,
        "usage: mpirun -np N headsplit --model M.h5 [options]\n"
        "  -m, --model FILE      model in HeadSplit HDF5 format (headsplit-convert)\n"
        "  -p, --prompt TEXT     prompt (default empty)\n"
        "  --steps N             positions to run, prompt included (default 256)\n"
        "  --partition layer|head|slice|auto  how the model is split over workers (default head):\n"
        "                        layer = whole layers (EdgeShard-style blocks), head = heads\n"
        "                        spread, FFN whole; slice = heads + FFN slices on every worker;\n"
        "                        auto = the fastest predicted from measured speeds and RTTs\n"
        "  --placement greedy|spread|roundrobin|random|layer|waterfill|dp|exact (default\n"
        "                        greedy); spread: FFN as greedy, heads over the workers;\n"
        "                        waterfill: SLICE layers, parts and FFN columns in proportion\n"
        "                        to speed within the memory budgets; dp: whole\n"
        "                        layers in contiguous blocks by dynamic programming, exact:\n"
        "                        head-level branch and bound (3-6 workers), both over the\n"
        "                        simulator's cost model of the measured cluster\n"
        "  --show-placement      print the placement table\n"
        "  --wait sleep|spin     how ranks wait for messages (default sleep)\n"
        "  --mem-budget SIZE     memory budget per worker, e.g. 1.5G (default: the emulated\n"
        "                        device's, HEADSPLIT_DEVICE_MEM_BYTES, else none)\n"
        "  --devices FILE        per-worker budgets and speeds: lines 'RANK mem=SIZE speed=X'\n"
        "  --replace-threshold F re-place when a worker passes F of its budget (default 0.85)\n"
        "  --assume-rtt MS       plan for this RTT between all ranks instead of the measured\n"
        "                        one (deadlines still use the measurement)\n"
        "  --static              keep the start-up placement (exceeding a budget ends the run)\n"
        "  --matvec own|blas     matrix-vector kernel (default own)\n"
        "  --f32-order avx512|avx2  the order of the fp32 sums that follow llama.cpp (dot\n"
        "                        products, attention, softmax): its AVX-512 build's 16-lane\n"
        "                        vectors (default) or its AVX2 build's 8-lane ones, to\n"
        "                        match the logits of that build bit for bit\n"
        "  --emulate-link SPEC   delay every message as a link would: rtt=10ms,jitter=2ms,bw=200mbit\n"
        "                        (also medium=shared|switched, relay=ap|none, and the presets\n"
        "                        wifi and ethernet, e.g. wifi,rtt=20ms)\n"
        "  --wire f32|f16|q8     activations between ranks (SLICE partial sums, layer inputs,\n"
        "                        results to the controller): f32 (default, exact), IEEE half\n"
        "                        (half the bytes) or Q8_0 blocks (34 bytes per 32); tokens may\n"
        "                        differ\n"
        );
    fprintf(out,
        "  --cache-type f32|f16|q8_0  the KV caches' rows on every rank: f32 (default,\n"
        "                        exact), IEEE half (half the bytes) or Q8_0 blocks of 32\n"
        "                        (34 bytes per 32 values, 0.27 of f32; the head size must be\n"
        "                        a multiple of 32); placement and budgets count the stored\n"
        "                        bytes; attention reads them back dequantized, so logits\n"
        "                        differ from f32 (README: measured bounds), tokens may too\n"
        "  --exchange auto|all|reduce|rsag|exact  SLICE partial sums: all-to-all, to one member\n"
        "                        and back, or reduce-scatter/all-gather; exact: no partial\n"
        "                        sums, wo and w_down by rows and four all-gathers per layer,\n"
        "                        logits bit-identical to -np 1 (not with --wire f16|q8).\n"
        "                        Default auto: exact for quantized or half weights (whose\n"
        "                        rounded activations would magnify the sums' order), else\n"
        "                        the pattern the cost model predicts fastest\n"
        "  --lm-head split|controller  where the last layer is sliced, its members compute the\n"
        "                        final norm and LM head by vocabulary rows and send the\n"
        "                        controller logits (split, the default; exact) or the\n"
        "                        controller does (controller)\n"
        "  --emulate-slowdown K  compute as a device K times slower than this\n"
        "                        host's core: each stretch of work lasts K x its CPU time\n"
        "                        (default each rank's HEADSPLIT_DEVICE_SLOWDOWN, set by\n"
        "                        scripts/emulate-device)\n"
        "  --link-matrix FILE    per-pair links: lines 'SRC DST rtt=..,jitter=..,bw=..' (* = any)\n"
        "  --rtt-pings N         ping-pongs per rank pair at start-up (default 5)\n"
        "  --timeout SECONDS     end the run when a peer sends nothing this long (default 10:\n"
        "                        workers allow 10%% + 0.2 s more, the controller 25%% + 0.5 s)\n"
        "  --inject-stall R:P:S  test aid: delay rank R's messages at position P by S seconds\n");
    fprintf(out,
        "  --speculate auto|all|none      inter-layer speculation (default none): auto follows\n"
        "                        the profile's decision table, all tries every transition\n"
        "  --tolerance T         keep speculative attention when ||FFN(Z)||/||Z|| < T (0.05);\n"
        "                        0 is bit-identical to exact execution\n"
        "  --min-acceptance A    auto: speculate where profiled acceptance >= A (0.7)\n"
        "  --adaptive            switch transitions on/off from the acceptance observed\n"
        "  --profile FILE        speculation profile (default MODEL.profile.json)\n"
        "  -v, --verbose         debug log (each speculation decision)\n"
        "  --metrics FILE        write one JSON object of results and measurements\n"
        "  --logits-out FILE     write raw float32 logits of every position\n"
        "  --transcript FILE     write prompt and token ids as they are produced (flushed)\n"
        "  --resume FILE         continue from a transcript (same text as an uninterrupted run)\n"
        "  --inject-kill R:P     test aid: rank R kills itself at position P\n"
        "  --quiet               do not stream the text\n"
        "  -h, --help\n"
        "Options are spelt in full (no abbreviations).  llama.cpp's names where they mean\n"
        "the same: -m -p -f -n -c -t -s -b -ub -md -cnv, --conversation, --model-draft,\n"
        "--ubatch-size, --batch-size, --temp, --file, --predict, -np/--parallel (--serve's\n"
        "slots; the number of ranks is mpirun's -np).\n");
    fprintf(out, "prompts, sampling, chat and server:\n"
        "  -f, --prompt-file FILE  prompt from a file (- : standard input)\n"
        "  --no-special          encode special-token text such as </s> as plain text\n"
        "  -n, --n-predict N     new tokens to generate at most (prompt not counted)\n"
        "  -c, --ctx-size N      KV-cache positions (default: the model's context with -n,\n"
        "                        --chat or --serve, else --steps)\n"
        "  --top-k K             keep the K most likely tokens (default 0 = off)\n"
        "  --min-p P             drop tokens below P x the most likely one's probability\n"
        "  --repeat-penalty F    llama.cpp's penalty on recent tokens (default 1 = off)\n"
        "  --repeat-last-n N     tokens the penalty looks back over (default 64)\n"
        "  --stop STRING         end the reply before STRING (repeatable)\n"
        "  -cnv, --chat          multi-turn chat at the terminal (/exit or end of input ends\n"
        "                        it; /reset, /help; Ctrl-C stops a reply; a full context\n"
        "                        drops the oldest turns)\n"
        "  --chat-template NAME  zephyr|tinyllama|llama2|llama3|chatml|phi3|gemma (default:\n"
        "                        recognised from the template stored with the model)\n"
        "  --system TEXT         system message of --chat and of --prompt with a template\n"
        "  --serve ADDR:PORT     OpenAI-compatible HTTP server on the controller\n"
        "                        (/v1/chat/completions, /v1/completions, /v1/models, /health)\n"
        "  --api-key KEY         Bearer key of --serve (required unless ADDR is 127.0.0.1)\n"
        "  -t, --threads N       kernel threads per rank (default: the cores the rank may use)\n"
        "  --version             print the revision, build options and SIMD path\n"
        "  --temperature T       0 = greedy, lowest id on ties (default 0)\n"
        "  --top-p P             nucleus sampling mass (default 1 = off)\n"
        "  -s, --seed N          sampling and random-placement seed (default 42)\n"
        "  --max-body BYTES      --serve: largest request body (default 1048576)\n"
        "  --shutdown-grace S    --serve: on SIGTERM/SIGINT a running reply may take S more\n"
        "                        seconds before it is cut (default 5)\n"
        "  --queue N             --serve: requests that may wait; more get 503 (default 64)\n"
        "  -np, --parallel N     --serve: slots, requests generated at once (default 4): their\n"
        "                        rows share every pass, on one process or on several ranks\n"
        "                        (every worker keeps N KV caches: N x --ctx-size positions)\n"
        "  --replicas K          K copies of the model's layers, each on its own group of\n"
        "                        workers (layer-wise within it; default 1); --serve's slots\n"
        "                        are spread over the copies, which decode at once (each\n"
        "                        worker keeps its copy's share of the KV caches); --partition\n"
        "                        auto with --parallel > 1 chooses the copies itself\n"
        "  --alias NAME          --serve: the model id (default: the model file's name)\n"
        "  --api-key-file FILE   --serve: the Bearer key from FILE's first line\n"
        "                        (a --serve request without a temperature samples at\n"
        "                        --temperature when given, else at 0.8 as llama-server)\n");
    fprintf(out, "several positions per pass:\n"
        "  -b, --batch N         prompt positions per pass (default 64; 1: one at a time)\n"
        "  -ub, --ubatch N|auto  rows per pass at most (0: a whole --batch); a layer-wise\n"
        "                        chain keeps one pass per stage in flight (default auto:\n"
        "                        there, a prompt chunk in one pass per stage, at least 16 rows)\n"
        "  -md, --draft FILE     speculative decoding: FILE, a small model with the same\n"
        "                        tokenizer, drafts tokens on the controller that the model\n"
        "                        verifies several at a time (greedy output is unchanged)\n"
        "  --draft-tokens K|auto tokens drafted per round, 1..8 (default 4); auto adapts K\n"
        "                        to the observed acceptance and the draft's and passes' times\n"
        "  --draft-rank R        where the draft's layers run: 0, the controller (default), or\n"
        "                        worker R (its head stays on the controller; each draft\n"
        "                        pass is then a round trip to R)\n");
}

enum { O_MODEL = 256, O_PROMPT, O_STEPS, O_TEMP, O_TOPP, O_SEED, O_METRICS, O_PART, O_PLACE,
   O_SHOW, O_WAIT, O_BUDGET, O_MATVEC, O_LOGITS, O_QUIET, O_HELP, O_TRANSCRIPT,
   O_EMU, O_MATRIX, O_PINGS, O_TIMEOUT, O_STALL, O_SPEC, O_TOL, O_MINACC, O_ADAPT,
   O_PROFILE, O_VERBOSE, O_RESUME, O_KILL, O_DEVICES, O_STATIC, O_THRESH,
   O_ASSUME_RTT, O_SLOWDOWN, O_WIRE, O_LMHEAD, O_PFILE, O_NPRED, O_CTX, O_TOPK, O_MINP,
   O_REPPEN, O_REPN, O_STOP, O_NOSPECIAL, O_CHATTPL, O_CHAT, O_SERVE, O_APIKEY, O_SYSTEM,
   O_THREADS, O_VERSION, O_MAXBODY, O_EXCHANGE, O_BATCH, O_UBATCH, O_DRAFT, O_DRAFT_TOKENS,
   O_DRAFT_RANK, O_GRACE, O_QUEUE, O_ALIAS, O_KEYFILE, O_PARALLEL, O_CACHE, O_F32ORDER, O_REPLICAS };

static const struct option longopts[] = {
    {"model", required_argument, 0, O_MODEL}, {"prompt", required_argument, 0, O_PROMPT},
    {"steps", required_argument, 0, O_STEPS}, {"temperature", required_argument, 0, O_TEMP},
    {"top-p", required_argument, 0, O_TOPP}, {"seed", required_argument, 0, O_SEED},
    {"metrics", required_argument, 0, O_METRICS},
    {"partition", required_argument, 0, O_PART},
    {"placement", required_argument, 0, O_PLACE},
    {"show-placement", no_argument, 0, O_SHOW}, {"wait", required_argument, 0, O_WAIT},
    {"mem-budget", required_argument, 0, O_BUDGET},
    {"matvec", required_argument, 0, O_MATVEC},
    {"f32-order", required_argument, 0, O_F32ORDER},
    {"logits-out", required_argument, 0, O_LOGITS},
    {"transcript", required_argument, 0, O_TRANSCRIPT},
    {"emulate-link", required_argument, 0, O_EMU},
    {"link-matrix", required_argument, 0, O_MATRIX},
    {"rtt-pings", required_argument, 0, O_PINGS},
    {"timeout", required_argument, 0, O_TIMEOUT},
    {"inject-stall", required_argument, 0, O_STALL},
    {"speculate", required_argument, 0, O_SPEC}, {"tolerance", required_argument, 0, O_TOL},
    {"min-acceptance", required_argument, 0, O_MINACC},
    {"adaptive", no_argument, 0, O_ADAPT}, {"profile", required_argument, 0, O_PROFILE},
    {"verbose", no_argument, 0, O_VERBOSE},
    {"resume", required_argument, 0, O_RESUME},
    {"inject-kill", required_argument, 0, O_KILL},
    {"devices", required_argument, 0, O_DEVICES}, {"static", no_argument, 0, O_STATIC},
    {"replace-threshold", required_argument, 0, O_THRESH},
    {"assume-rtt", required_argument, 0, O_ASSUME_RTT},
    {"emulate-slowdown", required_argument, 0, O_SLOWDOWN},
    {"cache-type", required_argument, 0, O_CACHE},
    {"wire", required_argument, 0, O_WIRE}, {"lm-head", required_argument, 0, O_LMHEAD},
    {"prompt-file", required_argument, 0, O_PFILE},
    {"n-predict", required_argument, 0, O_NPRED}, {"ctx-size", required_argument, 0, O_CTX},
    {"top-k", required_argument, 0, O_TOPK}, {"min-p", required_argument, 0, O_MINP},
    {"repeat-penalty", required_argument, 0, O_REPPEN},
    {"repeat-last-n", required_argument, 0, O_REPN}, {"stop", required_argument, 0, O_STOP},
    {"no-special", no_argument, 0, O_NOSPECIAL},
    {"chat-template", required_argument, 0, O_CHATTPL}, {"chat", no_argument, 0, O_CHAT},
    {"serve", required_argument, 0, O_SERVE}, {"api-key", required_argument, 0, O_APIKEY},
    {"system", required_argument, 0, O_SYSTEM}, {"threads", required_argument, 0, O_THREADS},
    {"max-body", required_argument, 0, O_MAXBODY},
    {"version", no_argument, 0, O_VERSION},
    {"exchange", required_argument, 0, O_EXCHANGE},
    {"batch", required_argument, 0, O_BATCH}, {"ubatch", required_argument, 0, O_UBATCH}, {"draft", required_argument, 0, O_DRAFT},
    {"draft-tokens", required_argument, 0, O_DRAFT_TOKENS},
    {"draft-rank", required_argument, 0, O_DRAFT_RANK},
    {"shutdown-grace", required_argument, 0, O_GRACE}, {"queue", required_argument, 0, O_QUEUE},
    {"alias", required_argument, 0, O_ALIAS}, {"api-key-file", required_argument, 0, O_KEYFILE},
    {"quiet", no_argument, 0, O_QUIET}, {"help", no_argument, 0, O_HELP},
    /* llama.cpp's long names where they mean the same as ours */
    {"conversation", no_argument, 0, O_CHAT}, {"model-draft", required_argument, 0, O_DRAFT},
    {"ubatch-size", required_argument, 0, O_UBATCH},
    {"batch-size", required_argument, 0, O_BATCH}, {"temp", required_argument, 0, O_TEMP},
    {"file", required_argument, 0, O_PFILE}, {"predict", required_argument, 0, O_NPRED},
    {"parallel", required_argument, 0, O_PARALLEL},
    {"replicas", required_argument, 0, O_REPLICAS},
    {0, 0, 0, 0}};

/* llama.cpp's short forms: each a whole word ("-np" is -np, never "-n p"), as llama.cpp
 * reads them; the long option of the same code says whether a value follows. */
static const ShortOption shortopts[] = {
    {"m", O_MODEL},   {"p", O_PROMPT}, {"f", O_PFILE},     {"n", O_NPRED},   {"c", O_CTX},
    {"t", O_THREADS}, {"s", O_SEED},   {"b", O_BATCH},     {"ub", O_UBATCH}, {"md", O_DRAFT},
    {"cnv", O_CHAT},  {"v", O_VERBOSE}, {"h", O_HELP},     {"np", O_PARALLEL},
    {0, 0}};

/* A count option's value in lo..hi: 0, or -1 with err naming the option. */
/* The partition --placement dp|exact places: whole layers (the layer DP), heads (the exact
 * search). */
static Partition solver_partition(PlacementKind k)
{
    return k == PLACEMENT_DP ? PARTITION_LAYER : PARTITION_HEAD;
}

static int parse_count(const char *opt, const char *arg, long lo, long hi, int *out, char *err,
                       size_t errlen)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (!arg[0] || *end || errno || v < lo || v > hi)
        return util_err(err, errlen, "%s: '%s' is not a count of %ld..%ld", opt, arg, lo, hi);
    *out = (int)v;
    return 0;
}

/* A float option's value in [lo, hi]: 0, or -1 with err naming the option. */
static int parse_float(const char *opt, const char *arg, float lo, float hi, float *out,
                       char *err, size_t errlen)
{
    char *end;
    errno = 0;
    float v = strtof(arg, &end);
    if (!arg[0] || *end || errno || !(v >= lo && v <= hi))
        return util_err(err, errlen, "%s: '%s' is not a number in %g..%g", opt, arg,
                        (double)lo, (double)hi);
    *out = v;
    return 0;
}

/* The front door's options (prompts, sampling, chat, server, threads): 0 taken, -1 with
 * err, 1 not one of these. */
static int parse_front(Options *o, int ch, const char *arg, char *err, size_t errlen)
{
    switch (ch) {
    case O_PFILE: o->prompt_file = arg; return 0;
    case O_NPRED: return parse_count("-n/--n-predict", arg, 1, 1 << 22, &o->n_predict, err, errlen);
    case O_CTX: return parse_count("--ctx-size", arg, 1, 1 << 22, &o->ctx_size, err, errlen);
    case O_TOPK: return parse_count("--top-k", arg, 0, 1 << 24, &o->top_k, err, errlen);
    case O_MINP: return parse_float("--min-p", arg, 0, 1, &o->min_p, err, errlen);
    case O_REPPEN:
        return parse_float("--repeat-penalty", arg, 0.01f, 100, &o->repeat_penalty, err, errlen);
    case O_REPN:
        return parse_count("--repeat-last-n", arg, 1, 1 << 22, &o->repeat_last_n, err, errlen);
    case O_STOP:
        if (!arg[0])
            return util_err(err, errlen, "--stop: the string is empty");
        if (o->n_stops == (int)(sizeof o->stops / sizeof o->stops[0]))
            return util_err(err, errlen, "--stop: at most %d stop strings",
                            (int)(sizeof o->stops / sizeof o->stops[0]));
        o->stops[o->n_stops++] = arg;
        return 0;
    case O_NOSPECIAL: o->no_special = 1; return 0;
    case O_CHATTPL: o->chat_template = arg; return 0;
    case O_CHAT: o->chat = 1; return 0;
    case O_SERVE: o->serve = arg; return 0;
    case O_APIKEY: o->api_key = arg; return 0;
    case O_SYSTEM: o->system_prompt = arg; return 0;
    case O_THREADS: return parse_count("--threads", arg, 1, 64, &o->threads, err, errlen);
    case O_BATCH: return parse_count("--batch", arg, 1, 4096, &o->batch, err, errlen);
    case O_UBATCH:
        if (strcmp(arg, "auto") == 0) {
            o->ubatch = DIST_UBATCH_AUTO;
            return 0;
        }
        return parse_count("--ubatch", arg, 0, 4096, &o->ubatch, err, errlen);
    case O_DRAFT:
        if (!arg[0])
            return util_err(err, errlen, "--draft: the file name is empty");
        o->draft = arg;
        return 0;
    case O_DRAFT_TOKENS:
        o->draft_tokens_set = 1;
        if (strcmp(arg, "auto") == 0) {
            o->draft_tokens = 0;
            return 0;
        }
        if (parse_count("--draft-tokens", arg, 1, DRAFT_K_MAX, &o->draft_tokens, err,
                        errlen) < 0)
            return util_err(err, errlen, "--draft-tokens: '%s' is not auto or a count of 1..%d",
                            arg, DRAFT_K_MAX);
        return 0;
    case O_DRAFT_RANK:
        return parse_count("--draft-rank", arg, 0, 1 << 20, &o->draft_rank, err, errlen);
    case O_MAXBODY: {
        int bytes = 0;
        if (parse_count("--max-body", arg, 16, 1 << 30, &bytes, err, errlen) < 0)
            return -1;
        o->max_body = bytes;
        return 0;
    }
    case O_GRACE: {
        float s = 0;
        if (parse_float("--shutdown-grace", arg, 0, 3600, &s, err, errlen) < 0)
            return -1;
        o->shutdown_grace = s;
        return 0;
    }
    case O_QUEUE: return parse_count("--queue", arg, 0, 1 << 20, &o->queue_max, err, errlen);
    case O_PARALLEL:
        return parse_count("--parallel", arg, 1, SERVE_SLOTS_MAX, &o->parallel, err, errlen);
    case O_REPLICAS:
        return parse_count("--replicas", arg, 1, 32, &o->replicas, err, errlen);
    case O_ALIAS:
        if (!arg[0])
            return util_err(err, errlen, "--alias: the name is empty");
        o->alias = arg;
        return 0;
    case O_KEYFILE: o->api_key_file = arg; return 0;
    default: return 1;
    }
}

/* Reads --prompt-file (or standard input) into o->prompt_buf. */
static int read_prompt_file(Options *o, char *err, size_t errlen)
{
    int from_stdin = strcmp(o->prompt_file, "-") == 0;
    FILE *f = from_stdin ? stdin : fopen(o->prompt_file, "rb");
    if (!f)
        return util_err(err, errlen, "--prompt-file: cannot open %s: %s", o->prompt_file,
                        strerror(errno));
    size_t len = 0, cap = 4096;
    char *buf = xmalloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap)
            buf = xrealloc(buf, cap *= 2);
        if (len > ((size_t)64 << 20)) {
            free(buf);
            if (!from_stdin)
                fclose(f);
            return util_err(err, errlen, "--prompt-file: %s is larger than 64 MiB",
                            o->prompt_file);
        }
    }
    int bad = ferror(f);
    if (!from_stdin)
        fclose(f);
    if (bad) {
        free(buf);
        return util_err(err, errlen, "--prompt-file: cannot read %s", o->prompt_file);
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        free(buf);
        return util_err(err, errlen, "--prompt-file: %s holds a NUL byte (not text)",
                        o->prompt_file);
    }
    o->prompt_buf = buf;
    o->prompt = buf;
    return 0;
}

void options_free(Options *o)
{
    free(o->prompt_buf);
    o->prompt_buf = NULL;
}

static void options_defaults(Options *o)
{
    memset(o, 0, sizeof *o);
    o->prompt = "";
    o->steps = 256;
    o->top_p = 1.0f;
    o->seed = 42;
    o->partition = PARTITION_HEAD;
    o->placement = PLACEMENT_GREEDY;
    o->su.rtt_pings = 5;
    o->su.timeout_s = 10.0;
    o->su.stall_rank = -1;
    o->su.kill_rank = -1;
    o->replace_threshold = 0.85;
    o->su.assume_rtt_ms = -1;
    o->speculate = "none";
    o->tolerance = 0.05f;
    o->min_acceptance = 0.7f;
    o->batch = 64;
    o->ubatch = DIST_UBATCH_AUTO;
    o->draft_tokens = 4;
    o->draft_rank = -1;
    o->shutdown_grace = 5;
    o->queue_max = 64;
}

/* The options of the generation, the placement and the kernels: 0 taken, -1 with err, 1 not
 * one of these. */
static int parse_generation(Options *o, int ch, const char *arg, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    switch (ch) {
    case O_MODEL: o->model = arg; break;
    case O_PROMPT: o->prompt = arg; break;
    case O_STEPS: {
        long v = strtol(arg, &end, 10);
        if (*end || errno || v < 1 || v > 1 << 22)
            return util_err(err, errlen, "--steps: '%s' is not a count of 1..4194304", arg);
        o->steps = (int)v;
        o->steps_set = 1;
        break;
    }
    case O_TEMP:
        o->temperature_set = 1;
        o->temperature = strtof(arg, &end);
        if (*end || errno || !(o->temperature >= 0 && o->temperature <= 100))
            return util_err(err, errlen, "--temperature: '%s' is not in 0..100", arg);
        break;
    case O_TOPP:
        o->top_p = strtof(arg, &end);
        if (*end || errno || !(o->top_p > 0 && o->top_p <= 1))
            return util_err(err, errlen, "--top-p: '%s' is not in (0, 1]", arg);
        break;
    case O_SEED:
        o->seed = strtoull(arg, &end, 10);
        if (*end || errno || arg[0] == '-')
            return util_err(err, errlen, "--seed: '%s' is not a non-negative integer", arg);
        break;
    case O_METRICS: o->metrics = arg; break;
    case O_LOGITS: o->logits_out = arg; break;
    case O_TRANSCRIPT: o->transcript = arg; break;
    case O_PART:
        o->partition_auto = strcmp(arg, "auto") == 0;
        if (!o->partition_auto && plan_parse_partition(arg, &o->partition) < 0)
            return util_err(err, errlen, "--partition: '%s' is not layer, head, slice or "
                            "auto", arg);
        o->partition_set = 1;
        break;
    case O_PLACE:
        if (plan_parse_placement(arg, &o->placement) < 0)
            return util_err(err, errlen, "--placement: '%s' is not greedy, spread, "
                            "roundrobin, random, layer, waterfill, dp or exact", arg);
        if (o->placement == PLACEMENT_DP || o->placement == PLACEMENT_EXACT)
            o->partition = solver_partition(o->placement);
        o->placement_set = 1;
        break;
    case O_SHOW: o->show_placement = 1; break;
    case O_WAIT:
        if (strcmp(arg, "sleep") == 0)
            o->wait_mode = WAIT_SLEEP;
        else if (strcmp(arg, "spin") == 0)
            o->wait_mode = WAIT_SPIN;
        else
            return util_err(err, errlen, "--wait: '%s' is not sleep or spin", arg);
        break;
    case O_BUDGET:
        if (util_parse_bytes(arg, &o->su.mem_budget) < 0 || o->su.mem_budget == 0)
            return util_err(err, errlen, "--mem-budget: '%s' is not a size such as 1.5G",
                            arg);
        break;
    case O_MATVEC:
        if (strcmp(arg, "own") == 0)
            o->matvec = MATVEC_OWN;
        else if (strcmp(arg, "blas") == 0)
            o->matvec = MATVEC_BLAS;
        else
            return util_err(err, errlen, "--matvec: '%s' is not own or blas", arg);
        break;
    case O_F32ORDER:
        if (kernels_parse_f32_order(arg, &o->f32_order) < 0)
            return util_err(err, errlen, "--f32-order: '%s' is not avx512 or avx2", arg);
        break;
    case O_QUIET: o->quiet = 1; break;
    default: return 1;
    }
    return 0;
}

/* The options of speculation, memory, links and the test aids: 0 taken, -1 with err, 1 not
 * one of these. */
static int parse_runtime(Options *o, int ch, const char *arg, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    switch (ch) {
    case O_SPEC:
        if (strcmp(arg, "auto") && strcmp(arg, "all") && strcmp(arg, "none"))
            return util_err(err, errlen, "--speculate: '%s' is not auto, all or none",
                            arg);
        o->speculate = arg;
        break;
    case O_TOL:
        o->tolerance = strtof(arg, &end);
        if (*end || errno || !(o->tolerance >= 0 && o->tolerance < 1e6))
            return util_err(err, errlen, "--tolerance: '%s' is not a number >= 0", arg);
        break;
    case O_MINACC:
        o->min_acceptance = strtof(arg, &end);
        if (*end || errno || !(o->min_acceptance >= 0 && o->min_acceptance <= 1))
            return util_err(err, errlen, "--min-acceptance: '%s' is not in 0..1", arg);
        break;
    case O_ADAPT: o->adaptive = 1; break;
    case O_PROFILE: o->profile = arg; break;
    case O_VERBOSE: o->verbose = 1; break;
    case O_RESUME: o->resume = arg; break;
    case O_DEVICES: o->su.devices_file = arg; break;
    case O_STATIC: o->static_plan = 1; break;
    case O_ASSUME_RTT:
        o->su.assume_rtt_ms = strtod(arg, &end);
        if (*end || errno || !(o->su.assume_rtt_ms >= 0 && o->su.assume_rtt_ms < 1e6))
            return util_err(err, errlen, "--assume-rtt: '%s' is not milliseconds >= 0",
                            arg);
        break;
    case O_WIRE:
        if (strcmp(arg, "f32") && strcmp(arg, "f16") && strcmp(arg, "q8"))
            return util_err(err, errlen, "--wire: '%s' is not f32, f16 or q8", arg);
        o->wire = !strcmp(arg, "f16")  ? WIRE_FORM_F16
                  : !strcmp(arg, "q8") ? WIRE_FORM_Q8
                                       : WIRE_FORM_F32;
        break;
    case O_CACHE:
        if (strcmp(arg, "f32") && strcmp(arg, "f16") && strcmp(arg, "q8_0"))
            return util_err(err, errlen, "--cache-type: '%s' is not f32, f16 or q8_0", arg);
        o->cache_type = !strcmp(arg, "f16") ? QTYPE_F16 : !strcmp(arg, "q8_0") ? QTYPE_Q8_0
                                                                                : QTYPE_F32;
        break;
    case O_EXCHANGE:
        if (plan_parse_exchange(arg, &o->exchange) < 0)
            return util_err(err, errlen,
                            "--exchange: '%s' is not auto, all, reduce, rsag or exact", arg);
        break;
    case O_LMHEAD:
        if (strcmp(arg, "split") && strcmp(arg, "controller"))
            return util_err(err, errlen, "--lm-head: '%s' is not split or controller",
                            arg);
        o->head_on_controller = strcmp(arg, "controller") == 0;
        break;
    case O_SLOWDOWN:
        o->su.slowdown = strtod(arg, &end);
        if (*end || errno || !(o->su.slowdown >= 1 && o->su.slowdown <= 1000))
            return util_err(err, errlen, "--emulate-slowdown: '%s' is not a factor from 1 "
                            "to 1000", arg);
        break;
    case O_THRESH:
        o->replace_threshold = strtod(arg, &end);
        if (*end || errno || !(o->replace_threshold > 0 && o->replace_threshold <= 1))
            return util_err(err, errlen, "--replace-threshold: '%s' is not in (0, 1]",
                            arg);
        break;
    case O_KILL:
        if (sscanf(arg, "%d:%d", &o->su.kill_rank, &o->su.kill_pos) != 2 || o->su.kill_rank < 1 ||
            o->su.kill_pos < 0)
            return util_err(err, errlen, "--inject-kill: '%s' is not WORKER_RANK:POS",
                            arg);
        break;
    case O_EMU: o->su.emulate_link = arg; break;
    case O_MATRIX: o->su.link_matrix = arg; break;
    case O_PINGS: {
        long v = strtol(arg, &end, 10);
        if (*end || errno || v < 1 || v > 1000)
            return util_err(err, errlen, "--rtt-pings: '%s' is not a count of 1..1000",
                            arg);
        o->su.rtt_pings = (int)v;
        break;
    }
    case O_TIMEOUT:
        o->su.timeout_s = strtod(arg, &end);
        if (*end || errno || !(o->su.timeout_s > 0 && o->su.timeout_s <= 86400))
            return util_err(err, errlen, "--timeout: '%s' is not a number of seconds",
                            arg);
        break;
    case O_STALL:
        if (sscanf(arg, "%d:%d:%lf", &o->su.stall_rank, &o->su.stall_pos, &o->su.stall_s) != 3 ||
            o->su.stall_rank < 0 || o->su.stall_pos < 0 || !(o->su.stall_s >= 0))
            return util_err(err, errlen, "--inject-stall: '%s' is not RANK:POS:SECONDS",
                            arg);
        break;
    default: return 1;
    }
    return 0;
}

int options_info_request(int argc, char **argv)
{
    char err[256];
    int i = 1, ch;
    const char *arg;
    while ((ch = argparse_next(longopts, shortopts, argc, argv, &i, &arg, err, sizeof err)) > 0)
        if (ch == O_HELP || ch == O_VERSION)
            return ch == O_HELP ? 1 : 2;
    return 0;
}

int options_parse(Options *o, int argc, char **argv, char *err, size_t errlen)
{
    options_defaults(o);
    int i = 1, ch;
    const char *arg;
    while ((ch = argparse_next(longopts, shortopts, argc, argv, &i, &arg, err, errlen)) > 0) {
        if (ch == O_HELP)
            return 1;
        if (ch == O_VERSION)
            return 2;
        int rc = parse_generation(o, ch, arg, err, errlen);
        if (rc == 1)
            rc = parse_runtime(o, ch, arg, err, errlen);
        if (rc == 1)
            rc = parse_front(o, ch, arg, err, errlen);
        if (rc < 0)
            return -1;
        if (rc == 1) /* in the table but parsed nowhere: a programming error */
            return util_err(err, errlen, "option code %d has no parser in options.c", ch);
    }
    if (ch < 0)
        return -1;
    if (i < argc)
        return util_err(err, errlen, "unexpected argument '%s' (see --help)", argv[i]);
    if (!o->model)
        return util_err(err, errlen, "--model is required (see --help)");
    if (o->chat && o->serve)
        return util_err(err, errlen, "--chat and --serve: choose one");
    if (o->parallel && !o->serve) /* mpirun's -np is the ranks */
        return util_err(err, errlen, "-np/--parallel N: --serve's slots (requests generated at "
                        "once), only with --serve; the number of ranks is mpirun's -np (mpirun "
                        "-np N headsplit ...)");
    if (o->parallel > 1 && o->draft)
        return util_err(err, errlen, "--parallel %d with --draft: a draft model decodes one "
                        "sequence at a time; give --parallel 1 or leave out --draft",
                        o->parallel);
    if (o->replicas > 1 && (o->draft || strcmp(o->speculate, "none") != 0))
        return util_err(err, errlen, "--replicas %d with %s: the copies decode separate "
                        "sequences; leave out --draft and --speculate", o->replicas,
                        o->draft ? "--draft" : "--speculate");
    if (o->replicas && o->partition_auto)
        return util_err(err, errlen, "--replicas %d with --partition auto: auto chooses the "
                        "copies itself when serving (--parallel > 1); give one of them",
                        o->replicas);
    if (o->api_key && o->api_key_file)
        return util_err(err, errlen, "--api-key and --api-key-file: choose one");
    if (o->serve && !o->api_key && !o->api_key_file && strncmp(o->serve, "127.0.0.1:", 10) != 0 &&
        strncmp(o->serve, "localhost:", 10) != 0 && strncmp(o->serve, "[::1]:", 6) != 0)
        return util_err(err, errlen, "--serve %s: binding beyond 127.0.0.1 requires --api-key "
                        "or --api-key-file", o->serve);
    if (o->prompt_file && read_prompt_file(o, err, errlen) < 0)
        return -1;
    if (o->chat_template) {
        ChatTemplate t;
        if (chat_template_parse(o->chat_template, &t, err, errlen) < 0)
            return -1;
    }
    if (!o->max_body)
        o->max_body = 1 << 20;
    if (!o->draft && (o->draft_rank >= 0 || o->draft_tokens_set))
        return util_err(err, errlen, "%s: there is no draft model (give --draft FILE)",
                        o->draft_rank >= 0 ? "--draft-rank" : "--draft-tokens");
    if (o->placement == PLACEMENT_DP || o->placement == PLACEMENT_EXACT) {
        /* the solvers choose their own partition */
        Partition want = solver_partition(o->placement);
        if (o->partition_auto || (o->partition_set && o->partition != want))
            return util_err(err, errlen, "--placement %s places %s; leave out --partition or "
                            "give --partition %s", plan_placement_name(o->placement),
                            want == PARTITION_LAYER ? "whole layers" : "heads",
                            plan_partition_name(want));
        o->partition = want;
    }
    if (o->exchange == EXCHANGE_EXACT && o->wire != WIRE_FORM_F32)
        return util_err(err, errlen, "--exchange exact sends whole values, never partial sums: "
                        "--wire %s would round them (leave out --wire or give --wire f32)",
                        o->wire == WIRE_FORM_Q8 ? "q8" : "f16");
    if (o->placement == PLACEMENT_LAYER)
        o->partition = PARTITION_LAYER;
    if (o->placement == PLACEMENT_WATERFILL)
        o->partition = PARTITION_SLICE;
    o->su.seed = o->seed; /* the emulated links' jitter draws */
    return 0;
}


json_t *options_json(const Options *o, int n_ranks)
{
    json_t *j = json_pack("{s:s,s:s,s:i,s:f,s:f,s:I,s:s,s:s,s:s,s:I,s:s,s:i,s:s}",
                     "model", o->model, "prompt", o->prompt, "steps", o->steps,
                     "temperature", (double)o->temperature, "top_p", (double)o->top_p,
                     "seed", (json_int_t)o->seed,
                     "partition", plan_partition_name(o->partition),
                     "placement", plan_placement_name(o->placement),
                     "wait", o->wait_mode == WAIT_SPIN ? "spin" : "sleep",
                     "mem_budget", (json_int_t)o->su.mem_budget,
                     "matvec", o->matvec == MATVEC_BLAS ? "blas" : "own",
                     "ranks", n_ranks, "git_revision", HEADSPLIT_GIT_REV);
    if (o->partition_auto) {
        json_object_set_new(j, "partition_chosen", json_string(plan_partition_name(o->partition)));
        json_object_set_new(j, "partition", json_string("auto"));
    }
    json_object_set_new(j, "speculate", json_string(o->speculate));
    json_object_set_new(j, "replicas", json_integer(o->replicas ? o->replicas : 1));
    json_object_set_new(j, "tolerance", json_real(o->tolerance));
    json_object_set_new(j, "min_acceptance", json_real(o->min_acceptance));
    json_object_set_new(j, "adaptive", json_boolean(o->adaptive));
    json_object_set_new(j, "emulate_link", o->su.emulate_link ? json_string(o->su.emulate_link)
                                                           : json_null());
    json_object_set_new(j, "link_matrix", o->su.link_matrix ? json_string(o->su.link_matrix)
                                                         : json_null());
    json_object_set_new(j, "timeout_s", json_real(o->su.timeout_s));
    json_object_set_new(j, "wire",
                        json_string(o->wire == WIRE_FORM_Q8 ? "q8" : o->wire == WIRE_FORM_F16 ? "f16" : "f32"));
    json_object_set_new(j, "exchange", json_string(plan_exchange_name(o->exchange)));
    json_object_set_new(j, "cache_type", json_string(quant_type_name((QType)o->cache_type)));
    json_object_set_new(j, "lm_head", json_string(o->head_on_controller ? "controller"
                                                                          : "split"));
    json_object_set_new(j, "n_predict", json_integer(o->n_predict));
    json_object_set_new(j, "ctx_size", json_integer(o->ctx_size));
    json_object_set_new(j, "top_k", json_integer(o->top_k));
    json_object_set_new(j, "min_p", json_real(o->min_p));
    json_object_set_new(j, "repeat_penalty", json_real(o->repeat_penalty > 0 ? o->repeat_penalty
                                                                             : 1.0));
    json_object_set_new(j, "repeat_last_n", json_integer(o->repeat_last_n ? o->repeat_last_n
                                                                          : 64));
    json_t *st = json_array();
    for (int i = 0; i < o->n_stops; i++)
        json_array_append_new(st, json_string(o->stops[i]));
    json_object_set_new(j, "stop", st);
    json_object_set_new(j, "special", json_boolean(!o->no_special));
    json_object_set_new(j, "chat_template", o->chat_template ? json_string(o->chat_template)
                                                             : json_null());
    json_object_set_new(j, "threads", json_integer(kernels_get_threads()));
    json_object_set_new(j, "f32_order", json_string(kernels_f32_order_name(o->f32_order)));
    json_object_set_new(j, "batch", json_integer(o->batch));
    json_object_set_new(j, "ubatch", o->ubatch == DIST_UBATCH_AUTO ? json_string("auto")
                                                                 : json_integer(o->ubatch));
    json_object_set_new(j, "draft", o->draft ? json_string(o->draft) : json_null());
    if (o->draft)
        json_object_set_new(j, "draft_tokens", o->draft_tokens ? json_integer(o->draft_tokens)
                                                               : json_string("auto"));
    json_object_set_new(j, "emulate_slowdown", o->su.slowdown > 0 ? json_real(o->su.slowdown)
                                                               : json_null());
    return j;
}


void options_version(FILE *out, const char *program) { app_version(out, program); }
