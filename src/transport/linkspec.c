/* linkspec.c: the text forms of emulated links: "rtt=10ms,jitter=2ms,bw=200mbit" and per-pair
 * matrix files (see transport.h). */
#include "transport.h"

#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a number with a unit: times (s, ms, us) into seconds, rates (bit, kbit, mbit, gbit,
 * or bytes with B) into bytes per second. */
static int parse_unit(const char *v, int is_time, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno || !(x >= 0) || !isfinite(x))
        return -1;
    char u[16] = {0};
    size_t n = 0;
    while (end[n] && n < sizeof u - 1) {
        u[n] = (char)tolower((unsigned char)end[n]);
        n++;
    }
    if (end[n])
        return -1;
    if (is_time) {
        if (!strcmp(u, "s")) *out = x;
        else if (!strcmp(u, "ms") || !u[0]) *out = x * 1e-3;
        else if (!strcmp(u, "us")) *out = x * 1e-6;
        else return -1;
    } else {
        if (!strcmp(u, "bit") || !strcmp(u, "bps")) *out = x / 8;
        else if (!strcmp(u, "kbit")) *out = x * 1e3 / 8;
        else if (!strcmp(u, "mbit") || !u[0]) *out = x * 1e6 / 8;
        else if (!strcmp(u, "gbit")) *out = x * 1e9 / 8;
        else if (!strcmp(u, "mb")) *out = x * 1e6; /* megabytes per second */
        else return -1;
    }
    return 0;
}

int transport_parse_link(const char *spec, NetLink *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    int any = 0;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return util_err(err, errlen, "--emulate-link: '%s' is not key=value", kv);
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        int bad;
        if (!strcmp(k, "rtt"))
            bad = parse_unit(v, 1, &out->rtt_s);
        else if (!strcmp(k, "jitter"))
            bad = parse_unit(v, 1, &out->jitter_s);
        else if (!strcmp(k, "bw"))
            bad = parse_unit(v, 0, &out->bw_Bps);
        else
            return util_err(err, errlen, "--emulate-link: unknown key '%s' (rtt, jitter, bw)", k);
        if (bad)
            return util_err(err, errlen, "--emulate-link: %s=%s is not a valid %s", k, v,
                            strcmp(k, "bw") ? "time such as 10ms" : "rate such as 200mbit");
        any = 1;
    }
    if (!any)
        return util_err(err, errlen, "--emulate-link: empty link description");
    return 0;
}

int transport_load_link_matrix(const char *path, int size, NetLink *out, char *err,
                               size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return util_err(err, errlen, "%s: cannot open link matrix: %s", path, strerror(errno));
    char line[512];
    int ln = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ln++;
        char *h = strchr(line, '#');
        if (h)
            *h = '\0';
        char a[16], b[16], spec[400];
        if (sscanf(line, "%15s %15s %399s", a, b, spec) != 3) {
            if (strspn(line, " \t\r\n") != strlen(line))
                rc = util_err(err, errlen, "%s:%d: expected 'SRC DST rtt=..,jitter=..,bw=..'",
                              path, ln);
            continue;
        }
        NetLink l;
        char lerr[256];
        if (transport_parse_link(spec, &l, lerr, sizeof lerr) < 0) {
            rc = util_err(err, errlen, "%s:%d: %s", path, ln, lerr);
            break;
        }
        int s = strcmp(a, "*") ? atoi(a) : -1, d = strcmp(b, "*") ? atoi(b) : -1;
        if ((s < -1 || s >= size) || (d < -1 || d >= size)) {
            rc = util_err(err, errlen, "%s:%d: rank outside 0..%d", path, ln, size - 1);
            break;
        }
        for (int i = 0; i < size; i++)
            for (int j = 0; j < size; j++)
                if ((s < 0 || s == i) && (d < 0 || d == j) && i != j)
                    out[(size_t)i * (size_t)size + (size_t)j] = l;
    }
    fclose(f);
    return rc;
}
