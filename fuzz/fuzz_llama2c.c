/* fuzz_llama2c: the llama2.c legacy checkpoint loader (src/convert/llama2c.c) end to end:
 * header checks, size check, streaming every tensor into a HeadSplit model file.
 * The input is the checkpoint.  When its last byte is odd and the header's implied size is
 * small (at most 1 MiB and 8 layers: each tensor costs an HDF5 dataset), the harness pads or
 * cuts the data to exactly that size, so that mutated headers also reach the streaming code.  A matching tokenizer.bin (up to 4096 pieces) is generated for
 * the header's vocabulary size; the output goes to a scratch file that is checked and
 * removed. */
#include "convert.h"
#include "fuzz_common.h"
#include "h5io.h"

#include <sys/stat.h>

#define MAX_PAD_BYTES (1u << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static int32_t le32(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    int32_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* tokenizer.bin with n pieces: <unk>, <s>, </s>, byte pieces, then short fillers. */
static void write_tokenizer(const char *path, int n)
{
    size_t cap = 4 + (size_t)n * 24, k = 0;
    uint8_t *b = malloc(cap);
    int32_t max_len = 12;
    memcpy(b, &max_len, 4);
    k = 4;
    for (int i = 0; i < n; i++) {
        char piece[16];
        if (i == 0)
            snprintf(piece, sizeof piece, "<unk>");
        else if (i == 1)
            snprintf(piece, sizeof piece, "\n<s>\n");
        else if (i == 2)
            snprintf(piece, sizeof piece, "\n</s>\n");
        else if (i < 259)
            snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        else
            snprintf(piece, sizeof piece, "p%d", i);
        float score = (float)-i;
        int32_t len = (int32_t)strlen(piece);
        memcpy(b + k, &score, 4);
        memcpy(b + k + 4, &len, 4);
        memcpy(b + k + 8, piece, (size_t)len);
        k += 8 + (size_t)len;
    }
    fuzz_write_file(path, b, k);
    free(b);
}

/* Bytes the header implies (llama2.c legacy layout), or 0 when not small and sane. */
static uint64_t implied_bytes(const uint8_t *h)
{
    int64_t dim = le32(h), hid = le32(h + 4), L = le32(h + 8), nh = le32(h + 12),
            nkv = le32(h + 16), vocab = le32(h + 20), seq = le32(h + 24);
    int shared = vocab > 0;
    if (vocab < 0)
        vocab = -vocab;
    if (dim <= 0 || hid <= 0 || L <= 0 || nh <= 0 || nkv <= 0 || vocab <= 0 || seq <= 0 ||
        dim > 4096 || hid > 4096 || L > 8 || nh > dim || nkv > nh || vocab > 65536 ||
        seq > 65536 || dim % nh != 0)
        return 0;
    int64_t hs = dim / nh, kv = hs * nkv;
    int64_t floats = vocab * dim + L * dim + L * dim * dim + 2 * L * kv * dim + L * dim * dim +
                     L * dim + 3 * L * hid * dim + dim + seq * hs + (shared ? 0 : vocab * dim);
    uint64_t bytes = 28 + (uint64_t)floats * 4;
    return bytes <= MAX_PAD_BYTES ? bytes : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *ckpt = fuzz_path(0, "model.bin"), *tok = fuzz_path(1, "tokenizer.bin");
    const char *out = fuzz_path(2, "out.h5");
    uint64_t want = size >= 28 ? implied_bytes(data) : 0;
    if (want && (data[size - 1] & 1) && want != size) {
        uint8_t *b = calloc(1, want);
        memcpy(b, data, size < want ? size : want);
        fuzz_write_file(ckpt, b, want);
        free(b);
    } else {
        fuzz_write_file(ckpt, data, size);
    }
    int vocab = size >= 28 ? le32(data + 20) : 0;
    if (vocab < 0 && vocab != INT32_MIN)
        vocab = -vocab;
    write_tokenizer(tok, vocab >= 1 && vocab <= 4096 ? vocab : 300);
    ConvertStats st;
    char err[2048];
    err[0] = '\0';
    unlink(out);
    if (convert_from_llama2c(ckpt, tok, out, NULL, &st, err, sizeof err) == 0) {
        struct stat sb;
        FUZZ_ASSERT(stat(out, &sb) == 0, "no output file");
        char verr[256];
        FUZZ_ASSERT(config_validate(&st.config, verr, sizeof verr) == 0, "%s", verr);
        /* The file we wrote reads back with the same configuration. */
        hid_t f = h5io_open_read(out, err, sizeof err);
        FUZZ_ASSERT(f >= 0, "%s", err);
        ModelConfig c;
        FUZZ_ASSERT(config_read(&c, f, out, err, sizeof err) == 0, "%s", err);
        FUZZ_ASSERT(c.dim == st.config.dim && c.vocab_size == st.config.vocab_size &&
                    c.n_layers == st.config.n_layers, "config differs");
        H5Fclose(f);
        unlink(out);
    } else {
        FUZZ_ASSERT(err[0] != '\0', "failure without a message");
        char partial[600];
        snprintf(partial, sizeof partial, "%s.partial", out);
        FUZZ_ASSERT(access(out, F_OK) != 0 && access(partial, F_OK) != 0,
                    "a failed conversion left a file behind: %s", err);
    }
    H5garbage_collect(); /* HDF5's free lists would look like a leak to libFuzzer */
    return 0;
}
