/* cli.c: the command line of headsplit-convert (parsing, checks, dispatch, summary line). */
#include "convert.h"

#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: headsplit-convert --format llama2c --checkpoint F.bin --tokenizer T.bin --out M.h5\n"
    "       headsplit-convert --format hf --dir DIR --out M.h5\n"
    "       headsplit-convert --format gguf --file M.gguf --out M.h5\n"
    "       headsplit-convert --synthetic MODEL [--seed N] [--layers N] [--tokenizer FILE]\n"
    "                         --out M.h5\n"
    "       (all but gguf take --quantize q8_0|q4_0|q4_k_m|f16)\n"
    "\n"
    "Writes a HeadSplit model file (HDF5: /config, float32 [out][in] tensors, /tokenizer;\n"
    "see docs/model-format.md).  Conversion streams tensor by tensor; the output is written\n"
    "as M.h5.partial and renamed when complete, and removed on any error.\n"
    "\n"
    "  --format llama2c   llama2.c legacy checkpoint (7-int header; a negative vocab_size\n"
    "                     means a separate classifier) and its tokenizer.bin.\n"
    "                     Kept in Meta's interleaved RoPE order (rope_style interleaved).\n"
    "  --format hf        Hugging Face directory: config.json, model.safetensors or\n"
    "                     model.safetensors.index.json (shards), F32/F16/BF16 (widened\n"
    "                     exactly to float32), and tokenizer.json (or vocab.json +\n"
    "                     merges.txt for GPT-2; --tokenizer FILE replaces it).  Llama,\n"
    "                     Mistral, Qwen2, Phi3 (docs/model-format.md) and GPT2LMHeadModel.\n"
    "  --format gguf      llama.cpp GGUF file (v2/v3): architectures llama, qwen2, phi3\n"
    "                     and gpt2 (docs/model-format.md); configuration\n"
    "                     and tokenizer from its metadata.  F32 tensors as float32;\n"
    "                     F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K kept\n"
    "                     as their blocks, byte for byte (format version 2).\n"
    "  --file M.gguf      gguf: the input file.\n"
    "  --synthetic MODEL  Deterministic random weights (N(0, 0.02^2); norm weights 1.0),\n"
    "                     written block by block (a few tens of MB of memory).  MODEL is\n"
    "                     tinyllama-1.1b  llama, dim 2048, ffn 5632, 22 layers, 32 heads,\n"
    "                                     4 KV heads, vocab 32000, ctx 2048, untied, half\n"
    "                     gpt2-small      gpt2, dim 768, ffn 3072, 12 layers, 12 heads,\n"
    "                                     vocab 50257, ctx 1024, tied\n"
    "                     stories260k     llama, dim 64, ffn 172, 5 layers, 8 heads,\n"
    "                                     4 KV heads, vocab 512, ctx 512, tied, interleaved\n"
    "                     llama2-7b       llama, dim 4096, ffn 11008, 32 layers, 32 heads\n"
    "                                     (MHA), vocab 32000, ctx 4096, untied, half\n"
    "                     llama3-8b       llama, dim 4096, ffn 14336, 32 layers, 32 heads,\n"
    "                                     8 KV heads, vocab 128256, ctx 8192, untied, half,\n"
    "                                     theta 500000, Llama 3.1's RoPE scaling (rope_freqs)\n"
    "                     PRESET:KEY=V,...  a preset with some keys changed (those below;\n"
    "                       the rest keep the preset's values), e.g. a small test model of\n"
    "                       Llama 3's vocabulary: llama3-8b:dim=256,ffn=512,layers=2\n"
    "                     llama:KEY=V,... or gpt2:KEY=V,...  with keys dim, layers, heads,\n"
    "                       kv_heads, head_dim, ffn, vocab, ctx, tied (0/1), eps, theta,\n"
    "                       rope (half/interleaved, llama).  Unset keys: dim 64, layers 2,\n"
    "                       heads 8 (gpt2: 4), kv_heads = heads, head_dim = dim/heads,\n"
    "                       ffn 4*dim, vocab 512, ctx 512 (gpt2: 128), tied 1, eps 1e-5,\n"
    "                       theta 10000, rope interleaved.\n"
;

static const char usage_options[] =
    "  --seed N           Seed of the synthetic weights (default 1); same seed, same weights.\n"
    "  --layers N         Synthetic: override the number of layers.\n"
    "  --tokenizer FILE   llama2c: the tokenizer.bin.  Synthetic: optional real tokenizer of\n"
    "                     the same vocabulary size (llama2.c tokenizer.bin, tokenizer.json,\n"
    "                     or a directory with tokenizer.json or vocab.json + merges.txt);\n"
    "                     without it a synthetic tokenizer is stored.\n"
    "  --quantize TYPE    q8_0, q4_0, q4_k_m or f16: matrices quantized row by row as\n"
    "                     llama-quantize does (its types per tensor and fallbacks; see\n"
    "                     docs/model-format.md); norms and biases stay float32.\n"
    "  --out M.h5         Output model file.\n"
    "  --quiet            No summary line.\n"
    "  --help             This text.\n"
    "\n"
    "Errors are one line on stderr, \"headsplit-convert: error: <file>: <field>: <what>\",\n"
    "with exit status 1.\n";

void convert_print_usage(FILE *out)
{
    fputs(usage, out);
    fputs(usage_options, out);
}

typedef struct {
    const char *format, *checkpoint, *tokenizer, *dir, *out, *synthetic, *seed, *layers;
    const char *quantize, *file;
    int quiet;
} CliArgs;

static int parse_args(int argc, char **argv, CliArgs *a, int *help, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    *help = 0;
    struct { const char *flag; const char **dst; } opts[] = {
        {"--format", &a->format},       {"--checkpoint", &a->checkpoint},
        {"--tokenizer", &a->tokenizer}, {"--dir", &a->dir},
        {"--out", &a->out},             {"--synthetic", &a->synthetic},
        {"--seed", &a->seed},           {"--layers", &a->layers},
        {"--quantize", &a->quantize},   {"--file", &a->file},
    };
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = 1;
            return 0;
        }
        if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            a->quiet = 1;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] &&
               !(strlen(opts[k].flag) == nlen && strncmp(opts[k].flag, arg, nlen) == 0))
            k++;
        if (k == sizeof opts / sizeof opts[0])
            return util_err(err, errlen, "command line: %.*s: unknown option (see --help)",
                            (int)nlen, arg);
        if (*opts[k].dst)
            return util_err(err, errlen, "command line: %s: given twice", opts[k].flag);
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!val || val[0] == '\0')
            return util_err(err, errlen, "command line: %s: missing value", opts[k].flag);
        *opts[k].dst = val;
    }
    return 0;
}

/* Refuses an option that the chosen mode does not use. */
static int reject(const char *v, const char *flag, const char *mode, char *err, size_t errlen)
{
    if (v)
        return util_err(err, errlen, "command line: %s: not used with %s", flag, mode);
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] == '-' || s[0] == '+')
        return -1;
    unsigned long long v = strtoull(s, &end, 0);
    if (end == s || *end != '\0' || errno != 0)
        return -1;
    *out = v;
    return 0;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The safetensors files of a Hugging Face directory, in bytes. */
static uint64_t dir_safetensors_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    uint64_t total = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n > 12 && strcmp(e->d_name + n - 12, ".safetensors") == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            total += file_size(path);
        }
    }
    if (d)
        closedir(d);
    return total;
}

/* Bytes per weight of a --quantize mode (its base type's; the output layers some modes keep
 * wider are not counted: an estimate). */
static double quantize_bytes_per_weight(const char *q)
{
    if (!q || !strcasecmp(q, "f32"))
        return 4;
    if (!strcasecmp(q, "f16"))
        return 2;
    if (!strcasecmp(q, "q8_0"))
        return 34.0 / 32;
    if (!strcasecmp(q, "q4_0"))
        return 18.0 / 32;
    return 144.0 / 256; /* q4_k_m: Q4_K blocks */
}

/* The work of a conversion for its progress line: the input's bytes (*writes 0), or for
 * --synthetic and GGUF the bytes it will write (*writes 1); 0 when not known. */
static uint64_t cli_work_bytes(const CliArgs *a, int *writes)
{
    *writes = 0;
    if (a->synthetic) {
        ModelConfig c;
        char e[256];
        uint64_t layers = a->layers ? strtoull(a->layers, NULL, 10) : 0;
        if (convert_synthetic_config(a->synthetic, (int)layers, &c, e, sizeof e) < 0)
            return 0;
        double d = c.dim, hd = c.head_dim, ffn = c.ffn_dim;
        double per_layer = d * hd * (c.n_heads * 2.0 + c.n_kv_heads * 2.0) +
                           ffn * d * (c.arch == ARCH_GPT2 ? 2 : 3);
        double n = per_layer * c.n_layers + (double)c.vocab_size * d *
                                                (c.tied_embeddings ? 1 : 2);
        *writes = 1;
        return (uint64_t)(n * quantize_bytes_per_weight(a->quantize));
    }
    if (a->format && !strcmp(a->format, "llama2c"))
        return file_size(a->checkpoint);
    if (a->format && !strcmp(a->format, "gguf")) {
        *writes = 1; /* the file is mapped, unseen by the read counter; its tensors are written
                      * byte for byte, so the output's size is the input's, near enough */
        return file_size(a->file);
    }
    if (a->format && !strcmp(a->format, "hf") && a->dir)
        return dir_safetensors_bytes(a->dir);
    return 0;
}

static void cli_begin(const ConvertProgress *progress, const CliArgs *a)
{
    int writes = 0;
    if (progress) {
        uint64_t total = cli_work_bytes(a, &writes);
        progress->start(progress->ctx, total, writes);
    }
}

int convert_run_cli(int argc, char **argv, FILE *out, char *err, size_t errlen)
{
    return convert_run_cli_progress(argc, argv, out, NULL, err, errlen);
}

int convert_run_cli_progress(int argc, char **argv, FILE *out, const ConvertProgress *progress,
                             char *err, size_t errlen)
{
    CliArgs a;
    int help;
    if (argc < 2)
        return util_err(err, errlen, "command line: no arguments (see --help)");
    if (parse_args(argc, argv, &a, &help, err, errlen) < 0)
        return -1;
    if (help) {
        convert_print_usage(out);
        return 0;
    }
    if (!a.out)
        return util_err(err, errlen, "command line: --out: missing (the output model file)");
    ConvertStats st;
    memset(&st, 0, sizeof st);
    /* On a terminal headsplit-convert draws its bar (ConvertProgress); in a log, a line every
     * few seconds instead. */
    st.progress = a.quiet || isatty(STDERR_FILENO) ? NULL : stderr;
    if (a.quantize) {
        /* Checked before any work, so that a typo costs nothing. */
        const char *ok[] = {"f32", "f16", "q8_0", "q4_0", "q4_k_m"};
        size_t i = 0;
        while (i < sizeof ok / sizeof ok[0] && strcasecmp(a.quantize, ok[i]) != 0)
            i++;
        if (i == sizeof ok / sizeof ok[0])
            return util_err(err, errlen, "command line: --quantize: unknown type '%s' "
                            "(expected q8_0, q4_0, q4_k_m, f16 or f32)", a.quantize);
    }
    double t0 = time_now();
    int rc;
    if (a.synthetic) {
        uint64_t seed = 1, layers = 0;
        if (reject(a.format, "--format", "--synthetic", err, errlen) < 0 ||
            reject(a.checkpoint, "--checkpoint", "--synthetic", err, errlen) < 0 ||
            reject(a.dir, "--dir", "--synthetic", err, errlen) < 0 ||
            reject(a.file, "--file", "--synthetic", err, errlen) < 0)
            return -1;
        if (a.seed && parse_u64(a.seed, &seed) < 0)
            return util_err(err, errlen, "command line: --seed: '%s' is not a non-negative "
                            "integer", a.seed);
        if (a.layers && (parse_u64(a.layers, &layers) < 0 || layers < 1 || layers > 4096))
            return util_err(err, errlen, "command line: --layers: '%s' is not a count in "
                            "1..4096", a.layers);
        cli_begin(progress, &a); /* the command line is good: the work begins */
        rc = convert_make_synthetic(a.synthetic, seed, (int)layers, a.tokenizer, a.out,
                                    a.quantize, &st,
                                    err, errlen);
    } else if (!a.format) {
        return util_err(err, errlen, "command line: --format: missing (llama2c, hf or gguf; or "
                        "use --synthetic)");
    } else if (strcmp(a.format, "llama2c") == 0) {
        if (reject(a.dir, "--dir", "--format llama2c", err, errlen) < 0 ||
            reject(a.file, "--file", "--format llama2c", err, errlen) < 0 ||
            reject(a.seed, "--seed", "--format llama2c", err, errlen) < 0 ||
            reject(a.layers, "--layers", "--format llama2c", err, errlen) < 0)
            return -1;
        if (!a.checkpoint || !a.tokenizer)
            return util_err(err, errlen, "command line: %s: missing (--format llama2c needs "
                            "--checkpoint and --tokenizer)",
                            a.checkpoint ? "--tokenizer" : "--checkpoint");
        cli_begin(progress, &a);
        rc = convert_from_llama2c(a.checkpoint, a.tokenizer, a.out, a.quantize, &st, err,
                                  errlen);
    } else if (strcmp(a.format, "hf") == 0) {
        if (reject(a.checkpoint, "--checkpoint", "--format hf", err, errlen) < 0 ||
            reject(a.file, "--file", "--format hf", err, errlen) < 0 ||
            reject(a.seed, "--seed", "--format hf", err, errlen) < 0 ||
            reject(a.layers, "--layers", "--format hf", err, errlen) < 0)
            return -1;
        if (!a.dir)
            return util_err(err, errlen, "command line: --dir: missing (--format hf needs the "
                            "model directory)");
        cli_begin(progress, &a);
        rc = convert_from_hf_tok(a.dir, a.tokenizer, a.out, a.quantize, &st, err, errlen);
    } else if (strcmp(a.format, "gguf") == 0) {
        if (reject(a.checkpoint, "--checkpoint", "--format gguf", err, errlen) < 0 ||
            reject(a.dir, "--dir", "--format gguf", err, errlen) < 0 ||
            reject(a.tokenizer, "--tokenizer", "--format gguf (the file's tokenizer is used)",
                   err, errlen) < 0 ||
            reject(a.seed, "--seed", "--format gguf", err, errlen) < 0 ||
            reject(a.layers, "--layers", "--format gguf", err, errlen) < 0 ||
            reject(a.quantize, "--quantize", "--format gguf (its blocks are kept as they are)",
                   err, errlen) < 0)
            return -1;
        if (!a.file)
            return util_err(err, errlen, "command line: --file: missing (--format gguf needs the "
                            "GGUF file)");
        cli_begin(progress, &a);
        rc = convert_from_gguf(a.file, a.out, &st, err, errlen);
    } else {
        return util_err(err, errlen, "command line: --format: unknown format '%s' (expected "
                        "llama2c, hf or gguf)", a.format);
    }
    if (progress)
        progress->stop(progress->ctx, rc == 0);
    if (rc < 0)
        return -1;
    if (!a.quiet) {
        const ModelConfig *c = &st.config;
        fprintf(out, "headsplit-convert: wrote %s: %s, %d layers, dim %d, %d heads / %d KV "
                "heads, head_dim %d, ffn %d, vocab %d, ctx %d, %s; %d tensors, %.1f MB in "
                "%.1f s\n", a.out, config_arch_name(c->arch), c->n_layers, c->dim, c->n_heads,
                c->n_kv_heads, c->head_dim, c->ffn_dim, c->vocab_size, c->context_length,
                c->tied_embeddings ? "tied" : "untied", st.n_tensors,
                (double)st.tensor_bytes / 1e6, time_now() - t0);
    }
    return 0;
}
