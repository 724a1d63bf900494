/* convert.c: main() of headsplit-convert.  All the work is in src/convert (convert_run_cli);
 * this prints the one-line error and sets the exit status. */
#include "version.h"
#include "convert.h"
#include "kernels.h"
#include "progress.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (app_wants_version(argc, argv)) {
        app_version(stdout, "headsplit-convert");
        return 0;
    }
    char err[2048];
    err[0] = '\0';
    kernels_set_threads(kernels_default_threads()); /* generation and quantization */
    Progress *bar = progress_start("headsplit-convert: writing", 0, 1);
    int rc = convert_run_cli(argc, argv, stdout, err, sizeof err);
    progress_stop(bar);
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
