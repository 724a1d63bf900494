/* fuzz_gguf: the GGUF reader (src/model/gguf.c) and the tokenizer from GGUF metadata
 * (src/model/tokenizer_gguf.c) on one in-memory file.  Whatever the reader accepts must be
 * safe to walk completely: every key, every array element, every tensor byte; a tokenizer it
 * builds must encode and decode a text (or refuse it with a message). */
#include "fuzz_common.h"
#include "gguf.h"
#include "tokenizer_gguf.h"

static void walk(const GgufFile *g)
{
    unsigned sum = 0;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const GgufKV *kv = &g->kv[i];
        FUZZ_ASSERT(kv->key && gguf_find_kv(g, kv->key) != NULL, "key %lld", (long long)i);
        for (uint64_t j = 0; kv->type == GGUF_TYPE_ARRAY && j < kv->n; j++) {
            size_t n;
            if (kv->elem_type == GGUF_TYPE_STRING) {
                const char *s = gguf_array_string(kv, j, &n);
                for (size_t q = 0; q < n; q++)
                    sum += (unsigned char)s[q];
            } else {
                sum += (unsigned)gguf_array_int(kv, j) + (gguf_array_float(kv, j) > 0);
            }
        }
        for (uint64_t j = 0; kv->type == GGUF_TYPE_STRING && j < kv->n; j++)
            sum += kv->data[j];
    }
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const GgufTensor *t = &g->tensors[i];
        FUZZ_ASSERT(t->offset % g->alignment == 0 && t->offset + t->bytes <= g->size, "%s",
                    t->name);
        FUZZ_ASSERT(t->bytes == gguf_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1] *
                                    (uint64_t)t->ne[2] * (uint64_t)t->ne[3], "%s", t->name);
        for (uint64_t j = 0; j < t->bytes; j++)
            sum += t->data[j];
    }
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GgufFile *g = NULL;
    char err[1024];
    err[0] = '\0';
    if (gguf_open_mem(&g, data, size, "fuzz.gguf", err, sizeof err) != 0) {
        FUZZ_ASSERT(g == NULL && strncmp(err, "fuzz.gguf: ", 11) == 0, "message '%s'", err);
        FUZZ_ASSERT(strchr(err, '\n') == NULL, "message '%s' spans lines", err);
        return 0;
    }
    walk(g);
    Tokenizer *t = NULL;
    if (gguf_load_tokenizer(&t, g, err, sizeof err) == 0) {
        static const char text[] = "Once upon a time, caf\xc3\xa9 \xff!";
        int *ids = NULL;
        size_t n = 0;
        /* a vocabulary without the text's pieces may refuse it, with a message */
        if (tokenizer_encode(t, text, sizeof text - 1, &ids, &n, err, sizeof err) == 0) {
            char *s = tokenizer_decode(t, ids, n);
            free(s);
            free(ids);
        } else {
            FUZZ_ASSERT(err[0] != '\0', "encode failure without a message");
        }
        tokenizer_free(t);
    } else {
        FUZZ_ASSERT(t == NULL && err[0] != '\0', "tokenizer failure without a message");
    }
    gguf_close(g);
    return 0;
}
