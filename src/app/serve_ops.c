/* serve_ops.c: the operator's endpoints of --serve.
 *   /metrics     Prometheus text: requests by outcome, tokens, prompt and generation tokens
 *                per second, queue depth and capacity, busy slots and slots (--parallel),
 *                the passes the slots shared
 *   /tokenize    {"content": TEXT, "add_special": false, "with_pieces": false} ->
 *                {"tokens": [ID, ...]} or {"tokens": [{"id": ID, "piece": TEXT}, ...]}
 *   /detokenize  {"tokens": [ID, ...]} -> {"content": TEXT}
 * as llama-server has them (its handle_tokenize/handle_detokenize): special-token text
 * becomes its token unless --no-special, BOS only with add_special, a piece that is not
 * whole UTF-8 as an array of its bytes. */
#include "serve.h"

#include "util.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t len, cap;
} Text;

static void text_printf(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_printf(Text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)(n > 0 ? n : 0) + 64;
        t->s = xrealloc(t->s, t->cap);
    }
}

/* One metric: its HELP and TYPE lines, then the sample. */
static void metric(Text *t, const char *name, const char *type, const char *help, double v)
{
    text_printf(t, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

char *serve_metrics_text(Server *sv)
{
    pthread_mutex_lock(&sv->mu);
    ServeStats st = sv->st;
    int queued = sv->n_queued, busy = sv->n_running, draining = sv->draining;
    pthread_mutex_unlock(&sv->mu);
    Text t = {xmalloc(4096), 0, 4096};
    t.s[0] = '\0';
    metric(&t, "headsplit_http_requests_total", "counter", "HTTP requests received.",
           (double)st.http);
    text_printf(&t, "# HELP headsplit_requests_total Completion requests by outcome: ok, "
                "failed, cancelled (client gone), cut (by the shutdown), bad_request (4xx), "
                "queue_full and shutdown (503).\n# TYPE headsplit_requests_total counter\n");
    const struct {
        const char *outcome;
        unsigned long n;
    } outcomes[] = {{"ok", st.ok},   {"failed", st.failed},   {"cancelled", st.cancelled},
                    {"cut", st.cut}, {"bad_request", st.bad}, {"queue_full", st.full},
                    {"shutdown", st.shutdown}};
    for (size_t i = 0; i < sizeof outcomes / sizeof outcomes[0]; i++)
        text_printf(&t, "headsplit_requests_total{outcome=\"%s\"} %lu\n", outcomes[i].outcome,
                    outcomes[i].n);
    metric(&t, "headsplit_prompt_tokens_total", "counter",
           "Prompt tokens processed (a prefix already in the KV caches is not counted).",
           (double)st.prompt_tokens);
    metric(&t, "headsplit_generated_tokens_total", "counter", "Tokens generated.",
           (double)st.gen_tokens);
    metric(&t, "headsplit_prompt_seconds_total", "counter", "Seconds spent on prompts.",
           st.prompt_s);
    metric(&t, "headsplit_generation_seconds_total", "counter",
           "Seconds spent generating.", st.gen_s);
    metric(&t, "headsplit_prompt_tokens_per_second", "gauge",
           "Prompt throughput over the server's life.",
           st.prompt_s > 0 ? (double)st.prompt_tokens / st.prompt_s : 0);
    metric(&t, "headsplit_generation_tokens_per_second", "gauge",
           "Generation throughput over the server's life.",
           st.gen_s > 0 ? (double)st.gen_tokens / st.gen_s : 0);
    metric(&t, "headsplit_queue_depth", "gauge", "Requests waiting for a slot.",
           (double)queued);
    metric(&t, "headsplit_queue_capacity", "gauge", "Requests that may wait (--queue).",
           (double)sv->queue_max);
    metric(&t, "headsplit_busy_slots", "gauge", "Slots generating now.", (double)busy);
    metric(&t, "headsplit_slots", "gauge", "Slots (generations at a time, --parallel).",
           (double)sv->n_slots);
    if (sv->batcher) {
        BatchStats b;
        batcher_stats(sv->batcher, &b);
        metric(&t, "headsplit_passes_total", "counter",
               "Forward passes the slots ran (each carries rows of one or more sequences).",
               (double)b.passes);
        metric(&t, "headsplit_shared_passes_total", "counter",
               "Passes that carried rows of several sequences.", (double)b.shared);
        metric(&t, "headsplit_pass_rows_total", "counter", "Rows the passes carried.",
               (double)b.rows);
        metric(&t, "headsplit_pass_sequences_total", "counter",
               "Sequences the passes carried, summed over the passes.", (double)b.seq_rows);
        metric(&t, "headsplit_pass_sequences_max", "gauge",
               "The most sequences one pass carried.", (double)b.max_seqs);
        metric(&t, "headsplit_pass_groups", "gauge", "Groups of slots whose passes may be in "
               "flight at once (pipelined decode on a layer chain; 1: one pass at a time).",
               (double)(b.groups ? b.groups : 1));
        metric(&t, "headsplit_passes_in_flight_max", "gauge",
               "The most passes of different groups in flight at once.",
               (double)(b.in_flight_max ? b.in_flight_max : b.passes ? 1 : 0));
    }
    metric(&t, "headsplit_replicas", "gauge", "Copies of the model's layers, each on its "
           "own workers (--replicas; 1: one).", (double)sv->copies);
    if (sv->copies > 1) {
        text_printf(&t, "# HELP headsplit_replica_calls_total Calls of the slots' rows each "
                    "copy ran, by copy and its workers.\n# TYPE headsplit_replica_calls_total "
                    "counter\n");
        for (int k = 0; k < sv->copies; k++) {
            int first;
            const int n = plan_copy_workers(sv->run->cm.size - 1, sv->copies, k, &first);
            text_printf(&t, "headsplit_replica_calls_total{copy=\"%d\",workers=\"%d-%d\"} "
                        "%ld\n", k, first, first + n - 1,
                        dist_replicas_calls(&sv->layers, k));
        }
    }
    metric(&t, "headsplit_draining", "gauge", "1 once a signal has begun the shutdown.",
           (double)draining);
    return t.s;
}

/* 1 when s[0..n) is whole UTF-8 (a piece that is not goes out as its bytes). */
static int utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t m = 1; m < k; m++)
            if ((s[i + m] & 0xC0) != 0x80)
                return 0;
        i += k;
    }
    return 1;
}

/* A copy of s with every byte that is not part of whole UTF-8 replaced by U+FFFD (tokens
 * that end inside a character). */
static char *utf8_clean(const char *s)
{
    size_t n = strlen(s), o = 0;
    char *out = xmalloc(n * 3 + 1);
    for (size_t i = 0; i < n;) {
        size_t k = 1;
        while (k <= 4 && i + k <= n && !utf8_valid((const unsigned char *)s + i, k))
            k++;
        if (k <= 4 && i + k <= n) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

/* A boolean field: 0/1, the default when absent, -1 with e. */
static int field_bool(json_t *req, const char *key, int def, ServeError *e)
{
    json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v))
        return def;
    if (!json_is_boolean(v)) {
        serve_error(e, 400, "invalid_request_error", "'%s' must be true or false", key);
        e->param = key;
        return -1;
    }
    return json_is_true(v);
}

/* An array of token ids in 0..vocab-1 into *ids (malloc'ed): 0, or -1 with e naming it. */
static int token_ids(Server *sv, json_t *a, const char *key, int **ids, size_t *n,
                     ServeError *e)
{
    int vocab = tokenizer_vocab_size(sv->run->tok);
    *n = json_array_size(a);
    *ids = xmalloc((*n + 1) * sizeof(int));
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= vocab) {
            free(*ids);
            *ids = NULL;
            serve_error(e, 400, "invalid_request_error",
                        "'%s'[%zu] is not a token id of 0..%d", key, i, vocab - 1);
            e->param = key;
            return -1;
        }
        (*ids)[i] = (int)json_integer_value(v);
    }
    return 0;
}

/* Appends the tokens of text (BOS first only when bos) to *all. */
static int tokenize_text(Server *sv, const char *text, size_t len, int bos, int **all,
                         size_t *n_all, size_t *cap, ServeError *e)
{
    const Run *run = sv->run;
    int *ids = NULL;
    size_t n = 0;
    char err[256] = "";
    int rc = run->o.no_special ? tokenizer_encode(run->tok, text, len, &ids, &n, err, sizeof err)
                               : tokenizer_encode_special(run->tok, text, len, &ids, &n, err,
                                                          sizeof err);
    if (rc < 0) {
        serve_error(e, 400, "invalid_request_error", "%s", err);
        e->param = "content";
        return -1;
    }
    size_t skip = !bos && sv->add_bos && n > 0 && ids[0] == tokenizer_bos(run->tok);
    if (*n_all + n > *cap) {
        *cap = (*n_all + n) * 2 + 16;
        *all = xrealloc(*all, *cap * sizeof(int));
    }
    memcpy(*all + *n_all, ids + skip, (n - skip) * sizeof(int));
    *n_all += n - skip;
    free(ids);
    return 0;
}

int serve_tokenize(Server *sv, json_t *req, json_t **out, ServeError *e)
{
    int add_special = field_bool(req, "add_special", 0, e);
    int with_pieces = field_bool(req, "with_pieces", 0, e);
    if (add_special < 0 || with_pieces < 0)
        return -1;
    json_t *content = json_object_get(req, "content");
    int *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    if (json_is_string(content)) {
        rc = tokenize_text(sv, json_string_value(content), json_string_length(content),
                           add_special, &ids, &n, &cap, e);
    } else if (json_is_array(content)) {
        /* llama-server's mixed prompt: strings and token ids; BOS only before the first */
        size_t i;
        json_t *v;
        json_array_foreach(content, i, v) {
            if (json_is_string(v)) {
                rc = tokenize_text(sv, json_string_value(v), json_string_length(v),
                                   add_special && i == 0, &ids, &n, &cap, e);
            } else {
                int *one;
                size_t k;
                json_t *a = json_pack("[O]", v);
                rc = token_ids(sv, a, "content", &one, &k, e);
                json_decref(a);
                if (rc == 0) {
                    if (n + 1 > cap)
                        ids = xrealloc(ids, (cap = cap * 2 + 16) * sizeof(int));
                    ids[n++] = one[0];
                    free(one);
                }
            }
            if (rc < 0)
                break;
        }
    } else if (content && !json_is_null(content)) {
        serve_error(e, 400, "invalid_request_error",
                    "'content' must be a string or an array of strings and token ids");
        e->param = "content";
        rc = -1;
    }
    if (rc < 0) {
        free(ids);
        return -1;
    }
    json_t *tokens = json_array();
    char piece[512];
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
            json_array_append_new(tokens, json_integer(ids[i]));
            continue;
        }
        size_t k = tokenizer_decode_token(sv->run->tok, i ? ids[i - 1] : -1, ids[i], piece,
                                          sizeof piece);
        json_t *p;
        if (utf8_valid((const unsigned char *)piece, k)) {
            p = json_stringn(piece, k);
        } else {
            p = json_array();
            for (size_t b = 0; b < k; b++)
                json_array_append_new(p, json_integer((unsigned char)piece[b]));
        }
        json_array_append_new(tokens, json_pack("{s:i,s:o}", "id", ids[i], "piece", p));
    }
    free(ids);
    *out = json_pack("{s:o}", "tokens", tokens);
    return 0;
}

int serve_detokenize(Server *sv, json_t *req, json_t **out, ServeError *e)
{
    json_t *tokens = json_object_get(req, "tokens");
    if (!tokens || json_is_null(tokens)) {
        *out = json_pack("{s:s}", "content", "");
        return 0;
    }
    if (!json_is_array(tokens)) {
        serve_error(e, 400, "invalid_request_error", "'tokens' must be an array of token ids");
        e->param = "tokens";
        return -1;
    }
    int *ids;
    size_t n;
    if (token_ids(sv, tokens, "tokens", &ids, &n, e) < 0)
        return -1;
    char *text = tokenizer_decode(sv->run->tok, ids, n);
    free(ids);
    char *clean = utf8_clean(text ? text : "");
    free(text);
    *out = json_pack("{s:s}", "content", clean);
    free(clean);
    return 0;
}
