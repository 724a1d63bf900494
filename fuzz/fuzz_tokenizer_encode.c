/* fuzz_tokenizer_encode: encodes arbitrary bytes with every real tokenizer found in
 * ../shared/models (llama2.c tokenizer.bin of Llama 2 and of stories260K, GPT-2 tokenizer.json
 * and vocab.json + merges.txt) and with the synthetic one.  Checks: ids in range, at most
 * 3 * len + 8 ids, and decode(encode(x)) == x for every tokenizer that round-trips each single
 * byte (byte fallback or byte-level BPE), which all of these do.
 * The models folder is $HEADSPLIT_SHARED_MODELS, else HS_SHARED_DIR given at build time. */
#include "fuzz_tokenizer_common.h"

#ifndef HS_SHARED_DIR
#define HS_SHARED_DIR "../shared/models"
#endif

typedef struct {
    const char *name;
    Tokenizer *t;
    int roundtrip; /* decode(encode(x)) must give x back */
} Loaded;

static Loaded toks[8];
static int n_toks;

/* "<models>/<rel>" in one of two static buffers (slot 0 or 1). */
static const char *shared_path(int slot, const char *rel)
{
    static char buf[2][1024];
    const char *dir = getenv("HEADSPLIT_SHARED_MODELS");
    snprintf(buf[slot & 1], sizeof buf[0], "%s/%s", dir ? dir : HS_SHARED_DIR, rel);
    return buf[slot & 1];
}

/* What decode(encode(text)) must give: the text itself, except that Hugging Face Llama
 * tokenizers read a literal U+2581 as a space (tokenizer.c, spm_add_group): a character group
 * (a byte and up to three continuation bytes, as llama2.c groups) that is exactly U+2581. */
static size_t expected_text(const Tokenizer *t, const char *text, size_t len, char *out)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        size_t g = 1;
        while (g < 4 && i + g < len && (s[i + g] & 0xC0) == 0x80)
            g++;
        if (tokenizer_kind(t) == TOKENIZER_SPM_MERGES && g == 3 &&
            memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            out[k++] = ' ';
        } else {
            memcpy(out + k, s + i, g);
            k += g;
        }
        i += g;
    }
    return k;
}

/* The bytes ids decode to, token by token (NUL bytes included), at most cap. */
static size_t decode_all(const Tokenizer *t, const int *ids, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    int prev = -1;
    for (size_t i = 0; i < n; i++) {
        k += tokenizer_decode_token(t, prev, ids[i], out + k, cap - k);
        prev = ids[i];
    }
    return k;
}

/* 1 if every single byte (and a few pairs) round-trips through t. */
static int probe_roundtrip(const Tokenizer *t)
{
    for (int b = 0; b < 256; b++) {
        char s[3] = {(char)b, (char)(255 - b), 'a'};
        for (size_t len = 1; len <= 3; len++) {
            int *ids = NULL;
            size_t n = 0;
            char err[256];
            if (tokenizer_encode(t, s, len, &ids, &n, err, sizeof err) != 0)
                return 0;
            char d[8];
            size_t k = decode_all(t, ids, n, d, sizeof d);
            int ok = k == len && memcmp(d, s, len) == 0;
            free(ids);
            if (!ok)
                return 0;
        }
    }
    return 1;
}

static void add(const char *name, Tokenizer *t, const char *err)
{
    if (!t) {
        fprintf(stderr, "fuzz_tokenizer_encode: %s not used: %s\n", name, err);
        return;
    }
    toks[n_toks].name = name;
    toks[n_toks].t = t;
    toks[n_toks].roundtrip = probe_roundtrip(t);
    fprintf(stderr, "fuzz_tokenizer_encode: %s: vocab %d, round trip %s\n", name,
            tokenizer_vocab_size(t), toks[n_toks].roundtrip ? "checked" : "not checked");
    n_toks++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[1024] = "";
    Tokenizer *t = NULL;
    tokenizer_load_llama2c(&t, shared_path(0, "llama2-tokenizer/tokenizer.bin"), 32000, err,
                           sizeof err);
    add("llama2 tokenizer.bin", t, err);
    t = NULL;
    tokenizer_load_llama2c(&t, shared_path(0, "stories260K/tok512.bin"), 512, err, sizeof err);
    add("stories260K tok512.bin", t, err);
    t = NULL;
    tokenizer_load_hf_json(&t, shared_path(0, "gpt2-tiny-random/tokenizer.json"), err,
                           sizeof err);
    add("gpt2 tokenizer.json", t, err);
    t = NULL;
    tokenizer_load_gpt2_files(&t, shared_path(0, "gpt2-tiny-random/vocab.json"),
                              shared_path(1, "gpt2-tiny-random/merges.txt"), err, sizeof err);
    add("gpt2 vocab.json+merges.txt", t, err);
    t = NULL;
    tokenizer_load_hf_json(&t, shared_path(0, "stories260K-hf/tokenizer.json"), err,
                           sizeof err);
    add("stories260K-hf tokenizer.json", t, err);
    add("synthetic 512", tokenizer_build_synthetic(512), "cannot build");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    for (int k = 0; k < n_toks; k++) {
        const Tokenizer *t = toks[k].t;
        int *ids = NULL;
        size_t n = 0;
        char err[512];
        int rc = tokenizer_encode(t, text, size, &ids, &n, err, sizeof err);
        if (toks[k].roundtrip)
            FUZZ_ASSERT(rc == 0, "%s: encode refused: %s", toks[k].name, err);
        if (rc != 0)
            continue;
        int vocab = tokenizer_vocab_size(t);
        FUZZ_ASSERT(n <= 3 * size + 8, "%s: %zu ids for %zu bytes", toks[k].name, n, size);
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(ids[i] >= 0 && ids[i] < vocab, "%s: id %d", toks[k].name, ids[i]);
        free(tokenizer_decode(t, ids, n));
        if (toks[k].roundtrip) {
            char *d = malloc(size + 1), *want = malloc(size + 1);
            size_t wn = expected_text(t, text, size, want);
            size_t got = decode_all(t, ids, n, d, size + 1);
            FUZZ_ASSERT(got == wn && memcmp(d, want, wn) == 0,
                        "%s: round trip of %zu bytes gave %zu bytes", toks[k].name, size, got);
            free(want);
            free(d);
        }
        free(ids);
    }
    return 0;
}
