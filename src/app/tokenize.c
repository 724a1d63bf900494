/* headsplit-tokenize: the model's tokenizer on the command line.
 *   headsplit-tokenize --model M.h5 TEXT        prints the ids as a JSON list (BOS included as
 *                                               the engine feeds them)
 *   headsplit-tokenize --model M.h5 --decode 1 403 407    or   --decode "[1, 403, 407]"
 *   TEXT "-" reads standard input. */
#include "version.h"
#include "h5io.h"
#include "tokenizer.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: headsplit-tokenize --model M.h5 TEXT|-\n"
                 "       headsplit-tokenize --model M.h5 --decode ID... | '[ID, ...]'\n");
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

int main(int argc, char **argv)
{
    if (app_wants_version(argc, argv)) {
        app_version(stdout, "headsplit-tokenize");
        return 0;
    }
    const char *model = NULL;
    int decode = 0, first = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
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
    if (!model) {
        usage(stderr);
        return 2;
    }
    char err[1024];
    hid_t f = h5io_open_read(model, err, sizeof err);
    if (f < 0)
        return die(err);
    Tokenizer *tok = NULL;
    int rc = tokenizer_h5_read(&tok, f, model, err, sizeof err);
    H5Fclose(f);
    if (rc < 0)
        return die(err);
    rc = 0;
    if (decode) {
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
        int *ids = NULL;
        size_t n = 0;
        if (text && tokenizer_encode(tok, text, len, &ids, &n, err, sizeof err) < 0) {
            rc = die(err);
        } else if (text) {
            putchar('[');
            for (size_t i = 0; i < n; i++)
                printf(i ? ", %d" : "%d", ids[i]);
            puts("]");
        }
        free(ids);
        free(text);
    }
    tokenizer_free(tok);
    return rc;
}
