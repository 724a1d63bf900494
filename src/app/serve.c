/* serve.c: headsplit --serve ADDR:PORT, an OpenAI-compatible HTTP server on the controller
 * (libmicrohttpd for HTTP, jansson for JSON): /v1/chat/completions and /v1/completions with
 * and without streaming (server-sent events), /v1/models, /health.
 *
 * libmicrohttpd runs a thread per connection; those threads parse and check requests and put
 * jobs on a queue.  The controller's own thread (the only one that drives the engine) takes
 * one job at a time, so generations never overlap; the others wait their turn.  A streamed
 * reply is written as the tokens come; a client that goes away cancels its job at the next
 * token (or while it waits in the queue). */
#include "headsplit.h"

#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define SERVE_STOPS 8

typedef struct Job {
    /* the request, fixed before it is queued */
    int chat, stream;
    char *prompt;               /* the text to continue (chat: the rendered conversation) */
    GenOptions g;
    char *stops[SERVE_STOPS];
    const char *stop_ptrs[SERVE_STOPS + 1];
    char id[48];
    long long created;
    /* the reply, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;                  /* SSE bytes written for the client (streaming) */
    size_t out_len, out_cap, out_read;
    char pend[8];               /* an incomplete UTF-8 sequence held back */
    size_t n_pend;
    int started, done, failed, cancelled, refs;
    char *text;                 /* whole reply (non-streaming) */
    const char *finish;
    int n_prompt, n_gen;
    char err[512];
    struct Job *next;
} Job;

typedef struct {
    Run *run;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Job *head, *tail;
    int n_queued;
    long max_body;
} Server;

static volatile sig_atomic_t serve_quit;

static void serve_on_signal(int sig)
{
    (void)sig;
    serve_quit = 1;
}

/* ---- jobs ---- */

static void job_release(Job *j)
{
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    for (int i = 0; i < SERVE_STOPS; i++)
        free(j->stops[i]);
    free(j->prompt);
    free(j->out);
    free(j->text);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Appends bytes to the job's output (mu held). */
static void job_put(Job *j, const char *s, size_t n)
{
    if (j->out_len + n + 1 > j->out_cap) {
        j->out_cap = (j->out_len + n + 1) * 2;
        j->out = xrealloc(j->out, j->out_cap);
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    j->out[j->out_len] = '\0';
}

/* Appends one server-sent event carrying the JSON object o (consumed; mu held). */
static void job_put_event(Job *j, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        return;
    job_put(j, "data: ", 6);
    job_put(j, s, strlen(s));
    job_put(j, "\n\n", 2);
    free(s);
}

/* A streamed chunk: delta text (NULL: none) and finish reason (NULL: not finished). */
static json_t *chunk_json(const Job *j, const char *text, size_t n, const char *finish,
                          const char *model)
{
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (j->chat) {
        json_t *delta = json_object();
        if (!j->started)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (text)
            json_object_set_new(delta, "content", json_stringn(text, n));
        json_object_set_new(choice, "delta", delta);
    } else {
        json_object_set_new(choice, "text", json_stringn(text ? text : "", text ? n : 0));
    }
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *o = json_pack("{s:s,s:s,s:I,s:s}", "id", j->id, "object",
                          j->chat ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", model);
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(o, "choices", choices);
    return o;
}

/* Bytes of s[0..n) that form whole UTF-8 sequences (the rest waits for the next piece). */
static size_t utf8_whole(const unsigned char *s, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && (s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0)
        return back ? 0 : n;
    unsigned char c = s[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need == back + 1 || need == 1 ? n : i - 1;
}

typedef struct {
    Job *job;
    const char *model;
} TextSink;

/* generate_run's on_text: new text for the job; non-zero when the client has gone. */
static int job_on_text(void *ctx, const char *text, size_t n)
{
    TextSink *ts = ctx;
    Job *j = ts->job;
    pthread_mutex_lock(&j->mu);
    int cancelled = j->cancelled;
    if (!cancelled && j->stream) {
        /* whole UTF-8 characters only: a JSON string cannot hold half of one */
        char buf[1024];
        size_t m = 0;
        while (n > 0 || j->n_pend > 0) {
            size_t take = n < sizeof buf - j->n_pend ? n : sizeof buf - j->n_pend;
            memcpy(buf, j->pend, j->n_pend);
            memcpy(buf + j->n_pend, text, take);
            m = j->n_pend + take;
            text += take;
            n -= take;
            size_t whole = utf8_whole((const unsigned char *)buf, m);
            j->n_pend = m - whole;
            if (j->n_pend > sizeof j->pend)
                j->n_pend = 0; /* not UTF-8 at all: dropped */
            else
                memcpy(j->pend, buf + whole, j->n_pend);
            if (whole) {
                job_put_event(j, chunk_json(j, buf, whole, NULL, ts->model));
                j->started = 1;
            }
            if (!take)
                break;
        }
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    return cancelled;
}

/* The controller's side: runs one job to its end. */
static void job_run(Server *sv, Job *j)
{
    Run *run = sv->run;
    TextSink ts = {j, run->o.model};
    j->g.on_text = job_on_text;
    j->g.on_text_ctx = &ts;
    j->g.cancel = &j->cancelled;
    char err[512] = "";
    generate_result_free(&run->res);
    int rc = session_generate(run, j->prompt, &j->g, &run->res, err, sizeof err);
    const GenResult *r = &run->res;
    pthread_mutex_lock(&j->mu);
    j->failed = rc < 0;
    snprintf(j->err, sizeof j->err, "%s", err);
    j->finish = !strcmp(r->stopped_by ? r->stopped_by : "", "eos") ||
                        !strcmp(r->stopped_by ? r->stopped_by : "", "bos") ||
                        !strcmp(r->stopped_by ? r->stopped_by : "", "stop")
                    ? "stop"
                    : "length";
    j->n_prompt = r->n_prompt + j->g.start_pos;
    j->n_gen = r->n_gen;
    j->text = xstrdup(r->gen_text ? r->gen_text : "");
    if (j->stream) {
        j->n_pend = 0; /* an unfinished character at the very end is dropped */
        /* the status line has gone out already: an error travels as an event */
        job_put_event(j, j->failed ? json_pack("{s:{s:s,s:s}}", "error", "message", j->err,
                                               "type", "invalid_request_error")
                                   : chunk_json(j, NULL, 0, j->finish, run->o.model));
        job_put(j, "data: [DONE]\n\n", 14);
        j->failed = 0; /* the stream itself ends normally */
    }
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (!run->o.quiet)
        LOG_INFO("headsplit: served %s: %d prompt tokens (%d new to the KV caches), %d "
                 "generated, %s%s", j->id, j->n_prompt, r->n_prompt, j->n_gen, j->finish,
                 j->cancelled ? " (client gone)" : "");
}

/* ---- HTTP ---- */

typedef struct {
    char *body;
    size_t len, cap;
    int too_big;
} Req;

static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* OpenAI's error object. */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *type,
                                   const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_json(c, status, json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", msg,
                                           "type", type, "param", "code"));
}

/* Reads a number field in [lo, hi] when present: 0, 1 absent, -1 bad (msg written). */
static int field_num(json_t *o, const char *key, double lo, double hi, double *out, char *msg,
                     size_t cap)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        snprintf(msg, cap, "'%s' must be a number in %g..%g", key, lo, hi);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

/* Fills the job's generation options from the request; 0 or -1 with msg. */
static int job_options(Server *sv, Job *j, json_t *req, char *msg, size_t cap)
{
    Run *run = sv->run;
    session_gen_options(run, &j->g);
    j->g.steps = 0;
    double v;
    int limit = run->kv_cap;
    int rc;
    if ((rc = field_num(req, "max_tokens", 1, limit, &v, msg, cap)) < 0 ||
        (rc == 1 && (rc = field_num(req, "max_completion_tokens", 1, limit, &v, msg, cap)) < 0))
        return -1;
    j->g.n_predict = rc == 0 ? (int)v : run->o.n_predict ? run->o.n_predict : 256;
    if ((rc = field_num(req, "temperature", 0, 100, &v, msg, cap)) < 0)
        return -1;
    if (rc == 0)
        j->g.temperature = (float)v;
    if ((rc = field_num(req, "top_p", 0, 1, &v, msg, cap)) < 0)
        return -1;
    if (rc == 0)
        j->g.top_p = v > 0 ? (float)v : 1.0f;
    if ((rc = field_num(req, "top_k", 0, 1 << 24, &v, msg, cap)) < 0)
        return -1;
    if (rc == 0)
        j->g.top_k = (int)v;
    if ((rc = field_num(req, "min_p", 0, 1, &v, msg, cap)) < 0)
        return -1;
    if (rc == 0)
        j->g.min_p = (float)v;
    if ((rc = field_num(req, "repeat_penalty", 0.01, 100, &v, msg, cap)) < 0)
        return -1;
    if (rc == 0)
        j->g.repeat_penalty = (float)v;
    if ((rc = field_num(req, "seed", 0, 9007199254740991.0, &v, msg, cap)) < 0)
        return -1;
    if (rc == 0)
        j->g.seed = (uint64_t)v;
    json_t *st = json_object_get(req, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st)) {
        snprintf(msg, cap, "'stream' must be true or false");
        return -1;
    }
    j->stream = json_is_true(st);
    /* stop strings: the request's (a string or up to 4 strings), the template's end of turn
     * for chat, and the command line's */
    int n = 0;
    json_t *stop = json_object_get(req, "stop");
    if (json_is_string(stop)) {
        j->stops[n++] = xstrdup(json_string_value(stop));
    } else if (json_is_array(stop)) {
        size_t i;
        json_t *e;
        json_array_foreach(stop, i, e) {
            if (!json_is_string(e) || i >= 4 || !json_string_length(e)) {
                snprintf(msg, cap, "'stop' must be a string or up to 4 non-empty strings");
                return -1;
            }
            j->stops[n++] = xstrdup(json_string_value(e));
        }
    } else if (stop && !json_is_null(stop)) {
        snprintf(msg, cap, "'stop' must be a string or an array of strings");
        return -1;
    }
    if (j->chat && run->tmpl_stop)
        j->stops[n++] = xstrdup(run->tmpl_stop);
    for (int i = 0; i < run->o.n_stops && n < SERVE_STOPS; i++)
        j->stops[n++] = xstrdup(run->o.stops[i]);
    for (int i = 0; i < n; i++)
        j->stop_ptrs[i] = j->stops[i];
    j->g.stops = j->stop_ptrs;
    j->g.n_stops = n;
    return 0;
}

/* The prompt of a chat request: its messages rendered by the template; 0 or -1 with msg. */
static int job_chat_prompt(Server *sv, Job *j, json_t *req, char *msg, size_t cap)
{
    json_t *ms = json_object_get(req, "messages");
    if (!json_is_array(ms) || json_array_size(ms) == 0) {
        snprintf(msg, cap, "'messages' must be a non-empty array");
        return -1;
    }
    size_t n = json_array_size(ms);
    ChatMessage *cm = xcalloc(n, sizeof *cm);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(ms, i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role) || !json_is_string(content)) {
            snprintf(msg, cap, "messages[%zu] needs string 'role' and 'content'", i);
            free(cm);
            return -1;
        }
        cm[i] = (ChatMessage){json_string_value(role), json_string_value(content)};
    }
    char err[256] = "";
    j->prompt = chat_format(sv->run->tmpl, cm, (int)n, 1, err, sizeof err);
    free(cm);
    if (!j->prompt) {
        snprintf(msg, cap, "%s", err);
        return -1;
    }
    return 0;
}

static void queue_push(Server *sv, Job *j)
{
    pthread_mutex_lock(&sv->mu);
    j->next = NULL;
    if (sv->tail)
        sv->tail->next = j;
    else
        sv->head = j;
    sv->tail = j;
    sv->n_queued++;
    pthread_cond_signal(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
}

/* Whether the client of connection c has closed it (a zero-byte peek). */
static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Streaming body: blocks (this connection's own thread) until bytes or the end come. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    Job *j = cls;
    pthread_mutex_lock(&j->mu);
    while (j->out_read == j->out_len && !j->done)
        pthread_cond_wait(&j->cv, &j->mu);
    ssize_t n;
    if (j->out_read < j->out_len) {
        size_t k = j->out_len - j->out_read < max ? j->out_len - j->out_read : max;
        memcpy(buf, j->out + j->out_read, k);
        j->out_read += k;
        n = (ssize_t)k;
    } else {
        n = j->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

/* The streamed response is done with (sent, or the client went away). */
static void stream_free(void *cls)
{
    Job *j = cls;
    pthread_mutex_lock(&j->mu);
    if (!j->done)
        j->cancelled = 1;
    pthread_mutex_unlock(&j->mu);
    job_release(j);
}

static enum MHD_Result reply_job(struct MHD_Connection *c, Job *j, const char *model)
{
    if (j->stream) {
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, j,
                                              stream_free);
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ok;
    }
    /* Wait for the whole reply, watching for the client's departure. */
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        if (!j->done && client_gone(c))
            j->cancelled = 1;
    }
    pthread_mutex_unlock(&j->mu);
    enum MHD_Result ok;
    if (j->failed) {
        ok = reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "%s", j->err);
    } else {
        json_t *choice = j->chat ? json_pack("{s:i,s:{s:s,s:s},s:s}", "index", 0, "message",
                                             "role", "assistant", "content", j->text,
                                             "finish_reason", j->finish)
                                 : json_pack("{s:i,s:s,s:s}", "index", 0, "text", j->text,
                                             "finish_reason", j->finish);
        json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[o],s:{s:i,s:i,s:i}}", "id", j->id, "object",
                              j->chat ? "chat.completion" : "text_completion", "created",
                              (json_int_t)j->created, "model", model, "choices", choice,
                              "usage", "prompt_tokens", j->n_prompt, "completion_tokens",
                              j->n_gen, "total_tokens", j->n_prompt + j->n_gen);
        ok = o ? reply_json(c, MHD_HTTP_OK, o)
               : reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error",
                             "the reply is not valid UTF-8");
    }
    job_release(j);
    return ok;
}

/* A completion request: parsed, checked, queued, answered. */
static enum MHD_Result handle_completion(Server *sv, struct MHD_Connection *c, Req *rq, int chat)
{
    if (rq->too_big)
        return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error",
                           "request body larger than %ld bytes", sv->max_body);
    json_error_t je;
    json_t *req = json_loadb(rq->body ? rq->body : "", rq->len, 0, &je);
    if (!req)
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                           "malformed JSON: %s (line %d, column %d)", je.text, je.line,
                           je.column);
    if (!json_is_object(req)) {
        json_decref(req);
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error",
                           "the body must be a JSON object");
    }
    Job *j = xcalloc(1, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->chat = chat;
    char msg[512] = "";
    int bad = job_options(sv, j, req, msg, sizeof msg) < 0;
    if (!bad && chat) {
        bad = job_chat_prompt(sv, j, req, msg, sizeof msg) < 0;
    } else if (!bad) {
        json_t *p = json_object_get(req, "prompt");
        if (!json_is_string(p)) {
            snprintf(msg, sizeof msg, "'prompt' must be a string");
            bad = 1;
        } else {
            j->prompt = xstrdup(json_string_value(p));
        }
    }
    json_decref(req);
    if (bad) {
        job_release(j);
        return reply_error(c, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "%s", msg);
    }
    static unsigned long counter;
    snprintf(j->id, sizeof j->id, "%s-hs%lu", chat ? "chatcmpl" : "cmpl",
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    j->created = (long long)time(NULL);
    j->refs = 2; /* this connection and the controller */
    queue_push(sv, j);
    return reply_job(c, j, sv->run->o.model);
}

/* Bearer authentication: 1 when allowed. */
static int authorised(Server *sv, struct MHD_Connection *c)
{
    const char *key = sv->run->o.api_key;
    if (!key)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && strncmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, key) == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    Server *sv = cls;
    Req *rq = *con_cls;
    if (!rq) {
        *con_cls = xcalloc(1, sizeof(Req));
        return MHD_YES;
    }
    if (*upload_size) { /* body bytes, kept up to the limit */
        if (rq->len + *upload_size > (size_t)sv->max_body) {
            rq->too_big = 1;
        } else if (!rq->too_big) {
            if (rq->len + *upload_size + 1 > rq->cap) {
                rq->cap = (rq->len + *upload_size + 1) * 2;
                rq->body = xrealloc(rq->body, rq->cap);
            }
            memcpy(rq->body + rq->len, upload, *upload_size);
            rq->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    int is_get = strcmp(method, "GET") == 0, is_post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/health") == 0 && is_get) {
        pthread_mutex_lock(&sv->mu);
        int q = sv->n_queued;
        pthread_mutex_unlock(&sv->mu);
        return reply_json(c, MHD_HTTP_OK, json_pack("{s:s,s:i}", "status", "ok", "queued", q));
    }
    if (!authorised(sv, c))
        return reply_error(c, MHD_HTTP_UNAUTHORIZED, "invalid_request_error",
                           "invalid or missing API key (Authorization: Bearer KEY)");
    if (strcmp(url, "/v1/models") == 0 && is_get)
        return reply_json(c, MHD_HTTP_OK,
                          json_pack("{s:s,s:[{s:s,s:s,s:i,s:s}]}", "object", "list", "data",
                                    "id", sv->run->o.model, "object", "model", "created", 0,
                                    "owned_by", "headsplit"));
    int chat = strcmp(url, "/v1/chat/completions") == 0;
    if (chat || strcmp(url, "/v1/completions") == 0) {
        if (!is_post)
            return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error",
                               "%s takes POST", url);
        return handle_completion(sv, c, rq, chat);
    }
    return reply_error(c, MHD_HTTP_NOT_FOUND, "invalid_request_error", "no route %s %s",
                       method, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    Req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

/* ADDR:PORT into a socket address; 0 or -1 with err. */
static int parse_addr(const char *spec, struct sockaddr_in *sa, char *err, size_t errlen)
{
    const char *colon = strrchr(spec, ':');
    char host[64];
    if (!colon || (size_t)(colon - spec) >= sizeof host)
        return util_err(err, errlen, "--serve: '%s' is not ADDR:PORT", spec);
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return util_err(err, errlen, "--serve: port '%s' is not 1..65535", colon + 1);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &sa->sin_addr) != 1)
        return util_err(err, errlen, "--serve: '%s' is not an IPv4 address", host);
    return 0;
}

int serve_run(Run *run)
{
    Server sv = {.run = run, .max_body = run->o.max_body};
    pthread_mutex_init(&sv.mu, NULL);
    pthread_cond_init(&sv.cv, NULL);
    char err[256] = "";
    struct sockaddr_in sa;
    if (parse_addr(run->o.serve, &sa, err, sizeof err) < 0) {
        fprintf(stderr, "headsplit: error: %s\n", err);
        session_end(run);
        return 2;
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = serve_on_signal;
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, &sv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &sv, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)600, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "headsplit: error: --serve %s: cannot listen (%s)\n", run->o.serve,
                strerror(errno));
        session_end(run);
        return 1;
    }
    fprintf(stderr, "headsplit: serving %s on http://%s (OpenAI API: /v1/chat/completions, "
            "/v1/completions, /v1/models, /health); Ctrl-C ends\n", run->o.model, run->o.serve);
    while (!serve_quit) {
        pthread_mutex_lock(&sv.mu);
        while (!sv.head && !serve_quit) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&sv.cv, &sv.mu, &ts);
        }
        Job *j = sv.head;
        if (j) {
            sv.head = j->next;
            if (!sv.head)
                sv.tail = NULL;
            sv.n_queued--;
        }
        pthread_mutex_unlock(&sv.mu);
        if (!j)
            continue;
        pthread_mutex_lock(&j->mu);
        int gone = j->cancelled;
        pthread_mutex_unlock(&j->mu);
        if (gone) { /* its client left while it waited */
            pthread_mutex_lock(&j->mu);
            j->done = 1;
            j->text = xstrdup("");
            j->finish = "stop";
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
        } else {
            job_run(&sv, j);
        }
        job_release(j);
    }
    MHD_stop_daemon(d);
    /* jobs still queued: their connections are closed with the daemon */
    session_end(run);
    fprintf(stderr, "headsplit: server stopped\n");
    return 0;
}
