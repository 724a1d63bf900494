/* generate.c: the token loop (prompt forcing, sampling, stopping, streaming, timing). */
#include "generate.h"

#include "sampler.h"
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
    } else if ((opt->special
                    ? tokenizer_encode_special(tok, text, strlen(text), prompt, n_prompt, err,
                                               errlen)
                    : tokenizer_encode(tok, text, strlen(text), prompt, n_prompt, err,
                                       errlen)) < 0) {
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
    if (p0 + (long)n_prompt >= end && !opt->on_text)
        fprintf(stderr, "headsplit: warning: the prompt's %zu tokens leave no room for new ones (--steps %d, "
                 "context %d): raise --steps/--ctx-size or use -n\n", n_prompt, opt->steps, ctx);
    const int steps = end - p0; /* positions run by this call */

    res->n_prompt = (int)n_prompt;
    res->tokens = xmalloc(((size_t)steps + n_prompt + 1) * sizeof(int));
    res->token_ms = xmalloc((size_t)steps * sizeof(double));
    size_t tlen = 0, tcap = 256;
    res->text = xmalloc(tcap);
    res->text[0] = '\0';
    GenText gt = {xmalloc(256), 0, 256, 0};
    gt.buf[0] = '\0';

    Sampler sampler;
    sampler_init(&sampler, c->vocab_size, opt->temperature, opt->top_p, opt->seed);
    sampler_set_filters(&sampler, opt->top_k, opt->min_p);
    const int last_n = opt->repeat_last_n > 0 ? opt->repeat_last_n : 64;
    Scratch scratch;
    model_scratch_init(&scratch, c, 1);
    float *x = xmalloc((size_t)c->dim * sizeof(float));
    float *logits = xmalloc((size_t)c->vocab_size * sizeof(float));

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
    int token = prompt[0];
    char piece[512];
    FILE *echo = opt->no_echo ? NULL : opt->stream;
    if (token != c->bos_id) {
        /* No BOS in front (GPT-2): the first prompt token is text too. */
        size_t n = tokenizer_decode_token(tok, -1, token, piece, sizeof piece);
        text_append(&res->text, &tlen, &tcap, piece, n);
        if (echo)
            fwrite(piece, 1, n, echo);
    }
    int rc = 0;
    double t_first = time_now(), t_gen = 0;
    for (int i = 0; i < steps; i++) {
        const int pos = p0 + i;
        if (opt->cancel && *opt->cancel) {
            res->stopped_by = "cancel";
            break;
        }
        if (backend->prepare && backend->prepare(backend->ctx, pos, err, errlen) < 0) {
            rc = -1;
            break;
        }
        double t0 = time_now();
        model_embed(c, head, token, pos, x);
        backend->forward(backend->ctx, x, pos, token);
        if (!backend->logits || !backend->logits(backend->ctx, logits))
            model_logits(c, head, &scratch, x, logits);
        if (opt->logits_out)
            fwrite(logits, sizeof(float), (size_t)c->vocab_size, opt->logits_out);
        res->next_pos = pos + 1;
        int next;
        const int in_prompt = i < (int)n_prompt - 1;
        int gen_index = i - ((int)n_prompt - 1);
        if (in_prompt)
            next = prompt[i + 1];
        else {
            if (gen_index == 0)
                t_gen = time_now();
            if (opt->repeat_penalty > 0 && opt->repeat_penalty != 1.0f) {
                int from = res->n_tokens > last_n ? res->n_tokens - last_n : 0;
                sampler_penalize(logits, c->vocab_size, res->tokens + from,
                                 res->n_tokens - from, opt->repeat_penalty);
            }
            /* Sampling also when a resumed token is forced, so that the random stream stays
             * where an uninterrupted run would have it. */
            next = sampler_sample(&sampler, logits);
            if (opt->forced && gen_index < opt->n_forced)
                next = opt->forced[gen_index];
            res->n_gen++;
        }
        res->token_ms[i] = (time_now() - t0) * 1e3;
        res->n_forward = i + 1;
        res->tokens[res->n_tokens++] = next;
        if (opt->transcript && !in_prompt) {
            fprintf(opt->transcript, "t %d\n", next);
            fflush(opt->transcript);
        }
        if (!in_prompt && (next == c->bos_id || next == c->eos_id) && next >= 0) {
            res->stopped_by = next == c->bos_id ? "bos" : "eos";
            break;
        }
        size_t n = tokenizer_decode_token(tok, token, next, piece, sizeof piece);
        text_append(&res->text, &tlen, &tcap, piece, n);
        token = next;
        if (in_prompt) {
            if (echo) {
                fwrite(piece, 1, n, echo);
                fflush(echo);
            }
            continue;
        }
        text_append(&gt.buf, &gt.len, &gt.cap, piece, n);
        long hit = opt->n_stops ? stop_find(opt, &gt) : -1;
        if (hit >= 0) {
            gt.len = (size_t)hit;
            gt.buf[gt.len] = '\0';
            gen_emit(opt, &gt, gt.len);
            res->stopped_by = "stop";
            break;
        }
        if (gen_emit(opt, &gt, gt.len - (opt->n_stops ? stop_holdback(opt, &gt) : 0))) {
            res->stopped_by = "client";
            break;
        }
    }
    if (strcmp(res->stopped_by, "stop") != 0 && strcmp(res->stopped_by, "client") != 0)
        gen_emit(opt, &gt, gt.len);
    double t_end = time_now();
    res->prompt_ms = ((t_gen > 0 ? t_gen : t_end) - t_first) * 1e3;
    res->gen_ms = t_gen > 0 ? (t_end - t_gen) * 1e3 : 0;
    res->gen_text = gt.buf;
    if (opt->stream && !opt->no_echo) {
        fputc('\n', opt->stream);
        fflush(opt->stream);
    }
    free(x);
    free(logits);
    free(prompt);
    model_scratch_free(&scratch);
    sampler_free(&sampler);
    return rc;
}
