/* serve.c: headsplit --serve ADDR:PORT, an OpenAI-compatible HTTP server on the controller
 * (libmicrohttpd for HTTP, jansson for JSON; serve.h lists the files).  This file: the
 * controller's loop, the queue, the jobs and the drain.
 *
 * libmicrohttpd runs a thread per connection; those threads parse and check requests and put
 * jobs on a bounded queue (--queue).  With one slot (--parallel 1) the controller's own
 * thread (the only one that drives the engine) takes one job at a time, so generations never
 * overlap; the others wait their turn.  With --parallel N (on one process or on several
 * ranks) the controller hands each job to a free slot, a thread of its own whose generation
 * shares every forward pass with the other slots' (serve_slots.c); the others wait in the
 * queue.  A streamed reply is written as the tokens come; a client that goes away
 * cancels its job at the next token (or while it waits in the queue), which frees its slot.
 *
 * SIGTERM or SIGINT starts the drain (a ticker thread watches for it): no new connection or
 * request is accepted, queued requests are answered at once (an error event in a stream, a
 * 503 otherwise), the running generations may finish within --shutdown-grace seconds and are
 * then cut (finish_reason "length", then [DONE]); the workers are told to stop the normal
 * way and every rank exits.  A second signal cuts at once.  Every wait is timed. */
#include "serve.h"

#include "util.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int serve_signals; /* atomic: the handler counts, the ticker reads */

static void serve_on_signal(int sig)
{
    (void)sig;
    if (__atomic_load_n(&serve_signals, __ATOMIC_RELAXED) < 2) /* lock-free: signal-safe */
        __atomic_fetch_add(&serve_signals, 1, __ATOMIC_RELAXED);
}

void serve_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)ms * 1000000L;
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

void serve_error(ServeError *e, unsigned status, const char *type, const char *fmt, ...)
{
    memset(e, 0, sizeof *e);
    e->status = status;
    e->type = type;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

/* ---- jobs ---- */

Job *serve_job_new(Server *sv, int chat)
{
    Job *j = xcalloc(1, sizeof *j);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->sv = sv;
    j->refs = 1;
    j->chat = chat;
    return j;
}

void serve_job_release(Job *j)
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

void serve_job_put(Job *j, const char *s, size_t n)
{
    if (j->out_len + n + 1 > j->out_cap) {
        j->out_cap = (j->out_len + n + 1) * 2;
        j->out = xrealloc(j->out, j->out_cap);
    }
    memcpy(j->out + j->out_len, s, n);
    j->out_len += n;
    j->out[j->out_len] = '\0';
}

void serve_job_put_event(Job *j, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return;
    serve_job_put(j, "data: ", 6);
    serve_job_put(j, s, strlen(s));
    serve_job_put(j, "\n\n", 2);
    free(s);
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

/* generate_run's on_text: new text for the job; non-zero when it is to stop. */
static int job_on_text(void *ctx, const char *text, size_t n)
{
    Job *j = ctx;
    pthread_mutex_lock(&j->mu);
    int cancelled = j->cancelled;
    if (!cancelled && j->stream) {
        /* whole UTF-8 characters only: a JSON string cannot hold half of one */
        char buf[1024];
        while (n > 0 || j->n_pend > 0) {
            size_t take = n < sizeof buf - j->n_pend ? n : sizeof buf - j->n_pend;
            memcpy(buf, j->pend, j->n_pend);
            memcpy(buf + j->n_pend, text, take);
            size_t m = j->n_pend + take;
            text += take;
            n -= take;
            size_t whole = utf8_whole((const unsigned char *)buf, m);
            j->n_pend = m - whole;
            if (j->n_pend > sizeof j->pend)
                j->n_pend = 0; /* not UTF-8 at all: dropped */
            else
                memcpy(j->pend, buf + whole, j->n_pend);
            if (whole) {
                serve_job_put_event(j, openai_chunk(j, buf, whole, NULL));
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

/* Runs one job to its end: on the controller's thread (slot NULL: the run's backend and KV
 * caches), or on slot's thread with its caches, sharing passes with the other slots. */
static void job_run(Server *sv, Job *j, ServeSlot *slot)
{
    Run *run = sv->run;
    j->g.on_text = job_on_text;
    j->g.on_text_ctx = j;
    j->g.cancel = &j->cancelled;
    char err[512] = "";
    GenResult *res = slot ? &slot->res : &run->res;
    generate_result_free(res);
    int rc;
    if (slot) {
        SessionKv kv = {&slot->hist, &slot->n_hist, &slot->hist_cap};
        rc = session_generate_on(run, &slot->be, &kv, j->prompt, &j->g, res, err, sizeof err);
        batcher_leave(sv->batcher, slot->idx);
    } else {
        rc = session_generate(run, j->prompt, &j->g, res, err, sizeof err);
    }
    const GenResult *r = res;
    const char *by = r->stopped_by ? r->stopped_by : "";
    pthread_mutex_lock(&j->mu);
    j->failed = rc < 0;
    snprintf(j->err, sizeof j->err, "%s", err);
    j->finish = !strcmp(by, "eos") || !strcmp(by, "bos") || !strcmp(by, "stop") ? "stop"
                                                                                 : "length";
    j->n_prompt = r->n_prompt + j->g.start_pos;
    j->n_gen = r->n_gen;
    j->text = xstrdup(r->gen_text ? r->gen_text : "");
    int gone = j->cancelled && !j->cut;
    if (j->stream) {
        j->n_pend = 0; /* an unfinished character at the very end is dropped */
        /* the status line has gone out already: an error travels as an event */
        ServeError e;
        serve_error(&e, 500, "server_error", "%s", j->err);
        serve_job_put_event(j, j->failed ? openai_error_json(&e)
                                         : openai_chunk(j, NULL, 0, j->finish));
        if (!j->failed && j->include_usage)
            serve_job_put_event(j, openai_usage_chunk(j));
        serve_job_put(j, "data: [DONE]\n\n", 14);
        j->failed = 0; /* the stream itself ends normally */
    }
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    int cut = j->cut;
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&sv->mu);
    ServeStats *st = &sv->st;
    if (rc < 0)
        st->failed++;
    else if (cut)
        st->cut++;
    else if (gone)
        st->cancelled++;
    else
        st->ok++;
    st->prompt_tokens += (unsigned long long)(r->n_prompt_run > 0 ? r->n_prompt_run : 0);
    st->gen_tokens += (unsigned long long)(r->n_gen > 0 ? r->n_gen : 0);
    st->prompt_s += r->prompt_ms / 1e3;
    st->gen_s += r->gen_ms / 1e3;
    pthread_mutex_unlock(&sv->mu);
    if (!run->o.quiet)
        LOG_INFO("headsplit: served %s%s: %d prompt tokens (%d new to the KV caches), %d "
                 "generated, %s%s", j->id, slot ? slot->name : "", j->n_prompt,
                 r->n_prompt, j->n_gen, j->finish,
                 cut ? " (cut by the shutdown)" : gone ? " (client gone)" : "");
}

/* A queued job the shutdown answers: an error event and [DONE] in a stream (its status line
 * has gone out), a 503 otherwise.  Drops the queue's reference. */
static void job_refuse(Job *j)
{
    pthread_mutex_lock(&j->mu);
    j->shutdown = 1;
    snprintf(j->err, sizeof j->err, "the server is shutting down; the request was not run");
    if (j->stream) {
        ServeError e;
        serve_error(&e, 503, "unavailable_error", "%s", j->err);
        serve_job_put_event(j, openai_error_json(&e));
        serve_job_put(j, "data: [DONE]\n\n", 14);
    }
    j->text = xstrdup("");
    j->finish = "stop";
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    serve_job_release(j);
}

/* ---- the queue ---- */

int serve_queue_push(Server *sv, Job *j, ServeError *e)
{
    pthread_mutex_lock(&sv->mu);
    if (sv->draining || sv->n_queued >= sv->queue_max) {
        int full = !sv->draining;
        if (full) {
            sv->st.full++;
            /* a guess at when a place frees: the mean time of a generation so far */
            unsigned long runs = sv->st.ok + sv->st.failed + sv->st.cancelled;
            double mean = runs ? (sv->st.prompt_s + sv->st.gen_s) / (double)runs : 1.0;
            int wait = (int)(mean * (sv->n_queued + 1) / sv->n_slots + 0.999);
            serve_error(e, 503, "unavailable_error", "the queue is full (%d waiting, "
                        "--queue %d); retry later", sv->n_queued, sv->queue_max);
            e->retry_after = wait < 1 ? 1 : wait > 3600 ? 3600 : wait;
        } else {
            sv->st.shutdown++;
            serve_error(e, 503, "unavailable_error", "the server is shutting down");
            e->retry_after = 5;
        }
        pthread_mutex_unlock(&sv->mu);
        return -1;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++; /* the controller's */
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (sv->tail)
        sv->tail->next = j;
    else
        sv->head = j;
    sv->tail = j;
    sv->n_queued++;
    pthread_cond_broadcast(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
    return 0;
}

int serve_draining(Server *sv)
{
    pthread_mutex_lock(&sv->mu);
    int d = sv->draining;
    pthread_mutex_unlock(&sv->mu);
    return d;
}

/* ---- the drain ---- */

/* The ticker: starts the drain when a signal has come (the queue answered, the listening
 * socket closed) and cuts the running generations when the grace period is over. */
static void *serve_ticker(void *arg)
{
    Server *sv = arg;
    pthread_mutex_lock(&sv->mu);
    while (!sv->stopped) {
        serve_wait_ms(&sv->cv, &sv->mu, 50);
        int sigs = __atomic_load_n(&serve_signals, __ATOMIC_RELAXED);
        if (sigs && !sv->draining) {
            sv->draining = 1;
            sv->quit_at = time_now();
            Job *q = sv->head;
            int n = sv->n_queued;
            sv->head = sv->tail = NULL;
            sv->n_queued = 0;
            sv->st.shutdown += (unsigned long)n;
            int busy = sv->n_running;
            pthread_cond_broadcast(&sv->cv);
            pthread_mutex_unlock(&sv->mu);
            LOG_INFO("headsplit: stopping: %d queued request%s refused, %s", n,
                     n == 1 ? "" : "s", busy > 1 ? "the running ones have --shutdown-grace"
                                        : busy ? "the running one has --shutdown-grace"
                                               : "none running");
            while (q) {
                Job *next = q->next;
                job_refuse(q);
                q = next;
            }
            serve_http_quiesce(sv);
            pthread_mutex_lock(&sv->mu);
        }
        for (int i = 0; i < sv->n_slots; i++) {
            Job *r = sv->running[i];
            if (sv->draining && r && (sigs > 1 || time_now() - sv->quit_at >= sv->grace_s)) {
                pthread_mutex_lock(&r->mu);
                if (!r->done && !r->cancelled) {
                    /* generate_run reads it unlocked */
                    __atomic_store_n(&r->cancelled, 1, __ATOMIC_RELAXED);
                    r->cut = 1;
                }
                pthread_mutex_unlock(&r->mu);
            }
        }
    }
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

/* Waits until libmicrohttpd has sent the last replies (bounded: a client that does not read
 * is not waited for past the grace period). */
static void serve_flush(Server *sv)
{
    double end = time_now() + 0.5, cap = sv->quit_at + sv->grace_s + 0.5;
    if (end > cap && cap > time_now() + 0.1)
        end = cap;
    pthread_mutex_lock(&sv->mu);
    while (sv->in_flight > 0 && time_now() < end)
        serve_wait_ms(&sv->cv, &sv->mu, 20);
    int left = sv->in_flight;
    pthread_mutex_unlock(&sv->mu);
    if (left)
        LOG_INFO("headsplit: %d connection%s closed unfinished at the shutdown", left,
                 left == 1 ? "" : "s");
}

/* The key: --api-key, else the first line of --api-key-file.  0, or -1 with err. */
static int serve_read_key(Server *sv, char *err, size_t errlen)
{
    const Options *o = &sv->run->o;
    if (o->api_key) {
        sv->api_key = xstrdup(o->api_key);
        return 0;
    }
    if (!o->api_key_file)
        return 0;
    FILE *f = fopen(o->api_key_file, "r");
    if (!f)
        return util_err(err, errlen, "--api-key-file: cannot open %s", o->api_key_file);
    char line[1024];
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    size_t n = got ? strcspn(line, "\r\n") : 0;
    line[n] = '\0';
    while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
        line[--n] = '\0';
    if (!n)
        return util_err(err, errlen, "--api-key-file: %s holds no key on its first line",
                        o->api_key_file);
    sv->api_key = xstrdup(line);
    return 0;
}

/* Whether the tokenizer puts BOS in front of what it encodes (/tokenize's add_special). */
static int serve_tokenizer_adds_bos(const Run *run)
{
    int *ids = NULL;
    size_t n = 0;
    char err[128];
    int bos = tokenizer_bos(run->tok);
    int adds = bos >= 0 && tokenizer_encode(run->tok, "a", 1, &ids, &n, err, sizeof err) == 0 &&
               n > 0 && ids[0] == bos;
    free(ids);
    return adds;
}

int serve_worker(Run *run)
{
    /* the controller drains and then ends the session; a signal meant for the whole job
     * (docker stop, systemd) must not cut the workers from under it */
    signal(SIGTERM, SIG_IGN);
    return session_worker(run);
}

/* The job at the head of the queue, taken off it (NULL: none); sv->mu held. */
static Job *queue_pop(Server *sv)
{
    Job *j = sv->head;
    if (j) {
        sv->head = j->next;
        if (!sv->head)
            sv->tail = NULL;
        sv->n_queued--;
    }
    return j;
}

/* A job taken off the queue whose client left while it waited: answered, counted, not run.
 * Returns 1 when so. */
static int job_gone(Server *sv, Job *j)
{
    pthread_mutex_lock(&j->mu);
    int gone = j->cancelled;
    if (gone) {
        j->done = 1;
        j->text = xstrdup("");
        j->finish = "stop";
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(&j->mu);
    if (gone) {
        pthread_mutex_lock(&sv->mu);
        sv->st.cancelled++;
        pthread_mutex_unlock(&sv->mu);
    }
    return gone;
}

/* One generation at a time (--parallel 1, several ranks): the controller's thread runs each
 * job off the queue to its end. */
static void serve_one_loop(Server *sv)
{
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        while (!sv->head && !sv->draining)
            serve_wait_ms(&sv->cv, &sv->mu, 200);
        Job *j = queue_pop(sv);
        if (j) {
            sv->running[0] = j;
            sv->n_running = 1;
        }
        pthread_mutex_unlock(&sv->mu);
        if (!j)
            break; /* draining, and the queue is empty */
        if (!job_gone(sv, j))
            job_run(sv, j, NULL);
        pthread_mutex_lock(&sv->mu);
        sv->running[0] = NULL;
        sv->n_running = 0;
        pthread_mutex_unlock(&sv->mu);
        serve_job_release(j);
    }
}

/* A slot's thread: runs the jobs the controller gives it until told to end. */
static void *slot_main(void *arg)
{
    ServeSlot *slot = arg;
    Server *sv = slot->sv;
    pthread_mutex_lock(&sv->mu);
    for (;;) {
        while (!slot->job && !sv->slots_quit)
            serve_wait_ms(&sv->cv, &sv->mu, 200);
        Job *j = slot->job;
        if (!j)
            break;
        pthread_mutex_unlock(&sv->mu);
        job_run(sv, j, slot);
        pthread_mutex_lock(&sv->mu);
        slot->job = NULL;
        sv->running[slot->idx] = NULL;
        sv->n_running--;
        pthread_cond_broadcast(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
        serve_job_release(j);
        pthread_mutex_lock(&sv->mu);
    }
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

/* The free slot for j: the one whose KV caches hold the longest prefix of its prompt (a
 * conversation's next turn finds its earlier ones; two tokens at least), else the least
 * recently used (the others keep theirs for their conversations).  Some slot is free; only
 * this thread (the controller) gives slots work, so a free slot stays free and its history
 * unchanged while the prompt is encoded outside sv->mu. */
static ServeSlot *slot_choose(Server *sv, const Job *j)
{
    int free_idx[SERVE_SLOTS_MAX], n_free = 0;
    pthread_mutex_lock(&sv->mu);
    for (int i = 0; i < sv->n_slots; i++)
        if (!sv->slots[i].job)
            free_idx[n_free++] = i;
    pthread_mutex_unlock(&sv->mu);
    /* --replicas: slot i runs on copy i % copies; the request goes to the copy with the
     * fewest sequences running that has a free slot */
    int busy[SERVE_SLOTS_MAX] = {0}, least = -1;
    pthread_mutex_lock(&sv->mu);
    for (int i = 0; i < sv->n_slots; i++)
        busy[i % sv->copies] += sv->slots[i].job != NULL;
    pthread_mutex_unlock(&sv->mu);
    for (int k = 0; k < n_free; k++)
        if (least < 0 || busy[free_idx[k] % sv->copies] < least)
            least = busy[free_idx[k] % sv->copies];
    ServeSlot *best = NULL;
    int best_common = -1;
    for (int k = 0; k < n_free; k++) {
        ServeSlot *s = &sv->slots[free_idx[k]];
        if (busy[free_idx[k] % sv->copies] != least)
            continue;
        int common = s->n_hist ? session_common_prefix(sv->run, s->hist, s->n_hist, j->prompt,
                                                       j->g.special)
                               : 0;
        if (common < 2)
            common = 0; /* a BOS alone in common is no reason to take another's slot */
        if (!best || common > best_common ||
            (common == best_common && s->last_use < best->last_use)) {
            best = s;
            best_common = common;
        }
    }
    return best;
}

static void slots_wake(void *run) { session_wake(run); }
static void slots_rest(void *run) { session_rest(run); }

/* --parallel N: the controller hands each job off the queue to a free slot (it joins the
 * running generations at their next step); the slots' threads share passes, on this
 * process's layers or the distributed engine's. */
static void serve_slots_loop(Server *sv)
{
    Run *run = sv->run;
    LayerBackend be = run->n_copies > 1 ? dist_replicas_backend(run->copies, run->n_copies)
                      : run->distributed ? dist_backend(run->dist)
                                         : local_model_backend(run->local);
    sv->copies = be.copies > 1 ? be.copies : 1;
    sv->layers = be;
    sv->slots = xcalloc((size_t)sv->n_slots, sizeof *sv->slots);
    sv->batcher = batcher_new(&be, &run->cfg, &run->head, sv->n_slots,
                              (run->o.batch > 0 ? run->o.batch : 1) + sv->n_slots - 1);
    if (run->distributed) /* the workers wait for passes only while some slot generates */
        batcher_on_idle(sv->batcher, slots_wake, slots_rest, run);
    for (int i = 0; i < sv->n_slots; i++) {
        ServeSlot *s = &sv->slots[i];
        s->sv = sv;
        s->idx = i;
        snprintf(s->name, sizeof s->name, " in slot %d", i);
        s->be = batcher_backend(sv->batcher, i);
        pthread_create(&s->th, NULL, slot_main, s);
    }
    for (;;) {
        pthread_mutex_lock(&sv->mu);
        while (!(sv->head && sv->n_running < sv->n_slots) &&
               !(sv->draining && !sv->head && sv->n_running == 0))
            serve_wait_ms(&sv->cv, &sv->mu, 200);
        Job *j = queue_pop(sv);
        pthread_mutex_unlock(&sv->mu);
        if (!j)
            break; /* draining, the queue empty and every slot done */
        if (job_gone(sv, j)) {
            serve_job_release(j);
            continue;
        }
        ServeSlot *s = slot_choose(sv, j);
        batcher_join(sv->batcher, s->idx); /* the next step waits for its first rows */
        pthread_mutex_lock(&sv->mu);
        s->job = j;
        s->last_use = ++sv->use_clock;
        sv->running[s->idx] = j;
        sv->n_running++;
        pthread_cond_broadcast(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
    }
    pthread_mutex_lock(&sv->mu);
    sv->slots_quit = 1;
    pthread_cond_broadcast(&sv->cv);
    pthread_mutex_unlock(&sv->mu);
    for (int i = 0; i < sv->n_slots; i++) {
        pthread_join(sv->slots[i].th, NULL);
        free(sv->slots[i].hist);
        generate_result_free(&sv->slots[i].res);
    }
    batcher_quiesce(sv->batcher); /* the layers rested before the session ends */
}

int serve_run(Run *run)
{
    const Options *o = &run->o;
    Server sv = {.run = run, .max_body = o->max_body, .queue_max = o->queue_max, .copies = 1,
                 .grace_s = o->shutdown_grace, .n_slots = run->slots > 1 ? run->slots : 1};
    sv.running = xcalloc((size_t)sv.n_slots, sizeof *sv.running);
    pthread_mutex_init(&sv.mu, NULL);
    pthread_cond_init(&sv.cv, NULL);
    const char *slash = strrchr(o->model, '/');
    sv.model_id = o->alias ? o->alias : slash ? slash + 1 : o->model;
    sv.add_bos = serve_tokenizer_adds_bos(run);
    char err[512] = "";
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = serve_on_signal;
    sigaction(SIGINT, &act, NULL);
    sigaction(SIGTERM, &act, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (serve_read_key(&sv, err, sizeof err) < 0 || serve_http_start(&sv, err, sizeof err) < 0) {
        fprintf(stderr, "headsplit: error: %s\n", err);
        free(sv.api_key);
        free(sv.running);
        session_end(run);
        return 2;
    }
    pthread_t ticker;
    pthread_create(&ticker, NULL, serve_ticker, &sv);
    char slots[64] = "one request at a time";
    if (sv.n_slots > 1)
        snprintf(slots, sizeof slots, "%d slots sharing each pass", sv.n_slots);
    fprintf(stderr, "headsplit: serving %s on http://%s (pid %d; %s; OpenAI API: "
            "/v1/chat/completions%s, /v1/completions, /v1/models; /health, /metrics, "
            "/tokenize, /detokenize); SIGTERM or Ctrl-C drains and ends\n", sv.model_id,
            o->serve, (int)getpid(), slots, run->have_tmpl ? "" : " (no chat template: give "
            "--chat-template)");
    if (sv.n_slots > 1)
        serve_slots_loop(&sv);
    else
        serve_one_loop(&sv);
    serve_flush(&sv);
    pthread_mutex_lock(&sv.mu);
    sv.stopped = 1;
    pthread_cond_broadcast(&sv.cv);
    pthread_mutex_unlock(&sv.mu);
    pthread_join(ticker, NULL);
    serve_http_stop(&sv);
    session_end(run);
    free(sv.api_key);
    free(sv.running);
    free(sv.slots);
    batcher_free(sv.batcher);
    if (sv.copies > 1)
        dist_replicas_free(&sv.layers);
    pthread_mutex_destroy(&sv.mu);
    pthread_cond_destroy(&sv.cv);
    fprintf(stderr, "headsplit: server stopped after %.1f s of draining\n",
            time_now() - sv.quit_at);
    return 0;
}
