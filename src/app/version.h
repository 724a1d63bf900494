/* version.h: --version of every HeadSplit program: the git revision, the build's options and
 * the matrix-vector SIMD path this CPU takes. */
#ifndef HEADSPLIT_APP_VERSION_H
#define HEADSPLIT_APP_VERSION_H

#include "kernels.h"

#include <stdio.h>
#include <string.h>

#include "gitrev.h" /* HEADSPLIT_GIT_REV: generated at build time (scripts/gitrev.cmake) */

static inline void app_version(FILE *out, const char *program)
{
#if defined(HEADSPLIT_NATIVE_BUILD)
    const char *native = "native (-march=native)";
#else
    const char *native = "portable (HEADSPLIT_NATIVE=OFF)";
#endif
#if defined(NDEBUG)
    const char *type = "release";
#else
    const char *type = "debug";
#endif
    fprintf(out, "%s (HeadSplit) revision %s\nbuild: %s, %s; matvec SIMD path: %s; default "
            "threads: %d\n", program, HEADSPLIT_GIT_REV, type, native, kernels_matvec_path(),
            kernels_default_threads());
}

/* 1 when argv holds --version (the programs whose parsers are elsewhere look first). */
static inline int app_wants_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--version") == 0)
            return 1;
    return 0;
}

#endif
