/* cluster.c: the text forms of a cluster (link specs, link matrices, devices files) and the
 * stabilisation of measured inputs before they reach the planner.  Pure: no MPI, no HDF5;
 * every error names the item, and the file and line where there is one. */
#include "cluster.h"

#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cluster_init(Cluster *cl, int n)
{
    memset(cl, 0, sizeof *cl);
    cl->n = n;
    cl->dev = xcalloc((size_t)n, sizeof(ClusterDevice));
    cl->link = xcalloc((size_t)n * (size_t)n, sizeof(NetLink));
}

void cluster_set_medium(Cluster *cl, Medium m)
{
    for (size_t i = 0; i < (size_t)cl->n * (size_t)cl->n; i++)
        cl->link[i].medium = m;
}

void cluster_free(Cluster *cl)
{
    if (!cl)
        return;
    free(cl->dev);
    free(cl->link);
    memset(cl, 0, sizeof *cl);
}

/* Parses a number with a unit: times (s, ms, us; bare: ms) into seconds, rates (bit, kbit,
 * mbit, gbit; bare: mbit; or MB, megabytes) into bytes per second.  -1 when malformed. */
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

/* The named link presets; 0, or -1 for another name. */
static int link_preset(const char *name, NetLink *out)
{
    if (!strcmp(name, "wifi")) {
        /* frame: one 802.11ac transmission's contention and acknowledgement (DIFS, mean
         * backoff, preamble, SIFS, block ACK: ~0.2 ms) */
        *out = (NetLink){.rtt_s = 10e-3, .jitter_s = 2e-3, .bw_Bps = 200e6 / 8,
                         .medium = MEDIUM_SHARED, .relay_ap = 1, .frame_s = 0.2e-3};
        return 0;
    }
    if (!strcmp(name, "ethernet")) {
        *out = (NetLink){.rtt_s = 0.2e-3, .bw_Bps = 1e9 / 8, .medium = MEDIUM_SWITCHED};
        return 0;
    }
    return -1;
}

int cluster_parse_link(const char *spec, NetLink *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char buf[256];
    if (strlen(spec) >= sizeof buf)
        return util_err(err, errlen, "link description longer than %zu characters",
                        sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    int any = 0;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        any = 1;
        char *eq = strchr(kv, '=');
        if (!eq) {
            if (link_preset(kv, out) == 0)
                continue;
            return util_err(err, errlen, "'%s' is neither key=value nor a preset (wifi, "
                            "ethernet)", kv);
        }
        *eq = '\0';
        const char *k = kv, *v = eq + 1;
        int bad = 0;
        if (!strcmp(k, "rtt"))
            bad = parse_unit(v, 1, &out->rtt_s);
        else if (!strcmp(k, "jitter"))
            bad = parse_unit(v, 1, &out->jitter_s);
        else if (!strcmp(k, "bw"))
            bad = parse_unit(v, 0, &out->bw_Bps);
        else if (!strcmp(k, "frame"))
            bad = parse_unit(v, 1, &out->frame_s);
        else if (!strcmp(k, "medium")) {
            if (!strcmp(v, "shared"))
                out->medium = MEDIUM_SHARED;
            else if (!strcmp(v, "switched"))
                out->medium = MEDIUM_SWITCHED;
            else
                return util_err(err, errlen, "medium=%s is not shared or switched", v);
        } else if (!strcmp(k, "relay")) {
            if (!strcmp(v, "ap") || !strcmp(v, "none"))
                out->relay_ap = !strcmp(v, "ap");
            else
                return util_err(err, errlen, "relay=%s is not ap or none", v);
        } else {
            return util_err(err, errlen, "unknown key '%s' (rtt, jitter, bw, frame, medium, "
                            "relay)", k);
        }
        if (bad)
            return util_err(err, errlen, "%s=%s is not a valid %s", k, v,
                            strcmp(k, "bw") ? "time such as 10ms" : "rate such as 200mbit");
    }
    if (!any)
        return util_err(err, errlen, "empty link description");
    if (out->relay_ap && out->medium != MEDIUM_SHARED)
        return util_err(err, errlen, "relay=ap needs medium=shared (an access point relays "
                        "over one channel)");
    return 0;
}

/* A rank of a matrix line: 0..size-1, or '*' as -1.  -2 when malformed or out of range. */
static int matrix_rank(const char *s, int size)
{
    if (!strcmp(s, "*"))
        return -1;
    char *end;
    errno = 0;
    long r = strtol(s, &end, 10);
    return end == s || *end || errno || r < 0 || r >= size ? -2 : (int)r;
}

int cluster_load_link_matrix(const char *path, int size, NetLink *out, char *err,
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
        char a[16], b[16], spec[400], extra[2];
        int got = sscanf(line, "%15s %15s %399s %1s", a, b, spec, extra);
        if (got != 3) {
            if (got > 0)
                rc = util_err(err, errlen, "%s:%d: expected 'SRC DST rtt=..,jitter=..,bw=..'",
                              path, ln);
            continue;
        }
        NetLink l;
        char lerr[256];
        if (cluster_parse_link(spec, &l, lerr, sizeof lerr) < 0) {
            rc = util_err(err, errlen, "%s:%d: %s", path, ln, lerr);
            break;
        }
        int s = matrix_rank(a, size), d = matrix_rank(b, size);
        if (s < -1 || d < -1) {
            rc = util_err(err, errlen, "%s:%d: '%s' is not a rank 0..%d or *", path, ln,
                          s < -1 ? a : b, size - 1);
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

int cluster_load_devices(const char *path, int size, size_t *mem, double *speed, char *err,
                         size_t errlen)
{
    memset(mem, 0, (size_t)size * sizeof *mem);
    memset(speed, 0, (size_t)size * sizeof *speed);
    FILE *f = fopen(path, "r");
    if (!f)
        return util_err(err, errlen, "%s: cannot open devices file: %s", path,
                        strerror(errno));
    char line[256];
    int rc = 0;
    for (int ln = 1; rc == 0 && fgets(line, sizeof line, f); ln++) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok)
            continue;
        char *end;
        errno = 0;
        long r = strtol(tok, &end, 10);
        if (end == tok || *end || errno || r < 1 || r >= size) {
            rc = util_err(err, errlen, "%s:%d: '%s' is not a worker rank 1..%d", path, ln, tok,
                          size - 1);
            break;
        }
        while (rc == 0 && (tok = strtok_r(NULL, " \t\r\n", &save))) {
            if (strncmp(tok, "mem=", 4) == 0 && util_parse_bytes(tok + 4, &mem[r]) == 0)
                continue; /* mem=0: the rank keeps its own budget */
            if (strncmp(tok, "speed=", 6) == 0) {
                errno = 0;
                speed[r] = strtod(tok + 6, &end);
                if (end != tok + 6 && !*end && !errno && speed[r] > 0 && isfinite(speed[r]))
                    continue;
            }
            rc = util_err(err, errlen, "%s:%d: '%s' is not mem=SIZE or speed=X", path, ln, tok);
        }
    }
    fclose(f);
    return rc;
}

void cluster_stabilise_speeds(double *speed, int n)
{
    if (n < 1)
        return;
    double lo = 1e300, hi = 0;
    for (int i = 0; i < n; i++) {
        lo = speed[i] < lo ? speed[i] : lo;
        hi = speed[i] > hi ? speed[i] : hi;
    }
    for (int i = 0; i < n; i++)
        speed[i] = lo >= 0.7 * hi ? 1.0 : floor(speed[i] / hi * 20 + 0.5) / 20;
}

void cluster_stabilise_latencies(double *lat_ms, int size)
{
    if (size < 2)
        return;
    const size_t n = (size_t)size;
    double *v = xmalloc(n * n * sizeof(double)), lo = 1e300, hi = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j) {
                double x = lat_ms[i * n + j];
                v[m++] = x;
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
    util_sort_doubles(v, m);
    const double med = v[m / 2]; /* the upper middle */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double *x = &lat_ms[i * n + j];
            if (i == j)
                *x = 0;
            else
                *x = hi <= 2 * lo + 0.05 ? floor(med * 10 + 0.5) / 10
                                         : floor(*x * 10 + 0.5) / 10;
        }
    free(v);
}

double cluster_latency_sd_ms(const double *rtt_ms, const double *rtt_p95_ms,
                             const double *lat_ms, int size)
{
    const size_t n = size > 0 ? (size_t)size : 0;
    double *sd = xmalloc((n * n + 1) * sizeof(double));
    size_t m = 0;
    int lan = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j) {
                size_t k = i * n + j;
                double d = rtt_p95_ms[k] - rtt_ms[k];
                sd[m++] = d > 0 ? d / 1.645 / sqrt(2.0) : 0;
                lan &= lat_ms[k] == 0;
            }
    double v = m && !lan ? floor(util_median(sd, m) * 10 + 0.5) / 10 : 0;
    free(sd);
    return v;
}

const char *cluster_catalogue_path(const char *fallback)
{
    const char *env = getenv("HEADSPLIT_DEVICE_CATALOGUE");
    return env && env[0] ? env : fallback;
}

/* A catalogue number: "max" (allow_max) or "-" (allow_dash) as 0, else a finite number in
 * (0, hi] times scale.  -1 when malformed. */
static int catalogue_num(const char *s, int allow_max, int allow_dash, double hi, double scale,
                         double *out)
{
    if ((allow_max && !strcmp(s, "max")) || (allow_dash && !strcmp(s, "-"))) {
        *out = 0;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v > 0 && v <= hi))
        return -1;
    *out = v * scale;
    return 0;
}

/* Parses one row's columns into e; -1 with err naming the column. */
static int catalogue_row(char *line, CatalogueEntry *e, char *err, size_t errlen)
{
    enum { NCOL = 11 };
    static const char *cols[NCOL] = {"name", "speed_GBps", "cpu", "cores", "bw_GBps", "mem",
                                     "budget_GB", "load_MBps", "idle_W", "active_W", "draw"};
    char *tok[NCOL], *save = NULL;
    memset(e, 0, sizeof *e);
    for (int i = 0; i < NCOL; i++) {
        tok[i] = strtok_r(i ? NULL : line, " \t\r\n", &save);
        if (!tok[i])
            return util_err(err, errlen, "column %s missing (NAME SPEED_GBPS CPU CORES BW_GBPS "
                            "MEM BUDGET_GB LOAD_MBPS IDLE_W ACTIVE_W DRAW DESCRIPTION)", cols[i]);
    }
    if (strlen(tok[0]) >= sizeof e->dev.name)
        return util_err(err, errlen, "name '%s' is longer than %zu characters", tok[0],
                        sizeof e->dev.name - 1);
    snprintf(e->dev.name, sizeof e->dev.name, "%s", tok[0]);
    double budget = 0, cores = 0;
    int bad = -1;
    if (catalogue_num(tok[1], 1, 0, 1e6, 1e9, &e->dev.speed_Bps) < 0)
        bad = 1;
    else if (catalogue_num(tok[2], 1, 0, 1000, 1, &e->cpu_share) < 0)
        bad = 2;
    else if (catalogue_num(tok[3], 0, 1, 1024, 1, &cores) < 0 || cores != (int)cores)
        bad = 3;
    else if (strcmp(tok[4], "-") &&
             catalogue_num(tok[4], 1, 0, 1e6, 1e9, &e->board_bw_Bps) < 0)
        bad = 4;
    else if (strcmp(tok[5], "max") && (util_parse_bytes(tok[5], &e->mem_limit) < 0 ||
                                       e->mem_limit == 0))
        bad = 5;
    else if (catalogue_num(tok[6], 1, 0, 1e9, 1e9, &budget) < 0)
        bad = 6;
    else if (catalogue_num(tok[7], 0, 1, 1e9, 1e6, &e->dev.load_Bps) < 0)
        bad = 7;
    else if (catalogue_num(tok[8], 0, 1, 1e6, 1, &e->idle_w) < 0)
        bad = 8;
    else if (catalogue_num(tok[9], 0, 1, 1e6, 1, &e->active_w) < 0)
        bad = 9;
    else if (strcmp(tok[10], "0") && strcmp(tok[10], "1"))
        bad = 10;
    if (bad >= 0)
        return util_err(err, errlen, "%s '%s' is not valid", cols[bad], tok[bad]);
    e->cores = cores > 0 ? (int)cores : 1;
    if (!strcmp(tok[4], "-")) /* the cores share what one core streams */
        e->board_bw_Bps = e->dev.speed_Bps;
    e->dev.mem_budget = (size_t)budget;
    if (e->mem_limit && e->dev.mem_budget > e->mem_limit)
        return util_err(err, errlen, "'%s': budget_GB %s is more than mem %s", e->dev.name,
                        tok[6], tok[5]);
    e->draw = tok[10][0] == '1';
    if (e->draw && !(e->dev.speed_Bps > 0 && e->dev.mem_budget > 0 && e->dev.load_Bps > 0))
        return util_err(err, errlen, "'%s' is drawn (draw 1) but has no finite speed, budget "
                        "or load speed", e->dev.name);
    if ((e->idle_w > 0) != (e->active_w > 0))
        return util_err(err, errlen, "'%s': give both idle_W and active_W or neither",
                        e->dev.name);
    const char *rest = save ? save + strspn(save, " \t") : "";
    snprintf(e->what, sizeof e->what, "%.*s", (int)strcspn(rest, "\r\n"), rest);
    return 0;
}

int cluster_load_catalogue(const char *path, CatalogueEntry **out, int *n, char *err,
                           size_t errlen)
{
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return util_err(err, errlen, "%s: cannot open device catalogue: %s", path,
                        strerror(errno));
    char line[512], rerr[256];
    int rc = 0;
    for (int ln = 1; rc == 0 && fgets(line, sizeof line, f); ln++) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        CatalogueEntry e;
        if (catalogue_row(line, &e, rerr, sizeof rerr) < 0) {
            rc = util_err(err, errlen, "%s:%d: %s", path, ln, rerr);
            break;
        }
        for (int i = 0; i < *n; i++)
            if (!strcmp((*out)[i].dev.name, e.dev.name))
                rc = util_err(err, errlen, "%s:%d: device '%s' is listed twice", path, ln,
                              e.dev.name);
        if (rc == 0) {
            *out = xrealloc(*out, ((size_t)*n + 1) * sizeof **out);
            (*out)[(*n)++] = e;
        }
    }
    fclose(f);
    if (rc == 0 && *n == 0)
        rc = util_err(err, errlen, "%s: no devices", path);
    if (rc < 0) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
