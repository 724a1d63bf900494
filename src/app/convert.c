/* convert.c: main() of headsplit-convert.  All the work is in src/convert (convert_run_cli);
 * this draws the progress bar, prints the one-line error and sets the exit status. */
#include "version.h"
#include "convert.h"
#include "kernels.h"
#include "progress.h"

#include <stdio.h>
#include <unistd.h>

/* ConvertProgress's ends: the bar on stderr's terminal (progress.h), ctx a Progress **; in a
 * log the writer prints its own lines (ConvertStats.progress). */
static void bar_start(void *ctx, uint64_t total, int writes)
{
    if (!isatty(STDERR_FILENO))
        return;
    *(Progress **)ctx = progress_start(writes ? "headsplit-convert: writing"
                                              : "headsplit-convert: reading", total, writes);
}

static void bar_stop(void *ctx, int ok)
{
    progress_stop(*(Progress **)ctx, ok);
    *(Progress **)ctx = NULL;
}

int main(int argc, char **argv)
{
    if (app_wants_version(argc, argv)) {
        app_version(stdout, "headsplit-convert");
        return 0;
    }
    char err[2048];
    err[0] = '\0';
    kernels_set_threads(kernels_default_threads()); /* generation and quantization */
    Progress *bar = NULL;
    ConvertProgress pg = {bar_start, bar_stop, &bar};
    int rc = convert_run_cli_progress(argc, argv, stdout, &pg, err, sizeof err);
    bar_stop(&bar, 0); /* where it was not stopped (nothing: it was) */
    if (rc < 0) {
        for (char *p = err; *p; p++) /* one line, whatever a lower layer wrote */
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        fflush(stdout);
        fprintf(stderr, "headsplit-convert: error: %s\n", err);
        return 1;
    }
    return 0;
}
