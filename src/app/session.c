/* session.c: generations that continue one another (--chat, --serve).  The controller keeps
 * the token ids its KV caches hold; a new request is the whole conversation rendered by the
 * chat template, and only what follows the longest prefix already processed is run (a chat
 * turn processes its new tokens only; positions past the prefix are overwritten, and a
 * position's attention reads only earlier ones, so the results equal a fresh run's).
 * Between generations the workers wait in a control broadcast without a deadline. */
#include "headsplit.h"

#include "h5io.h"
#include "util.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

int session_choose_template(Run *run, char *err, size_t errlen)
{
    const Options *o = &run->o;
    if (o->chat_template) {
        run->have_tmpl = chat_template_parse(o->chat_template, &run->tmpl, err, errlen) == 0;
    } else {
        /* The template stored with the model at conversion (HF chat_template, GGUF
         * tokenizer.chat_template), recognised by its family's markers. */
        size_t cap = 1 << 16;
        char *jinja = xmalloc(cap), aerr[256];
        if (H5Aexists_by_name(run->file, "/tokenizer", "chat_template", H5P_DEFAULT) > 0 &&
            h5io_attr_read_string(run->file, "/tokenizer", "chat_template", jinja, cap, o->model, aerr,
                                  sizeof aerr) == 0)
            run->have_tmpl = chat_template_detect(jinja, &run->tmpl) == 0;
        free(jinja);
        if (!run->have_tmpl && o->chat) /* --serve: /v1/completions needs none */
            return util_err(err, errlen, "%s: no recognised chat template stored with the "
                            "model; give --chat-template NAME (zephyr, tinyllama, llama2, "
                            "llama3, chatml, phi3, gemma)", o->model);
    }
    if (run->have_tmpl)
        run->tmpl_stop = chat_template_stop(run->tmpl);
    return run->have_tmpl || !o->chat_template ? 0 : -1;
}

void session_gen_options(const Run *run, GenOptions *g)
{
    const Options *o = &run->o;
    memset(g, 0, sizeof *g);
    g->prompt = o->prompt;
    g->steps = o->steps;
    g->temperature = o->temperature;
    g->top_p = o->top_p;
    g->seed = o->seed;
    g->model_path = o->model;
    g->n_predict = o->n_predict;
    g->ctx = run->kv_cap;
    g->top_k = o->top_k;
    g->min_p = o->min_p;
    g->repeat_penalty = o->repeat_penalty;
    g->repeat_last_n = o->repeat_last_n;
    g->stops = o->stops;
    g->n_stops = o->n_stops;
    g->special = !o->no_special;
    g->batch = o->batch;
    g->draft = run->draft;
}

/* The control word of the session: 1 a generation follows, 0 the session ends. */
static void session_word(Run *run, int word)
{
    transport_bcast_all(&run->cm, &word, sizeof word);
}

void session_wake(Run *run)
{
    if (run->distributed)
        session_word(run, 1);
}

void session_rest(Run *run)
{
    if (run->distributed && run->n_copies > 1)
        replicas_stop(run);
    else if (run->distributed)
        dist_controller_stop(run->dist);
}

int session_generate(Run *run, const char *text, GenOptions *g, GenResult *res, char *err,
                     size_t errlen)
{
    SessionKv kv = {&run->hist, &run->n_hist, &run->hist_cap};
    LayerBackend be = run->distributed ? dist_backend(run->dist)
                                       : local_model_backend(run->local);
    session_wake(run);
    int rc = session_generate_on(run, &be, &kv, text, g, res, err, errlen);
    session_rest(run);
    return rc;
}

int session_common_prefix(const Run *run, const int *hist, int n_hist, const char *text,
                          int special)
{
    int *ids = NULL;
    size_t n = 0;
    char err[256];
    if (tokenizer_encode_prompt(run->tok, text, strlen(text), special, 1, &ids, &n, err,
                                sizeof err) < 0)
        return 0;
    int common = 0;
    while (common < n_hist && common < (int)n && hist[common] == ids[common])
        common++;
    free(ids);
    return common;
}

int session_generate_on(Run *run, LayerBackend *bep, SessionKv *kv, const char *text,
                        GenOptions *g, GenResult *res, char *err, size_t errlen)
{
    int *ids = NULL;
    size_t n = 0;
    int rc = tokenizer_encode_prompt(run->tok, text, strlen(text), g->special, 1, &ids, &n, err,
                                     errlen);
    if (rc < 0)
        return -1;
    if (n == 0) {
        free(ids);
        return util_err(err, errlen, "the prompt encodes to no tokens");
    }
    /* The longest prefix already in the KV caches; at least one token is run. */
    int common = 0;
    while (common < *kv->n_hist && common < (int)n && (*kv->hist)[common] == ids[common])
        common++;
    if (common == (int)n)
        common--;
    g->prompt_ids = ids + common;
    g->n_prompt_ids = (int)n - common;
    g->start_pos = common;
    g->history = ids; /* positions 0..common-1, for a draft that lags behind */
    g->ctx = run->kv_cap;
    if (!g->steps || g->steps > run->kv_cap)
        g->steps = run->kv_cap;
    rc = generate_run(&run->cfg, run->tok, &run->head, bep, g, res, err, errlen);
    /* What the KV caches now hold: the prefix, then every token fed. */
    int held = common + res->n_forward;
    if (held > *kv->hist_cap) {
        *kv->hist_cap = held * 2 + 64;
        *kv->hist = xrealloc(*kv->hist, (size_t)*kv->hist_cap * sizeof(int));
    }
    if (common > *kv->n_hist) /* cannot happen: common <= n_hist */
        common = *kv->n_hist;
    if (common > 0)
        memcpy(*kv->hist, ids, (size_t)common * sizeof(int));
    if (res->n_forward > 0) /* none after an error before the first position */
        memcpy(*kv->hist + common, res->tokens, (size_t)res->n_forward * sizeof(int));
    *kv->n_hist = held;
    free(ids);
    g->prompt_ids = NULL;
    return rc;
}

void session_end(Run *run)
{
    if (run->distributed)
        session_word(run, 0);
}

int session_worker(Run *run)
{
    signal(SIGINT, SIG_IGN); /* Ctrl-C is the controller's: it stops a reply, not a worker */
    for (;;) {
        int word = 0;
        transport_bcast_all(&run->cm, &word, sizeof word);
        if (!word)
            return 0;
        dist_worker_loop(run->dist);
    }
}

static volatile int chat_cancel;

static void chat_on_sigint(int sig)
{
    (void)sig;
    chat_cancel = 1;
}

/* Removes trailing white space (the reply as stored in the conversation). */
static void rstrip(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t'))
        s[--n] = '\0';
}

/* The conversation of --chat: messages[0..n), the strings it owns (NULL: borrowed). */
typedef struct {
    ChatMessage *msgs;
    char **owned;
    int n, cap;
    int first; /* the first that may be dropped or reset (after the system message) */
} ChatLog;

static void chat_push(ChatLog *c, const char *role, char *text)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->msgs = xrealloc(c->msgs, (size_t)c->cap * sizeof *c->msgs);
        c->owned = xrealloc(c->owned, (size_t)c->cap * sizeof *c->owned);
    }
    c->msgs[c->n] = (ChatMessage){role, text};
    c->owned[c->n++] = text;
}

/* Drops k messages from index `first` on. */
static void chat_drop(ChatLog *c, int k)
{
    for (int i = c->first; i < c->first + k; i++)
        free(c->owned[i]);
    memmove(c->msgs + c->first, c->msgs + c->first + k,
            (size_t)(c->n - c->first - k) * sizeof *c->msgs);
    memmove(c->owned + c->first, c->owned + c->first + k,
            (size_t)(c->n - c->first - k) * sizeof *c->owned);
    c->n -= k;
}

/* The conversation rendered by the template, its oldest turns (a user message and its reply)
 * after the system message dropped until the prompt leaves `room` positions for the reply;
 * *dropped counts the turns.  NULL with err when the newest message alone does not fit. */
static char *chat_fit(Run *run, ChatLog *c, int room, int *dropped, char *err, size_t errlen)
{
    *dropped = 0;
    for (;;) {
        char *text = chat_format(run->tmpl, c->msgs, c->n, 1, err, errlen);
        int *ids = NULL;
        size_t n = 0;
        if (!text || tokenizer_encode_prompt(run->tok, text, strlen(text), !run->o.no_special,
                                             1, &ids, &n, err, errlen) < 0) {
            free(text);
            return NULL;
        }
        free(ids);
        if ((long)n + room <= run->kv_cap)
            return text;
        free(text);
        if (c->n - c->first < 3) { /* only the newest message is left */
            util_err(err, errlen, "the message takes %zu positions with the template and %d "
                     "more are kept for the reply; the context holds %d (--ctx-size)", n, room,
                     run->kv_cap);
            return NULL;
        }
        chat_drop(c, 2);
        ++*dropped;
    }
}

/* Positions kept free for a reply: -n's, at most half the context; else a quarter. */
static int chat_room(const Run *run)
{
    int half = run->kv_cap / 2, n = run->o.n_predict;
    int room = n > 0 ? (n < half ? n : half) : run->kv_cap / 4;
    return room > 0 ? room : 1;
}

static const char chat_help[] =
    "commands:\n"
    "  /help    this list\n"
    "  /reset   forget the conversation (the system message stays) and empty the KV caches\n"
    "  /exit    end the chat (as does the end of input)\n"
    "Ctrl-C stops a reply.  A line beginning with // is sent with one / less.  When the\n"
    "context fills, the oldest turns are dropped (the system message stays).\n";

/* A line that begins with '/' and a letter is a command: 1 /exit, 0 handled, -1 not one. */
static int chat_command(Run *run, ChatLog *c, const char *line)
{
    if (line[0] != '/' || !((line[1] >= 'a' && line[1] <= 'z') ||
                            (line[1] >= 'A' && line[1] <= 'Z')))
        return -1;
    if (strcmp(line, "/exit") == 0)
        return 1;
    if (strcmp(line, "/help") == 0) {
        fputs(chat_help, stdout);
    } else if (strcmp(line, "/reset") == 0) {
        chat_drop(c, c->n - c->first);
        run->n_hist = 0; /* nothing held: the next turn runs from position 0 */
        if (run->draft)
            run->draft->n_valid = 0;
        run->chat_sum.resets++;
        fprintf(stderr, "headsplit: conversation cleared%s\n",
                c->first ? " (the system message is kept)" : "");
    } else {
        size_t w = strcspn(line, " \t");
        fprintf(stderr, "headsplit: unknown command '%.*s' (not sent to the model; /help "
                "lists the commands, // sends a line that begins with /)\n", (int)w, line);
    }
    return 0;
}

/* Adds one reply's figures to the session's. */
static void chat_count(Run *run)
{
    const GenResult *r = &run->res;
    run->chat_sum.turns++;
    run->chat_sum.prompt_tokens += r->n_prompt_run;
    run->chat_sum.prompt_ms += r->prompt_ms;
    run->chat_sum.gen_tokens += r->n_gen;
    run->chat_sum.gen_timed += r->n_gen > 1 ? r->n_gen - 1 : 0;
    run->chat_sum.gen_ms += r->gen_ms;
}

int session_chat(Run *run)
{
    const Options *o = &run->o;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = chat_on_sigint;
    sa.sa_flags = SA_RESTART; /* a Ctrl-C at the prompt does not end the chat */
    sigaction(SIGINT, &sa, NULL);
    int rc = 0;
    ChatLog c;
    memset(&c, 0, sizeof c);
    if (o->system_prompt) {
        chat_push(&c, "system", NULL);
        c.msgs[0].content = o->system_prompt;
        c.first = 1;
    }
    const char *stops[17];
    int n_stops = 0;
    stops[n_stops++] = run->tmpl_stop;
    for (int i = 0; i < o->n_stops; i++)
        stops[n_stops++] = o->stops[i];
    fprintf(stderr, "headsplit: chat (%s template); /help lists the commands, /exit or end of "
            "input ends it, Ctrl-C stops a reply\n", chat_template_name(run->tmpl));
    char *line = NULL;
    size_t lcap = 0;
    for (;;) {
        fputs("> ", stdout);
        fflush(stdout);
        ssize_t got = getline(&line, &lcap, stdin);
        if (got < 0)
            break;
        rstrip(line);
        if (!line[0])
            continue;
        int cmd = chat_command(run, &c, line);
        if (cmd > 0)
            break;
        if (cmd == 0)
            continue;
        chat_push(&c, "user", xstrdup(line + (line[0] == '/' && line[1] == '/')));
        char err[1024] = "";
        int dropped = 0;
        char *text = chat_fit(run, &c, chat_room(run), &dropped, err, sizeof err);
        if (!text) { /* this message cannot be answered; the chat goes on without it */
            fprintf(stderr, "headsplit: error: %s; the message is not sent\n", err);
            free(c.owned[--c.n]);
            continue;
        }
        if (dropped) {
            run->chat_sum.dropped += dropped;
            fprintf(stderr, "headsplit: the context (%d positions) is full: dropped the %d "
                    "oldest turn%s%s; reading the rest again\n", run->kv_cap, dropped,
                    dropped == 1 ? "" : "s", c.first ? " (the system message is kept)" : "");
        }
        GenOptions g;
        session_gen_options(run, &g);
        g.stream = stdout;
        g.no_echo = 1;
        g.stops = stops;
        g.n_stops = n_stops;
        g.cancel = &chat_cancel;
        g.steps = 0; /* up to the context, or -n per reply */
        chat_cancel = 0;
        generate_result_free(&run->res);
        if (session_generate(run, text, &g, &run->res, err, sizeof err) < 0) {
            fprintf(stderr, "\nheadsplit: error: %s\n", err);
            free(text);
            rc = 1;
            break;
        }
        free(text);
        chat_count(run);
        fputc('\n', stdout);
        if (chat_cancel)
            fputs("[stopped]\n", stdout);
        fflush(stdout);
        char *reply = xstrdup(run->res.gen_text ? run->res.gen_text : "");
        rstrip(reply);
        chat_push(&c, "assistant", reply);
        if (!strcmp(run->res.stopped_by, "context"))
            fprintf(stderr, "headsplit: the reply reached the end of the context (%d "
                    "positions); the oldest turns are dropped at the next message\n",
                    run->kv_cap);
    }
    free(line);
    for (int i = 0; i < c.n; i++)
        free(c.owned[i]);
    free(c.owned);
    free(c.msgs);
    session_end(run);
    return rc;
}
