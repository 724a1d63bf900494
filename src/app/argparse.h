/* argparse.h: a command line read word by word against a table of long options (getopt's
 * struct option: name, has_arg, flag unused, val) and one of short forms, each spelt in full:
 * --name, --name=VALUE, --name VALUE, and short forms as whole words ("-np" is -np, never
 * "-n p"), as llama.cpp reads them.  No prefix of a long name is taken for it (getopt_long
 * takes --step for --steps); errors name the word typed and suggest the names meant. */
#ifndef HEADSPLIT_APP_ARGPARSE_H
#define HEADSPLIT_APP_ARGPARSE_H

#include <getopt.h>
#include <stddef.h>

typedef struct {
    const char *name; /* without the dash: "m", "ub" */
    int val;          /* the code of a long option, whose has_arg it shares */
} ShortOption;

/* The option at argv[*i] (longs and shorts end with a NULL name): its code, with *arg its
 * value (the next word where it takes one, or after '='; a one-letter short form also as
 * -c512) and *i past the words used.  0 after "--" or at the end of argv; -1 with err (an
 * unknown option with the names it may have meant, a value missing or not expected, a word
 * that is not an option). */
int argparse_next(const struct option *longs, const ShortOption *shorts, int argc,
                  char **argv, int *i, const char **arg, char *err, size_t errlen);

#endif
