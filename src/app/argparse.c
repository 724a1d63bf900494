/* argparse.c: the command line's words against the option tables of argparse.h. */
#include "argparse.h"

#include "util.h"

#include <string.h>

/* Edit distance of a and b (up to 63 bytes each; longer: a large number). */
static int edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
    if (na > 63 || nb > 63)
        return 1000;
    int row[64];
    for (size_t j = 0; j <= nb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= nb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[nb];
}

/* An unknown option (word as typed, name its len bytes without dashes): the error, with the
 * long options it may have meant (those it begins, else those within two edits). */
static int unknown_option(const struct option *longs, const char *word, const char *name,
                          size_t len, char *err, size_t errlen)
{
    char hint[256] = "";
    size_t used = 0;
    int found = 0;
    for (int pass = 0; pass < 2 && !found; pass++)
        for (const struct option *lo = longs; lo->name; lo++) {
            size_t nl = strlen(lo->name);
            int near = pass == 0 ? len >= 2 && nl > len && strncmp(lo->name, name, len) == 0
                                 : len >= 3 && edit_distance(name, len, lo->name, nl) <= 2;
            if (near && found < 3 && used + nl + 8 < sizeof hint) {
                used += (size_t)snprintf(hint + used, sizeof hint - used, "%s--%s",
                                         found ? ", " : "", lo->name);
                found++;
            }
        }
    return util_err(err, errlen, "unknown option '%s'%s%s%s (see --help)", word,
                    found ? " (did you mean " : "", hint, found ? "?)" : "");
}

/* The has_arg of the long option with code val. */
static int option_has_arg(const struct option *longs, int val)
{
    for (const struct option *lo = longs; lo->name; lo++)
        if (lo->val == val)
            return lo->has_arg;
    return no_argument;
}

int argparse_next(const struct option *longs, const ShortOption *shorts, int argc,
                  char **argv, int *i, const char **arg, char *err, size_t errlen)
{
    if (*i >= argc)
        return 0;
    const char *w = argv[*i], *val = NULL;
    int ch = 0;
    *arg = NULL;
    if (strcmp(w, "--") == 0) {
        (*i)++;
        return 0;
    }
    if (w[0] != '-' || !w[1])
        return util_err(err, errlen, "unexpected argument '%s' (see --help)", w);
    if (w[1] == '-') {
        const char *name = w + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct option *lo = longs;
        while (lo->name && !(strlen(lo->name) == len && strncmp(lo->name, name, len) == 0))
            lo++;
        if (!lo->name)
            return unknown_option(longs, w, name, len, err, errlen);
        if (eq && lo->has_arg == no_argument)
            return util_err(err, errlen, "--%s takes no value (given '%s')", lo->name, w);
        ch = lo->val;
        val = eq ? eq + 1 : NULL;
    } else {
        for (int k = 0; shorts[k].name && !ch; k++)
            if (strcmp(shorts[k].name, w + 1) == 0)
                ch = shorts[k].val;
        for (int k = 0; shorts[k].name && !ch; k++) /* -n16: a one-letter form's value */
            if (!shorts[k].name[1] && shorts[k].name[0] == w[1] &&
                option_has_arg(longs, shorts[k].val) != no_argument && w[2] >= '0' && w[2] <= '9')
                ch = shorts[k].val, val = w + 2;
        if (!ch) { /* -steps: the long option of that name, else as an unknown long one */
            size_t len = strlen(w + 1);
            for (const struct option *lo = longs; lo->name; lo++)
                if (strcmp(lo->name, w + 1) == 0)
                    return util_err(err, errlen, "unknown option '%s' (did you mean --%s?) "
                                    "(see --help)", w, lo->name);
            return unknown_option(longs, w, w + 1, len, err, errlen);
        }
    }
    if (option_has_arg(longs, ch) != no_argument && !val) {
        if (*i + 1 >= argc)
            return util_err(err, errlen, "%s needs a value (see --help)", w);
        val = argv[++*i];
    }
    (*i)++;
    *arg = val;
    return ch;
}
