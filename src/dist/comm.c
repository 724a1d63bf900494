/* comm.c: MPI initialisation, checked calls, sleeping waits and agreement on errors. */
#include "comm.h"

#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <time.h>

void comm_check(int rc, const char *what, const char *file, int line)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    util_fatal(file, line, "MPI call %s failed: %s", what, msg);
}

static void abort_hook(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

void comm_init(Comm *cm, int *argc, char ***argv)
{
    memset(cm, 0, sizeof *cm);
    MPI_Init(argc, argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &cm->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &cm->size));
    cm->stall_rank = -1;
    cm->kill_rank = -1;
    cm->margin = 0.15;
    cm->timeout_s = 10.0;
    cm->max_retries = 20;
    cm->links = xcalloc((size_t)cm->size, sizeof(LinkStats));
    cm->rtt_ms = xcalloc((size_t)cm->size * (size_t)cm->size, sizeof(double));
    cm->rtt_p95_ms = xcalloc((size_t)cm->size * (size_t)cm->size, sizeof(double));
    util_set_rank(cm->rank);
    util_set_fatal_hook(abort_hook);
    /* Short sleeps must be short: the default 50 us timer slack would dominate them. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

void comm_finalize(Comm *cm)
{
    /* A sleeping barrier first, so ranks that finish early do not spin in MPI_Finalize. */
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    free(cm->links);
    free(cm->rtt_ms);
    free(cm->rtt_p95_ms);
    free(cm->emu);
    MPI_Finalize();
}

/* Tests req until done or until the time `until` (0: forever); returns 1 when done. */
static int wait_until(Comm *cm, MPI_Request *req, double until)
{
    int done = 0;
    long sleep_ns = 2000;
    for (int spins = 0;; spins++) {
        MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done)
            return 1;
        if (until > 0 && time_now() >= until)
            return 0;
        if (cm->wait_mode == WAIT_SPIN || spins < 16)
            continue;
        /* Bounded back-off: 2 us doubling to 200 us, well under one layer's work. */
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 200000)
            sleep_ns *= 2;
    }
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Ends the run: nothing came from peer for `waited` seconds (what, layer: the wait's site). */
static void stall_fatal(const Comm *cm, int peer, double waited, const char *what, int layer)
{
    FATAL("no message from rank %d for %.1f s (%s, layer %d, link %d->%d): the peer has "
          "failed or stalled", peer, waited, what ? what : "message", layer, peer, cm->rank);
}

static void dilate_mark(Comm *cm)
{
    cm->dil_cpu0 = time_cpu();
    cm->dil_wall0 = time_now();
}

/* Ends a stretch of work: sleeps until it has lasted dilate x its CPU time. */
static void dilate_pay(Comm *cm)
{
    if (!cm->dilate_on)
        return;
    double owed = cm->dilate * (time_cpu() - cm->dil_cpu0) - (time_now() - cm->dil_wall0);
    if (owed > 0) {
        sleep_s(owed);
        cm->dilated_s += owed;
    }
}

void comm_dilate_start(Comm *cm)
{
    cm->dilate_on = cm->dilate > 1;
    dilate_mark(cm);
}

void comm_dilate_stop(Comm *cm)
{
    dilate_pay(cm);
    cm->dilate_on = 0;
}

void comm_wait(Comm *cm, MPI_Request *req)
{
    dilate_pay(cm);
    double t0 = time_now();
    cm->waits++;
    cm->wait_t0 = t0;
    cm->wait_limit_s = 0;
    wait_until(cm, req, 0);
    cm->wait_s += time_now() - t0;
    dilate_mark(cm);
}

void comm_wait_link(Comm *cm, MPI_Request *req, int peer, const char *what, int layer,
                    double *ewma)
{
    dilate_pay(cm);
    double t0 = time_now();
    cm->waits++;
    double one_way = 0;
    if (peer >= 0 && peer < cm->size)
        one_way = 0.5e-3 * cm->rtt_p95_ms[(size_t)cm->rank * (size_t)cm->size + (size_t)peer];
    double slot = one_way * (1.0 + cm->margin) + 2.0 * (ewma ? *ewma : 0) + 1e-3;
    double deadline = t0 + slot;
    const double limit = cm->rank == 0 ? 1.25 * cm->timeout_s + 0.5 : 1.1 * cm->timeout_s + 0.2;
    cm->wait_t0 = t0;
    cm->wait_limit_s = cm->timeout_s;
    cm->wait_what = what;
    cm->wait_layer = layer;
    int retries = 0;
    LinkStats *ls = peer >= 0 && peer < cm->size ? &cm->links[peer] : NULL;
    while (!wait_until(cm, req, deadline < t0 + limit ? deadline : t0 + limit)) {
        double now = time_now();
        if (now - t0 >= limit)
            stall_fatal(cm, peer, now - t0, what, layer);
        if (ls && retries == 0)
            ls->misses++;
        /* Waited for again: a fresh deadline, up to the retry limit, then only the timeout. */
        if (retries < cm->max_retries) {
            retries++;
            if (ls)
                ls->retries++;
            deadline = now + slot;
        } else {
            deadline = t0 + limit;
        }
    }
    double w = time_now() - t0;
    if (ls && w > ls->max_wait_s)
        ls->max_wait_s = w;
    if (ewma)
        *ewma = *ewma == 0 ? w : 0.8 * *ewma + 0.2 * w;
    cm->wait_s += w;
    dilate_mark(cm);
}

void comm_stamp(Comm *cm, WireHdr *h)
{
    dilate_pay(cm);
    dilate_mark(cm);
    h->magic = WIRE_MAGIC;
    h->src = cm->rank;
    h->t_send = time_now();
}

void comm_deliver(Comm *cm, const WireHdr *h, size_t bytes)
{
    int src = h->src;
    if (cm->kill_rank == cm->rank && h->pos >= cm->kill_pos && (h->cmd & 0xff) == WIRE_STEP) {
        fprintf(stderr, "headsplit: [rank %d] --inject-kill: killing myself at position %d\n",
                cm->rank, h->pos);
        fflush(stderr);
        kill(getpid(), SIGKILL);
    }
    if (src < 0 || src >= cm->size || src == cm->rank)
        return;
    double extra = 0;
    if (src == cm->stall_rank && h->pos == cm->stall_pos && h->cmd == WIRE_STEP) {
        extra = cm->stall_s;
        cm->stall_rank = -1; /* one stall per run */
    }
    if (!cm->emu && extra == 0)
        return;
    double target = h->t_send + extra;
    if (cm->emu) {
        const Link *l = &cm->emu[(size_t)src * (size_t)cm->size + (size_t)cm->rank];
        double j = l->jitter_s * (rng_float(&cm->emu_rng) - 0.5);
        double d = 0.5 * l->rtt_s + j;
        target += (d > 0 ? d : 0) + (l->bw_Bps > 0 ? (double)bytes / l->bw_Bps : 0);
    }
    /* The message is still in transit (emulated): past the wait's timeout it never came. */
    const double give_up = cm->wait_limit_s > 0 ? cm->wait_t0 + cm->wait_limit_s : INFINITY;
    const int held = target > give_up;
    if (held)
        target = give_up;
    sleep_s(target - time_now());
    if (held)
        stall_fatal(cm, src, time_now() - cm->wait_t0, cm->wait_what, cm->wait_layer);
    dilate_mark(cm); /* the transit was waiting, not work */
}

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

int comm_parse_link(const char *spec, Link *out, char *err, size_t errlen)
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

int comm_load_link_matrix(const char *path, int size, Link *out, char *err, size_t errlen)
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
        Link l;
        char lerr[256];
        if (comm_parse_link(spec, &l, lerr, sizeof lerr) < 0) {
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

void comm_set_emulation(Comm *cm, const Link *links, uint64_t seed)
{
    size_t n = (size_t)cm->size * (size_t)cm->size;
    cm->emu = xmalloc(n * sizeof(Link));
    memcpy(cm->emu, links, n * sizeof(Link));
    cm->emu_rng = seed * 7919u + (uint64_t)cm->rank;
}

void comm_measure_rtt(Comm *cm, int n)
{
    const int P = cm->size;
    double *med = xcalloc((size_t)P * (size_t)P, sizeof(double));
    double *p95 = xcalloc((size_t)P * (size_t)P, sizeof(double));
    double *s = xmalloc((size_t)n * sizeof(double));
    WireHdr h;
    memset(&h, 0, sizeof h);
    for (int i = 0; i < P; i++)
        for (int j = i + 1; j < P; j++) {
            if (cm->rank != i && cm->rank != j)
                continue;
            int peer = cm->rank == i ? j : i;
            /* Round -1 is a warm-up that also waits until both ranks reached this pair. */
            for (int k = -1; k < n; k++) {
                MPI_Request req;
                double t0 = time_now();
                if (cm->rank == i) {
                    h.cmd = WIRE_PING;
                    comm_stamp(cm, &h);
                    MPI_CHECK(MPI_Isend(&h, sizeof h, MPI_BYTE, peer, WIRE_TAG_PING,
                                        MPI_COMM_WORLD, &req));
                    comm_wait(cm, &req);
                }
                MPI_CHECK(MPI_Irecv(&h, sizeof h, MPI_BYTE, peer, WIRE_TAG_PING, MPI_COMM_WORLD,
                                    &req));
                comm_wait(cm, &req);
                comm_deliver(cm, &h, sizeof h);
                if (cm->rank == j) {
                    comm_stamp(cm, &h);
                    MPI_CHECK(MPI_Isend(&h, sizeof h, MPI_BYTE, peer, WIRE_TAG_PING,
                                        MPI_COMM_WORLD, &req));
                    comm_wait(cm, &req);
                }
                if (k >= 0)
                    s[k] = (time_now() - t0) * 1e3;
            }
            if (cm->rank == i) {
                util_sort_doubles(s, (size_t)n);
                double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
                double q = s[(int)ceil(0.95 * n) - 1];
                med[(size_t)i * (size_t)P + (size_t)j] = med[(size_t)j * (size_t)P + (size_t)i] = m;
                p95[(size_t)i * (size_t)P + (size_t)j] = p95[(size_t)j * (size_t)P + (size_t)i] = q;
            }
        }
    MPI_Request req;
    MPI_CHECK(MPI_Iallreduce(med, cm->rtt_ms, P * P, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    MPI_CHECK(MPI_Iallreduce(p95, cm->rtt_p95_ms, P * P, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD,
                             &req));
    comm_wait(cm, &req);
    free(med);
    free(p95);
    free(s);
}

json_t *comm_rtt_json(const Comm *cm)
{
    const int P = cm->size;
    json_t *o = json_object(), *m = json_array(), *q = json_array();
    for (int i = 0; i < P; i++) {
        json_t *r = json_array(), *r2 = json_array();
        for (int j = 0; j < P; j++) {
            json_array_append_new(r, json_real(cm->rtt_ms[(size_t)i * (size_t)P + (size_t)j]));
            json_array_append_new(r2,
                                  json_real(cm->rtt_p95_ms[(size_t)i * (size_t)P + (size_t)j]));
        }
        json_array_append_new(m, r);
        json_array_append_new(q, r2);
    }
    json_object_set_new(o, "rtt_ms", m);
    json_object_set_new(o, "rtt_p95_ms", q);
    json_object_set_new(o, "deadline_margin", json_real(cm->margin));
    return o;
}

void comm_print_rtt(const Comm *cm, FILE *out)
{
    const int P = cm->size;
    fprintf(out, "RTT (ms, median / p95; deadlines add %.0f%%):\n      ", cm->margin * 100);
    for (int j = 0; j < P; j++)
        fprintf(out, "%13d", j);
    fputc('\n', out);
    for (int i = 0; i < P; i++) {
        fprintf(out, "%5d ", i);
        for (int j = 0; j < P; j++) {
            if (i == j)
                fprintf(out, "%13s", "-");
            else
                fprintf(out, "%6.2f/%6.2f", cm->rtt_ms[(size_t)i * (size_t)P + (size_t)j],
                        cm->rtt_p95_ms[(size_t)i * (size_t)P + (size_t)j]);
        }
        fputc('\n', out);
    }
}

#define ERR_LEN 512

int comm_agree_errors(Comm *cm, MPI_Comm comm, const char *local_err)
{
    int size, rank;
    MPI_CHECK(MPI_Comm_size(comm, &size));
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    char mine[ERR_LEN] = {0};
    if (local_err)
        snprintf(mine, sizeof mine, "%s", local_err);
    char *all = rank == 0 ? xcalloc((size_t)size, ERR_LEN) : NULL;
    MPI_Request req;
    MPI_CHECK(MPI_Igather(mine, ERR_LEN, MPI_CHAR, all, ERR_LEN, MPI_CHAR, 0, comm, &req));
    comm_wait(cm, &req);
    int failed = 0;
    if (rank == 0) {
        int nfail = 0, first = -1;
        for (int r = 0; r < size; r++)
            if (all[(size_t)r * ERR_LEN]) {
                if (first < 0)
                    first = r;
                nfail++;
            }
        if (first >= 0) {
            fprintf(stderr, "headsplit: error: [rank %d] %s", first,
                    all + (size_t)first * ERR_LEN);
            if (nfail > 1)
                fprintf(stderr, " (and %d more rank%s failed)", nfail - 1, nfail > 2 ? "s" : "");
            fputc('\n', stderr);
            failed = 1;
        }
        free(all);
    }
    MPI_CHECK(MPI_Ibcast(&failed, 1, MPI_INT, 0, comm, &req));
    comm_wait(cm, &req);
    return failed;
}

MPI_Comm comm_create(const int *members, int n)
{
    MPI_Group world, g;
    MPI_Comm out;
    MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_CHECK(MPI_Group_incl(world, n, members, &g));
    MPI_CHECK(MPI_Comm_create(MPI_COMM_WORLD, g, &out));
    if (out != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(out, MPI_ERRORS_RETURN);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    return out;
}
