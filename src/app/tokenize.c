/* headsplit-tokenize: the model's tokenizer on the command line.
 *   headsplit-tokenize --model M.h5 TEXT        prints the ids as a JSON list (BOS included as
 *                                               the engine feeds them)
 *   headsplit-tokenize --tokenizer tokenizer.json TEXT    the same from a Hugging Face file
 *   headsplit-tokenize --model M.h5 --decode 1 403 407    or   --decode "[1, 403, 407]"
 *   TEXT "-" reads standard input.  Special-token text ("</s>", "<|im_start|>") becomes the
 *   token as headsplit's prompts do (tokenizer_encode_prompt, the engine's own function);
 *   --no-special encodes it as plain text, as headsplit --no-special does.  --no-bos leaves
 *   out BOS (the post-processor's special tokens); --hex reads TEXT as hexadecimal bytes; --batch FILE encodes each line of FILE
 *   ("-": standard input) and prints one JSON list per line.
 *   headsplit-tokenize --tokenizer tokenizer.json --save-h5 OUT.h5   writes the tokenizer alone
 *   as the /tokenizer group of a new HDF5 file (readable with --model). */
#include "version.h"
#include "h5io.h"
#include "tokenizer.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: headsplit-tokenize (--model M.h5 | --tokenizer tokenizer.json) "
                 "[--no-bos] [--no-special] [--hex] TEXT|-\n"
                 "       headsplit-tokenize (--model M.h5 | --tokenizer tokenizer.json) "
                 "[--no-bos] [--no-special] [--hex] --batch FILE|-\n"
                 "       headsplit-tokenize (--model M.h5 | --tokenizer tokenizer.json) "
                 "--decode ID... | '[ID, ...]'\n"
                 "       headsplit-tokenize --tokenizer tokenizer.json --save-h5 OUT.h5\n");
}

static int die(const char *msg)
{
    fprintf(stderr, "headsplit-tokenize: error: %s\n", msg);
    return 1;
}

/* Parses ids from the remaining arguments: plain numbers, or a JSON-style list. */
static int parse_ids(int argc, char **argv, int vocab, int **ids, size_t *n, char *err,
                     size_t errlen)
{
    size_t cap = 16;
    *ids = xmalloc(cap * sizeof(int));
    *n = 0;
    for (int a = 0; a < argc; a++) {
        char *p = argv[a];
        while (*p) {
            if (*p == '[' || *p == ']' || *p == ',' || *p == ' ' || *p == '\n' || *p == '\t') {
                p++;
                continue;
            }
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno)
                return util_err(err, errlen, "--decode: '%s' is not a token id", p);
            if (v < 0 || v >= vocab)
                return util_err(err, errlen, "--decode: id %ld is outside the vocabulary of %d",
                                v, vocab);
            if (*n == cap)
                *ids = xrealloc(*ids, (cap *= 2) * sizeof(int));
            (*ids)[(*n)++] = (int)v;
            p = end;
        }
    }
    return 0;
}

/* Decodes hexadecimal text in place (whitespace ignored); returns the byte count or -1. */
static long hex_decode(char *s, size_t len)
{
    size_t n = 0;
    int half = -1;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)s[i], v;
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        if (c >= '0' && c <= '9')
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        else
            return -1;
        if (half < 0) {
            half = v;
        } else {
            s[n++] = (char)(half * 16 + v);
            half = -1;
        }
    }
    return half < 0 ? (long)n : -1;
}

/* Encodes one text and prints its ids as a JSON list; 0 or -1 with err. */
static int encode_print(const Tokenizer *tok, char *text, size_t len, int hex, int special,
                        int add_special, char *err, size_t errlen)
{
    if (hex) {
        long n = hex_decode(text, len);
        if (n < 0)
            return util_err(err, errlen, "--hex: text is not an even number of hex digits");
        len = (size_t)n;
    }
    int *ids = NULL;
    size_t n = 0;
    if (tokenizer_encode_prompt(tok, text, len, special, add_special, &ids, &n, err, errlen) < 0)
        return -1;
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", ids[i]);
    puts("]");
    free(ids);
    return 0;
}

/* --batch: every line of path ("-": standard input) is one text. */
static int encode_batch(const Tokenizer *tok, const char *path, int hex, int special,
                        int add_special, char *err, size_t errlen)
{
    size_t len = 0;
    char *buf = util_read_file(strcmp(path, "-") == 0 ? "/dev/stdin" : path, &len, err, errlen);
    if (!buf)
        return -1;
    int rc = 0;
    long line = 0;
    for (char *p = buf, *end = buf + len; p < end && rc == 0;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        line++;
        if (encode_print(tok, p, (size_t)(le - p), hex, special, add_special, err, errlen) < 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", err);
            util_err(err, errlen, "%s: line %ld: %s", path, line, msg);
            rc = -1;
        }
        p = nl ? nl + 1 : end;
    }
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    if (app_wants_version(argc, argv)) {
        app_version(stdout, "headsplit-tokenize");
        return 0;
    }
    const char *model = NULL, *tokfile = NULL, *batch = NULL, *save = NULL;
    int decode = 0, first = -1, add_special = 1, hex = 0, special = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(argv[i], "--tokenizer") == 0 && i + 1 < argc) {
            tokfile = argv[++i];
        } else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
            batch = argv[++i];
        } else if (strcmp(argv[i], "--save-h5") == 0 && i + 1 < argc) {
            save = argv[++i];
        } else if (strcmp(argv[i], "--no-bos") == 0) {
            add_special = 0;
        } else if (strcmp(argv[i], "--no-special") == 0) {
            special = 0;
        } else if (strcmp(argv[i], "--hex") == 0) {
            hex = 1;
        } else if (strcmp(argv[i], "--decode") == 0) {
            decode = 1;
        } else if (strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i], "--") != 0) {
            fprintf(stderr, "headsplit-tokenize: error: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else {
            first = strcmp(argv[i], "--") == 0 ? i + 1 : i;
            break;
        }
    }
    if (!model == !tokfile) {
        fprintf(stderr, "headsplit-tokenize: error: give exactly one of --model and "
                        "--tokenizer\n");
        usage(stderr);
        return 2;
    }
    char err[1024];
    Tokenizer *tok = NULL;
    int rc;
    if (tokfile) {
        rc = tokenizer_load_hf_json(&tok, tokfile, err, sizeof err);
    } else {
        hid_t f = h5io_open_read(model, err, sizeof err);
        if (f < 0)
            return die(err);
        rc = tokenizer_h5_read(&tok, f, model, err, sizeof err);
        H5Fclose(f);
    }
    if (rc < 0)
        return die(err);
    rc = 0;
    if (save) {
        hid_t f = h5io_create(save, err, sizeof err);
        if (f < 0 || tokenizer_h5_write(tok, f, err, sizeof err) < 0)
            rc = die(err);
        if (f >= 0 && H5Fclose(f) < 0 && rc == 0)
            rc = die("cannot close the --save-h5 file");
    } else if (batch && !decode) {
        if (encode_batch(tok, batch, hex, special, add_special, err, sizeof err) < 0)
            rc = die(err);
    } else if (decode) {
        int *ids = NULL;
        size_t n = 0;
        if (first < 0 || parse_ids(argc - first, argv + first, tokenizer_vocab_size(tok), &ids,
                                   &n, err, sizeof err) < 0) {
            rc = die(first < 0 ? "--decode needs token ids" : err);
        } else {
            char *text = tokenizer_decode(tok, ids, n);
            fputs(text, stdout);
            fputc('\n', stdout);
            free(text);
        }
        free(ids);
    } else {
        char *text = NULL;
        size_t len = 0;
        if (first < 0 || first >= argc) {
            rc = die("no TEXT given (use - for standard input)");
        } else if (strcmp(argv[first], "-") == 0) {
            text = util_read_file("/dev/stdin", &len, err, sizeof err);
            if (!text)
                rc = die(err);
        } else {
            text = xstrdup(argv[first]);
            len = strlen(text);
        }
        if (text && encode_print(tok, text, len, hex, special, add_special, err, sizeof err) < 0)
            rc = die(err);
        free(text);
    }
    tokenizer_free(tok);
    return rc;
}
