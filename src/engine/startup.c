/* startup.c: the start-up's collectives (see startup.h), over the transport interface
 * (transport_allgather, transport_bcast_all, transport_barrier, transport_agree_errors), so no
 * MPI here; everything that can be computed without communication (parsing, deriving the
 * planner's inputs) is in src/plan/ and only called from here. */
#include "startup.h"

#include "model.h"
#include "kernels.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int startup_agree(Transport *cm, const char *err)
{
    if (cm->size > 1)
        return transport_agree_errors(cm, err);
    if (err && err[0])
        fprintf(stderr, "headsplit: error: %s\n", err);
    return err && err[0];
}

int startup_check_model(Transport *cm, const ModelConfig *c, const char *path)
{
    uint64_t h = 1469598103934665603ull;
    const int f[] = {c->arch, c->dim, c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
                     c->ffn_dim, c->vocab_size, c->context_length, c->rope_style,
                     c->tied_embeddings, c->bos_id, c->eos_id};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        h = (h ^ (uint64_t)(uint32_t)f[i]) * 1099511628211ull;
    uint32_t bits[2];
    memcpy(&bits[0], &c->norm_eps, 4);
    memcpy(&bits[1], &c->rope_theta, 4);
    h = (h ^ bits[0]) * 1099511628211ull;
    h = (h ^ bits[1]) * 1099511628211ull;
    struct stat st;
    uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    h = (h ^ size) * 1099511628211ull;
    uint64_t *all = xcalloc((size_t)cm->size, sizeof(uint64_t));
    transport_allgather(cm, &h, sizeof h, all);
    char err[600] = "";
    if (all[cm->rank] != all[0])
        snprintf(err, sizeof err, "%s: this rank's model differs from rank 0's (config and file "
                 "size checksum %016llx, rank 0 has %016llx): every rank needs the same file",
                 path, (unsigned long long)all[cm->rank], (unsigned long long)all[0]);
    free(all);
    return transport_agree_errors(cm, err);
}

/* The links to emulate: --emulate-link everywhere, then --link-matrix lines over it (every
 * rank parses the same options, so every rank fails alike).  1 when there are links to
 * emulate, 0 when none, -1 with err. */
static int setup_links(Transport *cm, Cluster *cl, const StartupOptions *o, char *err,
                       size_t errlen)
{
    const size_t nn = (size_t)cm->size * (size_t)cm->size;
    if (!o->emulate_link && !o->link_matrix)
        return 0;
    if (o->emulate_link) {
        NetLink uni;
        char lerr[400];
        if (cluster_parse_link(o->emulate_link, &uni, lerr, sizeof lerr) < 0)
            return util_err(err, errlen, "--emulate-link: %s", lerr);
        for (size_t i = 0; i < nn; i++)
            cl->link[i] = uni;
    }
    if (o->link_matrix &&
        cluster_load_link_matrix(o->link_matrix, cm->size, cl->link, err, errlen) < 0)
        return -1;
    return 1;
}

/* This rank's HEADSPLIT_DEVICE_SLOWDOWN (1 when unset); a bad value ends the run. */
static double device_slowdown(int rank)
{
    const char *v = getenv("HEADSPLIT_DEVICE_SLOWDOWN");
    if (!v || !v[0])
        return 1;
    char *end;
    errno = 0;
    double k = strtod(v, &end);
    if (*end || errno || !(k >= 1 && k <= 1000))
        FATAL("rank %d: HEADSPLIT_DEVICE_SLOWDOWN='%s' is not a factor from 1 to 1000", rank, v);
    return k;
}

/* A positive number from environment variable name (def when unset); a bad value ends the
 * run naming the rank and the variable. */
static double device_env(int rank, const char *name, double def, double hi)
{
    const char *v = getenv(name);
    if (!v || !v[0])
        return def;
    char *end;
    errno = 0;
    double k = strtod(v, &end);
    if (*end || errno || !(k > 0 && k <= hi))
        FATAL("rank %d: %s='%s' is not a number in (0, %g]", rank, name, v, hi);
    return k;
}

/* Every rank's speed in bytes of weights per second through the model's own layer code
 * (norms, RoPE and attention included; a bare matrix-vector probe overrated the engine by
 * about 20%): synthetic layers of the model's shapes, at least 256 MiB of them so that they
 * stream from memory as the real ones do, the median of three passes.  Measured one rank at
 * a time so that they do not compete; a dilated rank reports its emulated device's speed. */
static void measure_speeds(Transport *cm, const ModelConfig *c, Cluster *cl)
{
    double mine = 0;
    for (int r = 0; r < cm->size; r++) {
        if (r == cm->rank) {
            double cpu_Bps = 0;
            mine = model_probe_layer_speeds(c, (size_t)256 << 20, 3, &cpu_Bps);
            if (cm->slowdown > 1) {
                /* A dilated rank is charged slowdown x its CPU time over the board's cores
                 * that its threads use, and at least its bytes over the board's bandwidth
                 * (transport_dilation_owed): its speed is that, whatever the host's cores
                 * (the wall-clock speed on a busy 2-core host understated a 4-core board). */
                const double bw = device_env(r, "HEADSPLIT_DEVICE_BW_GBPS", 0, 1e6) * 1e9;
                int cores = (int)device_env(r, "HEADSPLIT_DEVICE_CORES", 1, 1024);
                int threads = kernels_get_threads();
                int par = threads < cores ? threads : cores;
                mine = cpu_Bps * (par > 1 ? par : 1) / cm->slowdown;
                if (bw > 0 && mine > bw)
                    mine = bw;
            }
            /* The probe's layers (256 MiB, freed above) are gone before any weight loads:
             * the peak that metrics report starts here, so that it measures what the rank
             * holds to run (weights, KV caches, buffers), not this transient. */
            util_reset_peak_rss();
        }
        transport_barrier(cm);
    }
    /* Speed and dilation factor of every rank, in one gather. */
    double pair[2] = {mine, cm->slowdown > 1 ? cm->slowdown : 1};
    double *all = xcalloc(2 * (size_t)cm->size, sizeof(double));
    transport_allgather(cm, pair, sizeof pair, all);
    for (int r = 0; r < cm->size; r++) {
        cl->dev[r].speed_Bps = all[2 * r];
        cl->dev[r].slowdown = all[2 * r + 1];
    }
    free(all);
}

/* Every rank's memory budget: --mem-budget, else the emulated device's
 * HEADSPLIT_DEVICE_MEM_BYTES ("max" or unset: none). */
static void gather_budgets(Transport *cm, Cluster *cl, size_t mem_budget)
{
    size_t mine = mem_budget;
    const char *env = getenv("HEADSPLIT_DEVICE_MEM_BYTES");
    if (!mine && env && strcmp(env, "max") != 0) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (!*end && v > 0)
            mine = (size_t)v;
    }
    unsigned long long m64 = mine, *all = xcalloc((size_t)cm->size, sizeof(*all));
    transport_allgather(cm, &m64, sizeof m64, all);
    for (int r = 0; r < cm->size; r++)
        cl->dev[r].mem_budget = (size_t)all[r];
    free(all);
}

/* --devices: read at rank 0, sent to every rank.  1 on every rank on a bad file (rank 0 has
 * said why). */
static int share_devices_file(Transport *cm, const char *path, size_t *mem, double *speed)
{
    char err[600] = "", ferr[560];
    if (cm->rank == 0 && cluster_load_devices(path, cm->size, mem, speed, ferr, sizeof ferr) < 0)
        snprintf(err, sizeof err, "--devices: %s", ferr);
    if (transport_agree_errors(cm, err))
        return 1;
    transport_bcast_all(cm, mem, (size_t)cm->size * sizeof(size_t));
    transport_bcast_all(cm, speed, (size_t)cm->size * sizeof(double));
    return 0;
}

/* The compute dilation of the board this rank emulates (--emulate-slowdown, or
 * HEADSPLIT_DEVICE_SLOWDOWN from scripts/emulate-device; a factor of 1 dilates nothing) and
 * the board behind it (scripts/emulate-device sets these from the catalogue): its cores
 * compute in parallel, its memory bandwidth is shared. */
static double push_board(Transport *cm, const StartupOptions *o)
{
    const double k = o->slowdown > 0 ? o->slowdown : device_slowdown(cm->rank);
    transport_push_dilation(cm, k);
    transport_set_board(cm, (int)device_env(cm->rank, "HEADSPLIT_DEVICE_CORES", 1, 1024),
                        device_env(cm->rank, "HEADSPLIT_DEVICE_BW_GBPS", 0, 1e6) * 1e9,
                        kernels_get_threads());
    return k;
}

double startup_single_board(Transport *cm, const StartupOptions *o)
{
    return push_board(cm, o);
}

int startup_measure(ClusterInputs *ci, Transport *cm, const ModelConfig *c,
                    const StartupOptions *o)
{
    inputs_init(ci, cm->size);
    ci->assume_rtt_ms = o->assume_rtt_ms;
    /* Links: emulated on one host, then measured (through the emulation, if any). */
    char err[600] = "";
    /* Agreed on, not assumed: on several hosts a matrix file may be missing on one only. */
    int emulate = setup_links(cm, &ci->cluster, o, err, sizeof err);
    if (transport_agree_errors(cm, emulate < 0 ? err : NULL))
        return 2;
    if (emulate) /* collective where a medium is shared: after the agreement */
        transport_push_emulation(cm, ci->cluster.link, o->seed);
    int bad;
    cm->timeout_s = o->timeout_s;
    push_board(cm, o);
    transport_push_faults(cm, o->stall_rank, o->stall_pos, o->stall_s, o->kill_rank,
                          o->kill_pos);
    transport_measure_rtt(cm, o->rtt_pings);
    if (cm->rank == 0 && util_log_level() >= 1)
        transport_print_rtt(cm, stderr);
    const size_t nn = (size_t)cm->size * (size_t)cm->size;
    memcpy(ci->rtt_ms, cm->rtt_ms, nn * sizeof(double));
    memcpy(ci->rtt_p95_ms, cm->rtt_p95_ms, nn * sizeof(double));
    measure_speeds(cm, c, &ci->cluster);
    gather_budgets(cm, &ci->cluster, o->mem_budget);
    size_t *mem = xcalloc((size_t)cm->size, sizeof(size_t));
    double *speed = xcalloc((size_t)cm->size, sizeof(double));
    bad = o->devices_file ? share_devices_file(cm, o->devices_file, mem, speed)
                          : transport_agree_errors(cm, NULL);
    if (!bad)
        inputs_derive(ci, c, mem, speed);
    free(mem);
    free(speed);
    return bad;
}

int startup_share_mask(Transport *cm, unsigned char *mask, int n, const char *err)
{
    if (transport_agree_errors(cm, err))
        return 1;
    transport_bcast_all(cm, mask, (size_t)n);
    return 0;
}

void startup_gather_double(Transport *cm, double mine, double *all)
{
    transport_allgather(cm, &mine, sizeof mine, all);
}

int startup_share_status(Transport *cm, int rc)
{
    transport_bcast_all(cm, &rc, sizeof rc);
    return rc;
}
