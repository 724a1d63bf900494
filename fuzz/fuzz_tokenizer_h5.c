/* fuzz_tokenizer_h5: tokenizer_h5_read on the /tokenizer group of an in-memory HDF5 file
 * whose attributes and datasets the input builds: kind string, bos/eos/flags, piece_bytes,
 * piece_offsets (often made consistent, then perturbed), scores, merges and bpe_hf's
 * hf_pipeline (none, two valid ones, or the rest of the input), each of a type,
 * rank and length the input chooses.  A tokenizer it accepts is run over sample text. */
#include "fuzz_tokenizer_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

static void put_int_attr(hid_t g, const char *name, FuzzIn *in)
{
    uint8_t mode = fuzz_u8(in) % 8;
    if (mode == 0)
        return;
    hid_t sp = H5Screate(H5S_SCALAR), a;
    if (mode == 7) {
        double d = fuzz_double(in);
        a = H5Acreate2(g, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_DOUBLE, &d);
    } else {
        int64_t v = mode == 6 ? (int64_t)fuzz_u64(in) : (int64_t)(fuzz_u8(in) % 8) - 1;
        a = H5Acreate2(g, name, H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT64, &v);
    }
    H5Aclose(a);
    H5Sclose(sp);
}

static void put_dataset(hid_t g, const char *name, hid_t ftype, hid_t mtype, int rank,
                        const hsize_t *dims, const void *buf)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(g, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d >= 0) {
        H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        H5Dclose(d);
    }
    H5Sclose(sp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzIn in = {data, size};
    hid_t f = fuzz_h5_shared_file();
    hid_t g = H5Gcreate2(f, "/tokenizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    static const char *kinds[] = {"spm", "spm_merges", "gpt2", "bpe", "", "spm  ", "bpe_hf"};
    uint8_t k = fuzz_u8(&in);
    if (k % 8 < 7) {
        const char *ks = kinds[k % 8];
        hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
        H5Tset_size(t, k & 0x80 ? H5T_VARIABLE : strlen(ks) + 1);
        hid_t a = H5Acreate2(g, "kind", t, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, t, k & 0x80 ? (const void *)&ks : (const void *)ks);
        H5Aclose(a);
        H5Sclose(sp);
        H5Tclose(t);
    }
    put_int_attr(g, "bos_id", &in);
    put_int_attr(g, "eos_id", &in);
    put_int_attr(g, "add_bos", &in);
    put_int_attr(g, "add_dummy_prefix", &in);
    put_int_attr(g, "byte_fallback", &in);

    /* vocab pieces: lengths from the input, bytes from the input */
    int vocab = fuzz_u8(&in) % 64;
    uint8_t flags = fuzz_u8(&in);
    uint64_t *offs = calloc((size_t)vocab + 2, sizeof *offs);
    uint8_t bytes[4096];
    size_t nb = 0;
    for (int i = 0; i < vocab; i++) {
        size_t len = fuzz_u8(&in) % 8;
        for (size_t j = 0; j < len && nb < sizeof bytes; j++)
            bytes[nb++] = fuzz_u8(&in);
        offs[i + 1] = nb;
    }
    if (flags & 1) { /* perturb one offset */
        int i = vocab ? fuzz_u8(&in) % (vocab + 1) : 0;
        offs[i] = fuzz_u64(&in);
    }
    hsize_t dims[2];
    dims[0] = (hsize_t)vocab + 1 + (flags & 2 ? 1 : 0);
    if (!(flags & 4))
        put_dataset(g, "piece_offsets", flags & 8 ? H5T_STD_I32LE : H5T_STD_U64LE,
                    H5T_NATIVE_UINT64, 1, dims, offs);
    dims[0] = nb + (flags & 16 ? 1 : 0);
    if (dims[0] > sizeof bytes)
        dims[0] = sizeof bytes;
    put_dataset(g, "piece_bytes", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, dims, bytes);
    float scores[64];
    for (int i = 0; i < vocab; i++)
        scores[i] = fuzz_u8(&in) == 0xff ? (float)fuzz_double(&in) : -(float)(fuzz_u8(&in));
    dims[0] = (hsize_t)vocab - (flags & 32 && vocab ? 1 : 0);
    if (vocab || !(flags & 32))
        put_dataset(g, "scores", flags & 64 ? H5T_STD_I32LE : H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                    1, dims, scores);
    int n_merges = fuzz_u8(&in) % 32;
    int32_t merges[64];
    for (int i = 0; i < 2 * n_merges; i++)
        merges[i] = fuzz_u8(&in) == 0xff ? (int32_t)fuzz_u32(&in) : fuzz_u8(&in) % (vocab + 1);
    dims[0] = (hsize_t)n_merges;
    dims[1] = flags & 128 ? 3 : 2;
    if (n_merges)
        put_dataset(g, "merges", H5T_STD_I32LE, H5T_NATIVE_INT32, dims[1] == 3 ? 1 : 2, dims,
                    merges);
    /* bpe_hf's pipeline text: absent, one of two valid ones (whose ids the vocabulary may not
     * hold), or the rest of the input */
    static const char *pipes[] = {
        "{\"added_tokens\":[{\"content\":\"<|x|>\",\"id\":3,\"in_vocab\":false,\"special\":true}],"
        "\"model\":{\"ignore_merges\":true,\"type\":\"BPE\"},\"normalizer\":null,"
        "\"post_processor\":{\"single\":[{\"SpecialToken\":{\"id\":\"<|x|>\"}},"
        "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<|x|>\":{\"ids\":[3]}},"
        "\"type\":\"TemplateProcessing\"},\"pre_tokenizer\":{\"pretokenizers\":[{\"behavior\":"
        "\"Isolated\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}|\\\\s+(?!\\\\S)|\\\\s+|[^\\\\s\\\\p{N}]+\"},"
        "\"type\":\"Split\"},{\"add_prefix_space\":false,\"type\":\"ByteLevel\","
        "\"use_regex\":false}],\"type\":\"Sequence\"}}",
        "{\"added_tokens\":[{\"content\":\"ab\",\"id\":5,\"lstrip\":true,\"normalized\":true,"
        "\"single_word\":true}],\"model\":{\"byte_fallback\":true,\"fuse_unk\":true,"
        "\"unk_token\":\"<unk>\"},\"normalizer\":{\"normalizers\":[{\"type\":\"NFC\"},"
        "{\"prepend\":\"\\u2581\",\"type\":\"Prepend\"}],\"type\":\"Sequence\"},"
        "\"post_processor\":null,\"pre_tokenizer\":{\"prepend_scheme\":\"first\","
        "\"replacement\":\"\\u2581\",\"split\":true,\"type\":\"Metaspace\"}}"};
    uint8_t pk = fuzz_u8(&in) % 4;
    if (pk == 1 || pk == 2) {
        dims[0] = strlen(pipes[pk - 1]);
        put_dataset(g, "hf_pipeline", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, dims, pipes[pk - 1]);
    } else if (pk == 3) {
        dims[0] = in.n;
        put_dataset(g, "hf_pipeline", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, dims, in.p);
    }
    H5Gclose(g);

    Tokenizer *t = NULL;
    char err[512];
    err[0] = '\0';
    if (tokenizer_h5_read(&t, f, "fuzz.h5", err, sizeof err) == 0) {
        FUZZ_ASSERT(t != NULL, "no tokenizer");
        fuzz_tok_exercise(t, data, size);
        tokenizer_free(t);
    } else {
        FUZZ_ASSERT(t == NULL && strncmp(err, "fuzz.h5: ", 9) == 0, "message '%s'", err);
    }
    free(offs);
    fuzz_h5_unlink(f, "/tokenizer");
    return 0;
}
