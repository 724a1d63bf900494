/* generate.h: the controller's token loop, independent of where the layers run.  The layers
 * are reached through a small backend interface (backend.h): in-process (src/model/local.c)
 * or distributed (src/engine). */
#ifndef HEADSPLIT_GENERATE_H
#define HEADSPLIT_GENERATE_H

#include "backend.h"
#include "config.h"
#include "model.h"
#include "tokenizer.h"

#include <stdint.h>
#include <stdio.h>

/* A draft model for speculative decoding, run on the controller: its configuration, head
 * and layers (a backend of its own, with its own KV caches).  The caller keeps it across
 * generations; n_valid says how many positions of the current sequence its caches hold. */
typedef struct {
    const ModelConfig *c;
    const HeadW *head;
    LayerBackend backend;
    int kv_cap;         /* positions its KV caches hold */
    int k;              /* tokens drafted per round, 1..DRAFT_K_MAX; 0: auto */
    int n_valid;        /* positions 0..n_valid-1 of the sequence are in its KV caches */
} GenDraft;

typedef struct {
    const char *prompt;
    int steps;          /* positions in all, prompt included (capped at the context) */
    float temperature;  /* 0: greedy, lowest id on ties */
    float top_p;
    uint64_t seed;
    FILE *stream;       /* text is printed here as it is produced (NULL: quiet) */
    FILE *logits_out;   /* raw float32 logits of every position (NULL: none) */
    FILE *transcript;   /* prompt + every token id, flushed per token (NULL: none) */
    const int *forced;  /* resume: tokens to force after the prompt (NULL: none) */
    int n_forced;
    const int *prompt_ids; /* resume: prompt as token ids instead of text (NULL: encode) */
    int n_prompt_ids;
    const char *model_path; /* written into the transcript */
    /* Since issue 18; zero means off (the caller memsets or names fields). */
    int n_predict;      /* new tokens at most (0: no limit but steps and ctx) */
    int ctx;            /* positions the KV caches hold (0: the model's context) */
    int top_k;          /* 0: off */
    float min_p;        /* 0: off */
    float repeat_penalty; /* 0 or 1: off (llama.cpp semantics) */
    int repeat_last_n;  /* tokens the penalty looks back over (0: 64) */
    const char *const *stops; /* stop strings: the text ends before the first found */
    int n_stops;
    int special;        /* encode special-token text ("</s>") as the special token */
    int start_pos;      /* continue: positions 0..start_pos-1 already hold earlier tokens */
    int no_echo;        /* stream only the new text, not the prompt */
    const volatile int *cancel; /* set (e.g. by SIGINT) to stop after the current token */
    /* Called with each piece of new text (after stop-string hold-back); non-zero stops. */
    int (*on_text)(void *ctx, const char *text, size_t n);
    void *on_text_ctx;
    /* Since issue 17 */
    int batch;          /* prompt positions per pass (0 or 1: one at a time) */
    GenDraft *draft;    /* speculative decoding with this draft (NULL: none) */
    const int *history; /* [start_pos] the tokens at positions 0..start_pos-1 (NULL: not
                         * known; a draft that lacks them then does not draft) */
    /* Since issue 29: OpenAI's penalties as llama.cpp applies them, over the repeat
     * penalty's window (sampler_penalize_counts; 0: off) */
    float frequency_penalty, presence_penalty;
} GenOptions;

typedef struct {
    int *tokens;        /* [n_tokens]: prompt ids, then each chosen token */
    int n_tokens;
    int n_prompt;
    int n_forward;      /* positions run and kept (their KV entries are in place) */
    char *text;         /* decoded text of tokens[1..] (prompt echoed), NUL-terminated */
    double *token_ms;   /* [n_forward] wall time of each position */
    const char *stopped_by; /* "steps", "bos", "eos", "context", "n_predict", "stop",
                             * "cancel" or "client" */
    char *gen_text;     /* the new text only, cut before a stop string */
    int n_gen;          /* tokens sampled */
    double prompt_ms, gen_ms; /* wall time of the prompt's positions and of the rest */
    int next_pos;       /* first position not yet in the KV caches */
    /* Since issue 17 */
    int n_prompt_run;   /* prompt positions run (n_prompt unless --steps cut it) */
    int passes;         /* target forward passes (a forward_n call or one position) */
    int gen_passes;     /* of which chose new tokens (the prompt's last pass included) */
    long draft_tokens;  /* drafted tokens verified by the target */
    long draft_accepted; /* of which kept */
    int draft_rounds;   /* verifying passes */
    long draft_k_sum;   /* drafted tokens asked for, summed over the rounds (mean K) */
    int draft_forwards; /* the draft model's forward passes */
    double draft_s, verify_s; /* seconds in the draft's passes and in the verifying passes */
} GenResult;

/* Encodes the prompt and runs the loop: the prompt in passes of up to batch positions, then
 * sampling, one position per pass or, with a draft, rounds of drafted tokens verified in one
 * pass; stops after steps positions, n_predict new tokens, at BOS/EOS, a stop string or
 * cancel.  With start_pos
 * the prompt continues a sequence whose KV entries are in place (chat turns).  Returns 0, or -1 with err (prompt too long, empty model). */
int generate_run(const ModelConfig *c, const Tokenizer *tok, const HeadW *head,
                 LayerBackend *backend, const GenOptions *opt, GenResult *res, char *err,
                 size_t errlen);
void generate_result_free(GenResult *res);

/* Reads a transcript written with GenOptions.transcript: prompt ids and generated ids
 * (malloc'ed).  Validates ids against vocab.  Returns 0, or -1 with err naming file and line. */
int generate_read_transcript(const char *path, int vocab, int **prompt, int *n_prompt,
                             int **gen, int *n_gen, char *err, size_t errlen);

/* Median of the per-token times after the first (warm-up) position. */
double generate_ms_per_token(const GenResult *res);

/* Median of the decode positions' times alone: the positions after the prompt's
 * (token_ms[n_prompt_run..n_forward-1], each run by a pass that decodes one token or, with a
 * draft, its share of a verifying pass); 0 when no position was decoded. */
double generate_decode_ms_per_token(const GenResult *res);

#endif
