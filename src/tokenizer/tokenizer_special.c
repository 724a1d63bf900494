/* tokenizer_special.c: special-token text in prompts ("</s>", "<|im_start|>") encoded as the
 * special token itself, as llama.cpp does with parse_special, so that chat templates reach the
 * model in its own format.  The vocabulary stores no piece types, so a piece counts as
 * special when it is BOS, EOS or UNK, or is spelt as the control tokens of the common
 * families are: "<|...|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>". */
#include "tokenizer_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

int tokenizer_is_special(const Tokenizer *t, int id)
{
    if (id < 0 || id >= t->vocab_size)
        return 0;
    if (id == t->bos || id == t->eos || id == t->unk)
        return 1;
    size_t n;
    const unsigned char *p = tokenizer_piece(t, id, &n);
    if (n >= 5 && p[0] == '<' && p[1] == '|' && p[n - 2] == '|' && p[n - 1] == '>')
        return 1;
    static const char *const named[] = {"<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>",
                                        "<pad>"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (n == strlen(named[i]) && memcmp(p, named[i], n) == 0)
            return 1;
    return 0;
}

/* The longest special piece spelt at text[0..len), or -1; *n_match its length. */
static int special_at(const Tokenizer *t, const char *text, size_t len, size_t *n_match)
{
    if (text[0] != '<')
        return -1;
    /* SentencePiece's control tokens by their usual spelling, whatever the stored piece
     * (llama2.c's tokenizer.bin stores BOS as "\n<s>\n") */
    if (t->kind != TOKENIZER_GPT2) {
        const struct {
            const char *s;
            int id;
        } ctl[] = {{"</s>", t->eos}, {"<s>", t->bos}, {"<unk>", t->unk}};
        for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
            size_t k = strlen(ctl[i].s);
            if (ctl[i].id >= 0 && len >= k && memcmp(text, ctl[i].s, k) == 0) {
                *n_match = k;
                return ctl[i].id;
            }
        }
    }
    size_t max = len < (size_t)t->max_piece_len ? len : (size_t)t->max_piece_len;
    for (size_t k = max; k >= 3; k--) {
        if (text[k - 1] != '>')
            continue;
        int id = tokenizer_lookup_piece(t, text, k);
        if (id >= 0 && tokenizer_is_special(t, id)) {
            *n_match = k;
            return id;
        }
    }
    return -1;
}

/* Appends the encoding of a text segment, without the BOS that tokenizer_encode adds (and,
 * without add_special, without the post-processor's tokens). */
static int encode_segment(const Tokenizer *t, const char *s, size_t n, int add_special,
                          int **ids, size_t *n_ids, size_t *cap, char *err, size_t errlen)
{
    int *seg = NULL;
    size_t ns = 0;
    if (tokenizer_encode_opts(t, s, n, add_special, &seg, &ns, err, errlen) < 0)
        return -1;
    size_t from = ns > 0 && t->add_bos && seg[0] == t->bos ? 1 : 0;
    if (*n_ids + ns + 1 > *cap) {
        *cap = (*n_ids + ns + 1) * 2;
        *ids = xrealloc(*ids, *cap * sizeof(int));
    }
    memcpy(*ids + *n_ids, seg + from, (ns - from) * sizeof(int));
    *n_ids += ns - from;
    free(seg);
    return 0;
}

/* tokenizer_encode_special; without add_special no BOS is put in front and the segments
 * between special text are encoded without the post-processor's tokens. */
static int encode_special(const Tokenizer *t, const char *text, size_t len, int add_special,
                          int **ids, size_t *n_ids, char *err, size_t errlen)
{
    const int bos_front = add_special && t->add_bos && t->bos >= 0;
    /* Without special text this is tokenizer_encode exactly (BOS included). */
    size_t cap = 64, start = 0;
    int *out = xmalloc(cap * sizeof(int));
    size_t n = 0;
    int segments = 0;
    for (size_t i = 0; i <= len; i++) {
        size_t m = 0;
        int id = i < len ? special_at(t, text + i, len - i, &m) : -1;
        if (id < 0 && i < len)
            continue;
        if (i > start || (segments == 0 && id < 0)) {
            if (segments == 0 && bos_front)
                out[n++] = t->bos; /* BOS once, in front */
            if (i > start && encode_segment(t, text + start, i - start, add_special, &out, &n,
                                            &cap, err, errlen) < 0) {
                free(out);
                return -1;
            }
            segments++;
        }
        if (id >= 0) {
            if (segments == 0 && bos_front && id != t->bos)
                out[n++] = t->bos;
            segments++;
            if (n + 1 >= cap)
                out = xrealloc(out, (cap *= 2) * sizeof(int));
            out[n++] = id;
            i += m - 1;
            start = i + 1;
        }
    }
    *ids = out;
    *n_ids = n;
    return 0;
}

int tokenizer_encode_special(const Tokenizer *t, const char *text, size_t len, int **ids,
                             size_t *n_ids, char *err, size_t errlen)
{
    return encode_special(t, text, len, 1, ids, n_ids, err, errlen);
}

int tokenizer_encode_prompt(const Tokenizer *t, const char *text, size_t len, int special,
                            int add_special, int **ids, size_t *n_ids, char *err, size_t errlen)
{
    if (!special)
        return tokenizer_encode_opts(t, text, len, add_special, ids, n_ids, err, errlen);
    return encode_special(t, text, len, add_special, ids, n_ids, err, errlen);
}
