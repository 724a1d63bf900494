/* generate.c: the token loop (prompt forcing, sampling, stopping, streaming, timing). */
#include "generate.h"

#include "sampler.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double generate_ms_per_token(const GenResult *res)
{
    int n = res->n_forward - 1;
    if (n <= 0)
        return res->n_forward == 1 ? res->token_ms[0] : 0.0;
    double *v = xmalloc((size_t)n * sizeof(double));
    memcpy(v, res->token_ms + 1, (size_t)n * sizeof(double));
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return m;
}

void generate_result_free(GenResult *res)
{
    if (!res)
        return;
    free(res->tokens);
    free(res->text);
    free(res->token_ms);
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

int generate_run(const ModelConfig *c, const Tokenizer *tok, const HeadW *head,
                 LayerBackend *backend, const GenOptions *opt, GenResult *res, char *err,
                 size_t errlen)
{
    memset(res, 0, sizeof *res);
    int *prompt = NULL;
    size_t n_prompt = 0;
    const char *text = opt->prompt ? opt->prompt : "";
    if (tokenizer_encode(tok, text, strlen(text), &prompt, &n_prompt, err, errlen) < 0)
        return -1;
    if (n_prompt == 0) {
        /* Byte-level BPE adds no BOS: start from the model's BOS as generation does. */
        if (c->bos_id < 0) {
            free(prompt);
            return util_err(err, errlen, "--prompt: empty prompt and the model has no BOS "
                            "token to start from");
        }
        prompt = xrealloc(prompt, sizeof(int));
        prompt[0] = c->bos_id;
        n_prompt = 1;
    }
    if ((long)n_prompt > c->context_length) {
        free(prompt);
        return util_err(err, errlen, "--prompt: %zu tokens exceed the model's context of %d "
                        "positions", n_prompt, c->context_length);
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= c->vocab_size) {
            int bad = prompt[i];
            free(prompt);
            return util_err(err, errlen, "--prompt: token id %d outside the model's vocabulary "
                            "of %d", bad, c->vocab_size);
        }
    int steps = opt->steps;
    const char *cap_reason = "steps";
    if (steps > c->context_length) {
        steps = c->context_length;
        cap_reason = "context";
    }
    if (steps < 1)
        steps = 1;

    res->n_prompt = (int)n_prompt;
    res->tokens = xmalloc(((size_t)steps + n_prompt + 1) * sizeof(int));
    res->token_ms = xmalloc((size_t)steps * sizeof(double));
    size_t tlen = 0, tcap = 256;
    res->text = xmalloc(tcap);
    res->text[0] = '\0';

    Sampler sampler;
    sampler_init(&sampler, c->vocab_size, opt->temperature, opt->top_p, opt->seed);
    Scratch scratch;
    model_scratch_init(&scratch, c, 1);
    float *x = xmalloc((size_t)c->dim * sizeof(float));
    float *logits = xmalloc((size_t)c->vocab_size * sizeof(float));

    res->tokens[0] = prompt[0];
    res->n_tokens = 1;
    res->stopped_by = cap_reason;
    if (opt->transcript) {
        /* Line format: a header, then "p ID" per prompt token and "t ID" per chosen token. */
        fprintf(opt->transcript, "headsplit-transcript 1\n");
        for (size_t i = 0; i < n_prompt; i++)
            fprintf(opt->transcript, "p %d\n", prompt[i]);
        fflush(opt->transcript);
    }
    int token = prompt[0];
    char piece[512];
    if (token != c->bos_id) {
        /* No BOS in front (GPT-2): the first prompt token is text too. */
        size_t n = tokenizer_decode_token(tok, -1, token, piece, sizeof piece);
        text_append(&res->text, &tlen, &tcap, piece, n);
        if (opt->stream)
            fwrite(piece, 1, n, opt->stream);
    }
    for (int pos = 0; pos < steps; pos++) {
        double t0 = time_now();
        model_embed(c, head, token, pos, x);
        backend->forward(backend->ctx, x, pos, token);
        model_logits(c, head, &scratch, x, logits);
        if (opt->logits_out)
            fwrite(logits, sizeof(float), (size_t)c->vocab_size, opt->logits_out);
        int next;
        int gen_index = pos - ((int)n_prompt - 1);
        if (pos < (int)n_prompt - 1)
            next = prompt[pos + 1];
        else if (opt->forced && gen_index < opt->n_forced)
            next = opt->forced[gen_index];
        else
            next = sampler_sample(&sampler, logits);
        res->token_ms[pos] = (time_now() - t0) * 1e3;
        res->n_forward = pos + 1;
        res->tokens[res->n_tokens++] = next;
        if (opt->transcript && pos >= (int)n_prompt - 1) {
            fprintf(opt->transcript, "t %d\n", next);
            fflush(opt->transcript);
        }
        if (pos >= (int)n_prompt - 1 && (next == c->bos_id || next == c->eos_id) &&
            next >= 0) {
            res->stopped_by = next == c->bos_id ? "bos" : "eos";
            break;
        }
        size_t n = tokenizer_decode_token(tok, token, next, piece, sizeof piece);
        text_append(&res->text, &tlen, &tcap, piece, n);
        if (opt->stream) {
            fwrite(piece, 1, n, opt->stream);
            fflush(opt->stream);
        }
        token = next;
    }
    if (opt->stream) {
        fputc('\n', opt->stream);
        fflush(opt->stream);
    }
    free(x);
    free(logits);
    free(prompt);
    model_scratch_free(&scratch);
    sampler_free(&sampler);
    return 0;
}
