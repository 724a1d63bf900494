/* generate.c: the token loop (prompt forcing, sampling, stopping, streaming, timing): the
 * prompt in passes of several positions, then one position per pass or, with a draft model,
 * rounds of drafted tokens that the target verifies in one pass (draft.c's rule). */
#include "generate.h"

#include "kernels.h"
#include "sampler.h"
#include "draft.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

int generate_read_transcript(const char *path, int vocab, int **prompt, int *n_prompt,
                             int **gen, int *n_gen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return util_err(err, errlen, "--resume: cannot open transcript %s", path);
    char line[4096];
    int ln = 0, rc = 0, cap_p = 16, cap_g = 64;
    *prompt = xmalloc((size_t)cap_p * sizeof(int));
    *gen = xmalloc((size_t)cap_g * sizeof(int));
    *n_prompt = *n_gen = 0;
    if (!fgets(line, sizeof line, f) || strncmp(line, "headsplit-transcript 1", 22) != 0) {
        rc = util_err(err, errlen, "%s:1: not a headsplit transcript (version 1)", path);
        goto done;
    }
    ln = 1;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (line[0] != 'p' && line[0] != 't')
            continue; /* header fields */
        int complete = strchr(line, '\n') != NULL;
        line[strcspn(line, "\r\n")] = '\0';
        char *end;
        long v = strtol(line + 1, &end, 10);
        if (end == line + 1 || *end != '\0' || v < 0 || v >= vocab) {
            /* A last line cut short by a crash is not an error: it was never flushed whole. */
            if (!complete)
                break;
            rc = util_err(err, errlen, "%s:%d: token id '%.20s' is not in 0..%d", path, ln,
                          line + 1, vocab - 1);
            goto done;
        }
        if (line[0] == 'p') {
            if (*n_gen > 0) {
                rc = util_err(err, errlen, "%s:%d: prompt token after generated tokens", path,
                              ln);
                goto done;
            }
            if (*n_prompt == cap_p)
                *prompt = xrealloc(*prompt, (size_t)(cap_p *= 2) * sizeof(int));
            (*prompt)[(*n_prompt)++] = (int)v;
        } else {
            if (*n_gen == cap_g)
                *gen = xrealloc(*gen, (size_t)(cap_g *= 2) * sizeof(int));
            (*gen)[(*n_gen)++] = (int)v;
        }
    }
    if (*n_prompt == 0)
        rc = util_err(err, errlen, "%s: transcript holds no prompt tokens", path);
done:
    fclose(f);
    if (rc < 0) {
        free(*prompt);
        free(*gen);
        *prompt = *gen = NULL;
    }
    return rc;
}

double generate_ms_per_token(const GenResult *res)
{
    int n = res->n_forward - 1;
    if (n <= 0)
        return res->n_forward == 1 ? res->token_ms[0] : 0.0;
    return util_median(res->token_ms + 1, (size_t)n);
}

double generate_decode_ms_per_token(const GenResult *res)
{
    int first = res->n_prompt_run, n = res->n_forward - first;
    return n > 0 ? util_median(res->token_ms + first, (size_t)n) : 0.0;
}

void generate_result_free(GenResult *res)
{
    if (!res)
        return;
    free(res->tokens);
    free(res->text);
    free(res->token_ms);
    free(res->gen_text);
    memset(res, 0, sizeof *res);
}

/* Appends n bytes to a growing string. */
static void text_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* The new text and what of it has been handed out: text that may begin a stop string is
 * held back until the next piece shows whether it does. */
typedef struct {
    char *buf;
    size_t len, cap, emitted;
} GenText;

/* Index of the first stop string's start in t (or -1). */
static long stop_find(const GenOptions *opt, const GenText *t)
{
    long best = -1;
    for (int i = 0; i < opt->n_stops; i++) {
        if (!opt->stops[i][0])
            continue;
        const char *hit = strstr(t->buf, opt->stops[i]);
        if (hit && (best < 0 || hit - t->buf < best))
            best = hit - t->buf;
    }
    return best;
}

/* Bytes at the end of t that begin some stop string (to hold back). */
static size_t stop_holdback(const GenOptions *opt, const GenText *t)
{
    size_t hold = 0;
    for (int i = 0; i < opt->n_stops; i++) {
        size_t sl = strlen(opt->stops[i]);
        for (size_t k = sl > 1 ? sl - 1 : 0; k > hold; k--)
            if (k <= t->len && memcmp(t->buf + t->len - k, opt->stops[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* Hands out new text up to upto; returns non-zero when the receiver wants no more. */
static int gen_emit(const GenOptions *opt, GenText *t, size_t upto)
{
    if (upto <= t->emitted)
        return 0;
    const char *p = t->buf + t->emitted;
    size_t n = upto - t->emitted;
    t->emitted = upto;
    if (opt->stream) {
        fwrite(p, 1, n, opt->stream);
        fflush(opt->stream);
    }
    return opt->on_text ? opt->on_text(opt->on_text_ctx, p, n) : 0;
}

/* The prompt as token ids: given ids, or the text encoded (special-token text recognised
 * when asked), else BOS alone.  Returns 0 or -1 with err. */
static int gen_prompt_ids(const ModelConfig *c, const Tokenizer *tok, const GenOptions *opt,
                          int **prompt, size_t *n_prompt, char *err, size_t errlen)
{
    const char *text = opt->prompt ? opt->prompt : "";
    if (opt->prompt_ids) {
        *n_prompt = (size_t)opt->n_prompt_ids;
        *prompt = xmalloc((*n_prompt + 1) * sizeof(int));
        memcpy(*prompt, opt->prompt_ids, *n_prompt * sizeof(int));
    } else if (tokenizer_encode_prompt(tok, text, strlen(text), opt->special, 1, prompt,
                                       n_prompt, err, errlen) < 0) {
        return -1;
    }
    if (*n_prompt == 0) {
        /* Byte-level BPE adds no BOS: start from the model's BOS as generation does. */
        if (c->bos_id < 0) {
            free(*prompt);
            return util_err(err, errlen, "--prompt: empty prompt and the model has no BOS "
                            "token to start from");
        }
        *prompt = xrealloc(*prompt, sizeof(int));
        (*prompt)[0] = c->bos_id;
        *n_prompt = 1;
    }
    for (size_t i = 0; i < *n_prompt; i++)
        if ((*prompt)[i] < 0 || (*prompt)[i] >= c->vocab_size) {
            int bad = (*prompt)[i];
            free(*prompt);
            return util_err(err, errlen, "--prompt: token id %d outside the model's vocabulary "
                            "of %d", bad, c->vocab_size);
        }
    return 0;
}

/* One model the loop runs: the target (the backend's layers) or the draft. */
typedef struct {
    const ModelConfig *c;
    const HeadW *head;
    LayerBackend *be;
    Scratch scratch;
    float *x;    /* [rows][dim] the rows of a pass */
    int rows;    /* positions one pass takes at most */
} GenModel;

/* The state of one generate_run. */
typedef struct {
    const ModelConfig *c;
    const Tokenizer *tok;
    const GenOptions *opt;
    GenResult *res;
    GenModel tm;          /* the target */
    GenModel dm;          /* the draft (dm.c NULL: none) */
    GenDraft *draft;
    Sampler sampler;
    int last_n;           /* repeat-penalty window */
    int p0, end;          /* first position of this call, one past the last allowed */
    int prompt_rows;      /* prompt positions per pass (--batch within max_batch) */
    int draft_cap;        /* positions the draft can hold */
    float *logits;        /* [tm.rows][vocab] raw logits of the target's last pass */
    float *dlogits;       /* [vocab] the draft's logits */
    float *q;             /* [DRAFT_K_MAX + 1][vocab] the draft's distributions */
    float *work;          /* [vocab] a row under the penalty and the sampler */
    int *hist;            /* [last_n + DRAFT_K_MAX + 1] penalty window with drafts */
    int *toks;            /* [max rows] tokens of a pass */
    size_t tlen, tcap;    /* res->text */
    GenText gt;           /* the new text */
    FILE *echo;           /* where the prompt is echoed (NULL: nowhere) */
    double t_gen;         /* when the first new token was chosen (0: not yet) */
    DraftAuto au;          /* --draft-tokens auto */
    int k_fixed;          /* --draft-tokens K (0: auto) */
    int k_max;            /* drafted tokens a pass can verify */
} Gen;

enum { NEED_NONE, NEED_LAST, NEED_ALL };

/* Logits of the one position just run: the backend's own (LM head on workers) or x's. */
static void gen_logits_one(GenModel *m, const float *x, float *logits)
{
    if (!m->be->logits || !m->be->logits(m->be->ctx, logits))
        model_logits(m->c, m->head, &m->scratch, x, logits);
}

/* Runs positions pos..pos+n-1 holding toks[n] (n <= m->rows) through every layer: one
 * forward_n, or one forward per position where the backend has no forward_n or n is 1 (the
 * one-position path, exactly as before batching).  The backend's prepare sees every
 * position first, as in the one-position path.  Fills logits: [n][vocab] (NEED_ALL), the
 * last row's [vocab] (NEED_LAST) or nothing.  Returns the backend calls made, or -1 when
 * prepare ended the generation (err). */
static int gen_pass(GenModel *m, int pos, int n, const int *toks, int next_n, int need,
                    float *logits, char *err, size_t errlen)
{
    const ModelConfig *c = m->c;
    LayerBackend *be = m->be;
    const size_t dim = (size_t)c->dim, V = (size_t)c->vocab_size;
    for (int j = 0; j < n; j++)
        model_embed(c, m->head, toks[j], pos + j, m->x + (size_t)j * dim);
    if (n == 1 || !be->forward_n || n > be->max_batch) {
        for (int j = 0; j < n; j++) {
            float *xj = m->x + (size_t)j * dim;
            if (be->prepare && be->prepare(be->ctx, pos + j, err, errlen) < 0)
                return -1;
            be->forward(be->ctx, xj, pos + j, toks[j]);
            if (need == NEED_ALL || (need == NEED_LAST && j == n - 1))
                gen_logits_one(m, xj, logits + (need == NEED_ALL ? (size_t)j * V : 0));
        }
        return n;
    }
    for (int j = 0; j < n; j++)
        if (be->prepare && be->prepare(be->ctx, pos + j, err, errlen) < 0)
            return -1;
    if (be->want_rows && need != NEED_ALL)
        be->want_rows(be->ctx, need == NEED_LAST ? 1 : 0);
    be->forward_n(be->ctx, m->x, pos, n, toks, next_n);
    if (need == NEED_ALL) {
        if (!be->logits_n || !be->logits_n(be->ctx, logits, n))
            for (int j = 0; j < n; j++)
                model_logits(c, m->head, &m->scratch, m->x + (size_t)j * dim,
                             logits + (size_t)j * V);
    } else if (need == NEED_LAST) {
        /* the backend's logits of the last row (a split LM head: the rows of x are not
         * sent back), else one row of the controller's LM head on x, not n */
        gen_logits_one(m, m->x + (size_t)(n - 1) * dim, logits);
    }
    return 1;
}

/* Positions one pass of m takes: --batch, within what forward_n allows. */
static int gen_rows(const LayerBackend *be, int batch)
{
    int b = batch > 1 ? batch : 1;
    if (be->forward_n && be->max_batch > 0 && b > be->max_batch)
        b = be->max_batch;
    return b;
}

static void gen_model_init(GenModel *m, const ModelConfig *c, const HeadW *head,
                           LayerBackend *be, int rows)
{
    m->c = c;
    m->head = head;
    m->be = be;
    m->rows = rows;
    model_scratch_init(&m->scratch, c, 1);
    m->x = xmalloc((size_t)rows * (size_t)c->dim * sizeof(float));
}

static void gen_model_free(GenModel *m)
{
    if (!m->c)
        return;
    model_scratch_free(&m->scratch);
    free(m->x);
}

/* The token at position p of the sequence (p < the next position). */
static int gen_token_at(const Gen *g, int p)
{
    return p < g->p0 ? g->opt->history[p] : g->res->tokens[p - g->p0];
}

/* The penalties on work[vocab], over the last tokens and then extra[n_extra] (drafted
 * tokens not yet in the sequence): the repeat penalty (the set of ids counts), frequency and
 * presence (their counts; sampler_penalize_counts). */
static void gen_penalize(Gen *g, float *work, const int *extra, int n_extra)
{
    const GenOptions *opt = g->opt;
    const float repeat = opt->repeat_penalty > 0 ? opt->repeat_penalty : 1.0f;
    if (repeat == 1.0f && opt->frequency_penalty == 0 && opt->presence_penalty == 0)
        return;
    /* The window: the last last_n tokens of the whole sequence (a chat turn's or a server
     * request's history before this call included, as llama.cpp keeps them), then extra. */
    const int seq = g->p0 + g->res->n_tokens;
    const int first = opt->history ? 0 : g->p0;
    if (n_extra > g->last_n) {
        extra += n_extra - g->last_n;
        n_extra = g->last_n;
    }
    int n_old = g->last_n - n_extra;
    if (n_old > seq - first)
        n_old = seq - first;
    for (int i = 0; i < n_old; i++)
        g->hist[i] = gen_token_at(g, seq - n_old + i);
    if (n_extra > 0)
        memcpy(g->hist + n_old, extra, (size_t)n_extra * sizeof(int));
    sampler_penalize_counts(work, g->c->vocab_size, g->hist, n_old + n_extra, repeat,
                            opt->frequency_penalty, opt->presence_penalty);
}

/* With a draft at temperature > 0 every choice is a function of the position (its own
 * random numbers), so that the tokens do not depend on how positions were grouped. */
static int gen_per_position(const Gen *g)
{
    return g->draft && g->opt->temperature > 0;
}

/* --resume: the token forced at the next new token's place, else want. */
static int gen_forced(const Gen *g, int want)
{
    const GenOptions *opt = g->opt;
    int i = g->res->n_gen;
    return opt->forced && i < opt->n_forced ? opt->forced[i] : want;
}

/* The new token at position pos from its raw logits row (left unchanged): the penalty, then
 * the sampler; --resume's forced tokens override. */
static int gen_choose(Gen *g, const float *raw, int pos)
{
    const int V = g->c->vocab_size;
    if (g->t_gen == 0)
        g->t_gen = time_now();
    memcpy(g->work, raw, (size_t)V * sizeof(float));
    gen_penalize(g, g->work, NULL, 0);
    int next;
    if (gen_per_position(g)) {
        sampler_probs(&g->sampler, g->work);
        next = draft_draw(g->work, V, draft_uniform(g->opt->seed, pos,
                                                                DRAFT_U_RESIDUAL));
    } else {
        /* Sampling also when a resumed token is forced, so that the random stream stays
         * where an uninterrupted run would have it. */
        next = sampler_sample(&g->sampler, g->work);
    }
    next = gen_forced(g, next);
    g->res->n_gen++;
    return next;
}

/* The token that follows the last position run: appends it, writes the transcript, and (out
 * of the prompt) checks BOS/EOS, streams the text and looks for stop strings.  ms: the
 * position's share of its pass.  Returns 1 when the generation ends here. */
static int gen_take(Gen *g, int next, int in_prompt, double ms)
{
    const GenOptions *opt = g->opt;
    GenResult *res = g->res;
    const ModelConfig *c = g->c;
    res->token_ms[res->n_forward++] = ms;
    int token = res->tokens[res->n_tokens - 1];
    res->tokens[res->n_tokens++] = next;
    if (opt->transcript && !in_prompt) {
        fprintf(opt->transcript, "t %d\n", next);
        fflush(opt->transcript);
    }
    if (!in_prompt && (next == c->bos_id || next == c->eos_id) && next >= 0) {
        res->stopped_by = next == c->bos_id ? "bos" : "eos";
        return 1;
    }
    char piece[512];
    size_t n = tokenizer_decode_token(g->tok, token, next, piece, sizeof piece);
    text_append(&res->text, &g->tlen, &g->tcap, piece, n);
    if (in_prompt) {
        if (g->echo) {
            fwrite(piece, 1, n, g->echo);
            fflush(g->echo);
        }
        return 0;
    }
    GenText *gt = &g->gt;
    text_append(&gt->buf, &gt->len, &gt->cap, piece, n);
    long hit = opt->n_stops ? stop_find(opt, gt) : -1;
    if (hit >= 0) {
        gt->len = (size_t)hit;
        gt->buf[gt->len] = '\0';
        gen_emit(opt, gt, gt->len);
        res->stopped_by = "stop";
        return 1;
    }
    if (gen_emit(opt, gt, gt->len - (opt->n_stops ? stop_holdback(opt, gt) : 0))) {
        res->stopped_by = "client";
        return 1;
    }
    return 0;
}

/* Writes n rows of raw logits to --logits-out. */
static void gen_write_logits(const Gen *g, const float *rows, int n)
{
    if (g->opt->logits_out)
        fwrite(rows, sizeof(float), (size_t)n * (size_t)g->c->vocab_size, g->opt->logits_out);
}

/* Tokens drafted in the next round at position pos: 0 where no round is possible (no
 * draft, the draft's context or the steps left too short, or the draft cannot catch up). */
static int gen_draft_k(const Gen *g, int pos)
{
    if (!g->draft || (g->draft->n_valid < g->p0 && !g->opt->history))
        return -1;
    int k = g->k_fixed > 0 ? g->k_fixed : g->au.k < g->k_max ? g->au.k : g->k_max;
    if (k > g->end - pos - 1)
        k = g->end - pos - 1;
    if (k > g->draft_cap - pos - 1)
        k = g->draft_cap - pos - 1;
    /* greedy needs at least one draft; sampling can verify the draft's token at pos + 1
     * alone (a round of K = 0, keeping every position's choice on one rule) */
    return k < (g->opt->temperature > 0 ? 0 : 1) ? -1 : k;
}

/* The prompt's positions in passes of up to tm.rows; the last one chooses the first new
 * token.  Returns 1 when the generation ended, 0 to go on, -1 on a backend error. */
static int gen_prompt(Gen *g, const int *prompt, int n_prompt, char *err, size_t errlen)
{
    const GenOptions *opt = g->opt;
    GenResult *res = g->res;
    const int V = g->c->vocab_size, steps = g->end - g->p0;
    const int n_run = n_prompt < steps ? n_prompt : steps;
    for (int i = 0; i < n_run;) {
        const int pos = g->p0 + i;
        if (opt->cancel && __atomic_load_n(opt->cancel, __ATOMIC_RELAXED)) {
            res->stopped_by = "cancel";
            return 1;
        }
        const int rows = g->prompt_rows;
        int n = n_run - i < rows ? n_run - i : rows;
        const int samples = i + n == n_prompt; /* the prompt's last row chooses a token */
        /* the hint: the next chunk, else the first generation pass (drafts + 1, or 1); 1 when
         * nothing follows (the stop, or a later turn's prompt, as after a decoded token) */
        int left = n_run - i - n, k = gen_draft_k(g, pos + n);
        int next_n = left > 0 ? (left < rows ? left : rows)
                     : n_run < steps && k > 0 ? k + 1 : 1;
        double t0 = time_now();
        int need = opt->logits_out ? NEED_ALL : samples ? NEED_LAST : NEED_NONE;
        int calls = gen_pass(&g->tm, pos, n, prompt + i, next_n, need, g->logits, err, errlen);
        if (calls < 0)
            return -1;
        res->passes += calls;
        res->n_prompt_run += n;
        gen_write_logits(g, g->logits, need == NEED_ALL ? n : 0);
        double ms = (time_now() - t0) * 1e3 / n;
        for (int j = 0; j < n; j++, i++) {
            if (i < n_prompt - 1) {
                gen_take(g, prompt[i + 1], 1, ms);
                continue;
            }
            res->gen_passes++;
            const float *row = g->logits + (need == NEED_ALL ? (size_t)j * (size_t)V : 0);
            if (gen_take(g, gen_choose(g, row, pos + j + 1), 0, ms))
                return 1;
        }
    }
    return 0;
}

/* One position with the target alone. */
static int gen_step(Gen *g, char *err, size_t errlen)
{
    GenResult *res = g->res;
    const int pos = g->p0 + res->n_forward;
    int token = res->tokens[res->n_tokens - 1];
    double t0 = time_now();
    if (gen_pass(&g->tm, pos, 1, &token, 1, NEED_LAST, g->logits, err, errlen) < 0)
        return -1;
    res->passes++;
    res->gen_passes++;
    gen_write_logits(g, g->logits, 1);
    int next = gen_choose(g, g->logits, pos + 1);
    return gen_take(g, next, 0, (time_now() - t0) * 1e3);
}

/* The draft's distribution (or, greedy, its choice) after its logits at position pos, with
 * drafts[n_drafts] the drafted tokens so far; returns the drafted token for pos + 1. */
static int gen_draft_choose(Gen *g, float *q, const int *drafts, int n_drafts, int pos)
{
    const int V = g->c->vocab_size;
    memcpy(q, g->dlogits, (size_t)V * sizeof(float));
    gen_penalize(g, q, drafts, n_drafts);
    if (g->opt->temperature <= 0)
        return kernels_argmax(q, V);
    sampler_probs(&g->sampler, q);
    return draft_draw(q, V, draft_uniform(g->opt->seed, pos + 1,
                                                      DRAFT_U_DRAFT));
}

/* Brings the draft's KV caches up to position pos - 1 and runs pos too: g->dlogits then
 * holds its logits at pos. */
static void gen_draft_catch_up(Gen *g, int pos)
{
    GenDraft *d = g->draft;
    GenResult *res = g->res;
    int from = d->n_valid < pos ? d->n_valid : pos;
    if (from < g->p0 && !g->opt->history)
        from = g->p0; /* cannot happen: gen_draft_k refuses */
    while (from <= pos) {
        int n = pos + 1 - from < g->dm.rows ? pos + 1 - from : g->dm.rows;
        for (int j = 0; j < n; j++)
            g->toks[j] = gen_token_at(g, from + j);
        int left = pos + 1 - from - n;
        res->draft_forwards += gen_pass(&g->dm, from, n, g->toks,
                                        left > 0 ? (left < g->dm.rows ? left : g->dm.rows) : 1,
                                        left > 0 ? NEED_NONE : NEED_LAST, g->dlogits, NULL, 0);
        from += n;
    }
    d->n_valid = pos + 1;
}

/* One round at the next position pos: the draft proposes k tokens one at a time, the target
 * runs pos..pos+k in one pass, and draft.c's rule keeps a prefix of the drafts and
 * adds one token of its own.  Greedy keeps a draft while it equals the target's choice;
 * sampling, when every draft is kept, lets the draft propose one more token for the last
 * row (the run of the draft the next round would make anyway), so that every position's
 * token comes from the same rule with that position's random numbers.  Returns as gen_step. */
static int gen_round(Gen *g, int k, char *err, size_t errlen)
{
    GenResult *res = g->res;
    GenDraft *d = g->draft;
    const int V = g->c->vocab_size, pos = g->p0 + res->n_forward;
    const int greedy = g->opt->temperature <= 0;
    const size_t Vs = (size_t)V;
    int drafts[DRAFT_K_MAX + 2];
    double t0 = time_now();
    int forwards0 = res->draft_forwards;
    gen_draft_catch_up(g, pos);
    for (int j = 0; j < (k > 0 ? k : 1); j++) { /* k = 0 (sampling): the draft's token alone */
        if (j > 0) { /* the draft runs its own previous proposal */
            res->draft_forwards += gen_pass(&g->dm, pos + j, 1, &drafts[j - 1], 1, NEED_LAST,
                                            g->dlogits, NULL, 0);
            d->n_valid = pos + j + 1;
        }
        drafts[j] = gen_draft_choose(g, g->q + (size_t)j * Vs, drafts, j, pos + j);
    }
    double t_draft = time_now() - t0;
    int draft_forwards = res->draft_forwards - forwards0;
    double t1 = time_now();
    g->toks[0] = res->tokens[res->n_tokens - 1];
    memcpy(g->toks + 1, drafts, (size_t)k * sizeof(int));
    int hint = gen_draft_k(g, pos + k + 1);
    int calls = gen_pass(&g->tm, pos, k + 1, g->toks, hint > 0 ? hint + 1 : 1,
                         k > 0 ? NEED_ALL : NEED_LAST, g->logits, err, errlen);
    if (calls < 0)
        return -1;
    res->passes += calls;
    double t_pass = time_now() - t1;
    res->gen_passes++;
    res->draft_rounds++;
    res->draft_k_sum += k;
    const int first = res->n_forward;
    int verified = 0, kept_n = 0, stop = 0;
    for (int j = 0; j <= k && !stop; j++) {
        const float *raw = g->logits + (size_t)j * Vs;
        float *p = g->work;
        memcpy(p, raw, Vs * sizeof(float));
        gen_penalize(g, p, NULL, 0); /* the kept drafts are in the sequence already */
        if (g->t_gen == 0)
            g->t_gen = time_now();
        int next, kept = 0;
        if (greedy) {
            next = kernels_argmax(p, V);
            if (j < k) {
                kept = next == drafts[j];
                verified++;
            }
        } else {
            if (j == k && k > 0) {
                /* every draft kept: the draft proposes one more for the last row */
                t0 = time_now();
                res->draft_forwards += gen_pass(&g->dm, pos + k, 1, &drafts[k - 1], 1,
                                                NEED_LAST, g->dlogits, NULL, 0);
                d->n_valid = pos + k + 1;
                drafts[k] = gen_draft_choose(g, g->q + (size_t)k * Vs, drafts, k, pos + k);
                t_draft += time_now() - t0;
                draft_forwards++;
            }
            sampler_probs(&g->sampler, p);
            next = draft_step(p, g->q + (size_t)j * Vs, V, drafts[j],
                                    draft_uniform(g->opt->seed, pos + j + 1,
                                                        DRAFT_U_KEEP),
                                    draft_uniform(g->opt->seed, pos + j + 1,
                                                        DRAFT_U_RESIDUAL),
                                    &kept);
            verified++;
        }
        int forced = gen_forced(g, next);
        if (forced != next) { /* --resume: the transcript's token, and the round ends */
            next = forced;
            kept = 0;
        }
        kept_n += kept;
        res->n_gen++;
        gen_write_logits(g, raw, 1);
        stop = gen_take(g, next, 0, 0);
        if (!kept)
            break;
    }
    res->draft_tokens += verified;
    res->draft_accepted += kept_n;
    res->draft_s += t_draft;
    res->verify_s += t_pass;
    /* the round's time, shared by the positions it kept */
    double ms = (t_draft + t_pass) * 1e3 / (res->n_forward - first);
    for (int i = first; i < res->n_forward; i++)
        res->token_ms[i] = ms;
    if (d->n_valid > g->p0 + res->n_forward)
        d->n_valid = g->p0 + res->n_forward; /* its entries past that are rolled back */
    if (g->k_fixed == 0)
        draft_auto_update(&g->au, verified, kept_n, t_draft, draft_forwards, t_pass,
                                k + 1);
    return stop;
}

int generate_run(const ModelConfig *c, const Tokenizer *tok, const HeadW *head,
                 LayerBackend *backend, const GenOptions *opt, GenResult *res, char *err,
                 size_t errlen)
{
    memset(res, 0, sizeof *res);
    int *prompt = NULL;
    size_t n_prompt = 0;
    if (gen_prompt_ids(c, tok, opt, &prompt, &n_prompt, err, errlen) < 0)
        return -1;
    const int p0 = opt->start_pos > 0 ? opt->start_pos : 0;
    const int ctx = opt->ctx > 0 && opt->ctx < c->context_length ? opt->ctx : c->context_length;
    if ((long)n_prompt + p0 > ctx) {
        free(prompt);
        return util_err(err, errlen, "--prompt: %zu tokens%s exceed the context of %d "
                        "positions", n_prompt, p0 ? " after the conversation so far" : "", ctx);
    }
    /* end: one past the last position run */
    int end = opt->steps;
    const char *cap_reason = "steps";
    if (end > ctx) {
        end = ctx;
        cap_reason = "context";
    }
    if (end < p0 + 1)
        end = p0 + 1;
    if (opt->n_predict > 0 && p0 + (long)n_prompt - 1 + opt->n_predict < end) {
        end = p0 + (int)n_prompt - 1 + opt->n_predict;
        cap_reason = "n_predict";
    }
    /* -n N asks for exactly N new tokens, the last sampled from the prompt's last position
     * without a pass of its own: only a cap by --steps or the context leaves too little room */
    if (p0 + (long)n_prompt >= end && !opt->on_text && strcmp(cap_reason, "n_predict"))
        fprintf(stderr, "headsplit: warning: the prompt's %zu tokens leave no room for new ones (--steps %d, "
                 "context %d): raise --steps/--ctx-size or use -n\n", n_prompt, opt->steps, ctx);
    const int steps = end - p0; /* positions run by this call */

    Gen g;
    memset(&g, 0, sizeof g);
    g.c = c;
    g.tok = tok;
    g.opt = opt;
    g.res = res;
    g.p0 = p0;
    g.end = end;
    g.draft = opt->draft;
    res->n_prompt = (int)n_prompt;
    res->tokens = xmalloc(((size_t)steps + n_prompt + 1) * sizeof(int));
    res->token_ms = xmalloc((size_t)steps * sizeof(double));
    g.tcap = 256;
    res->text = xmalloc(g.tcap);
    res->text[0] = '\0';
    g.gt = (GenText){xmalloc(256), 0, 256, 0};
    g.gt.buf[0] = '\0';

    sampler_init(&g.sampler, c->vocab_size, opt->temperature, opt->top_p, opt->seed);
    sampler_set_filters(&g.sampler, opt->top_k, opt->min_p);
    g.last_n = opt->repeat_last_n > 0 ? opt->repeat_last_n : 64;
    g.hist = xmalloc((size_t)(g.last_n + DRAFT_K_MAX + 1) * sizeof(int));
    const size_t V = (size_t)c->vocab_size;
    int rows = gen_rows(backend, opt->batch);
    g.prompt_rows = rows;
    int logit_rows = opt->logits_out ? rows : 1; /* rows of logits a pass needs */
    if (g.draft) {
        /* a round verifies up to DRAFT_K_MAX + 1 positions in one pass */
        int kmax = g.draft->k > 0 ? g.draft->k : DRAFT_K_MAX;
        if (backend->forward_n && backend->max_batch > 0 && kmax + 1 > backend->max_batch)
            kmax = backend->max_batch > 1 ? backend->max_batch - 1 : 1;
        if (rows < kmax + 1)
            rows = kmax + 1;
        if (logit_rows < kmax + 1)
            logit_rows = kmax + 1;
        g.k_max = kmax;
        g.k_fixed = g.draft->k > kmax ? kmax : g.draft->k;
        draft_auto_init(&g.au, kmax < 4 ? kmax : 4, !backend->forward_n);
        int drows = gen_rows(&g.draft->backend, opt->batch);
        gen_model_init(&g.dm, g.draft->c, g.draft->head, &g.draft->backend, drows);
        g.draft_cap = g.draft->kv_cap < g.draft->c->context_length ? g.draft->kv_cap
                                                                    : g.draft->c->context_length;
        if (g.draft->n_valid > p0)
            g.draft->n_valid = p0; /* what follows the common prefix is no longer valid */
        g.dlogits = xmalloc(V * sizeof(float));
        g.q = xmalloc((size_t)(DRAFT_K_MAX + 1) * V * sizeof(float));
        if (drows > rows)
            rows = drows; /* g.toks serves both */
    }
    gen_model_init(&g.tm, c, head, backend, rows);
    g.logits = xmalloc((size_t)logit_rows * V * sizeof(float));
    g.work = xmalloc(V * sizeof(float));
    g.toks = xmalloc((size_t)(rows + 1) * sizeof(int));

    res->tokens[0] = prompt[0];
    res->n_tokens = 1;
    res->stopped_by = cap_reason;
    if (opt->transcript) {
        /* Line format: a header, then "p ID" per prompt token and "t ID" per chosen token. */
        fprintf(opt->transcript, "headsplit-transcript 1\nmodel %s\n",
                opt->model_path ? opt->model_path : "?");
        for (size_t i = 0; i < n_prompt; i++)
            fprintf(opt->transcript, "p %d\n", prompt[i]);
        fflush(opt->transcript);
    }
    g.echo = opt->no_echo ? NULL : opt->stream;
    if (prompt[0] != c->bos_id) {
        /* No BOS in front (GPT-2): the first prompt token is text too. */
        char piece[512];
        size_t n = tokenizer_decode_token(tok, -1, prompt[0], piece, sizeof piece);
        text_append(&res->text, &g.tlen, &g.tcap, piece, n);
        if (g.echo)
            fwrite(piece, 1, n, g.echo);
    }
    double t_first = time_now();
    int rc = gen_prompt(&g, prompt, (int)n_prompt, err, errlen);
    while (rc == 0 && p0 + res->n_forward < end) {
        if (opt->cancel && __atomic_load_n(opt->cancel, __ATOMIC_RELAXED)) {
            res->stopped_by = "cancel";
            break;
        }
        int k = gen_draft_k(&g, p0 + res->n_forward);
        rc = k >= 0 ? gen_round(&g, k, err, errlen) : gen_step(&g, err, errlen);
    }
    rc = rc < 0 ? -1 : 0;
    res->next_pos = p0 + res->n_forward;
    if (strcmp(res->stopped_by, "stop") != 0 && strcmp(res->stopped_by, "client") != 0)
        gen_emit(opt, &g.gt, g.gt.len);
    double t_end = time_now();
    res->prompt_ms = ((g.t_gen > 0 ? g.t_gen : t_end) - t_first) * 1e3;
    res->gen_ms = g.t_gen > 0 ? (t_end - g.t_gen) * 1e3 : 0;
    res->gen_text = g.gt.buf;
    if (opt->stream && !opt->no_echo) {
        fputc('\n', opt->stream);
        fflush(opt->stream);
    }
    gen_model_free(&g.tm);
    gen_model_free(&g.dm);
    free(g.logits);
    free(g.dlogits);
    free(g.q);
    free(g.work);
    free(g.hist);
    free(g.toks);
    free(prompt);
    sampler_free(&g.sampler);
    return rc;
}
