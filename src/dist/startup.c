/* startup.c: the start-up's collectives (see startup.h).  Plain MPI through comm.h's checked
 * calls and sleeping waits; everything that can be computed without MPI (parsing, deriving
 * the planner's inputs) is in src/plan/ and only called from here. */
#include "startup.h"

#include "model.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int startup_agree(Comm *cm, const char *err)
{
    if (cm->size > 1)
        return comm_agree_errors(cm, MPI_COMM_WORLD, err);
    if (err && err[0])
        fprintf(stderr, "headsplit: error: %s\n", err);
    return err && err[0];
}

int startup_check_model(Comm *cm, const ModelConfig *c, const char *path)
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
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    char err[600] = "";
    if (all[cm->rank] != all[0])
        snprintf(err, sizeof err, "%s: this rank's model differs from rank 0's (config and file "
                 "size checksum %016llx, rank 0 has %016llx): every rank needs the same file",
                 path, (unsigned long long)all[cm->rank], (unsigned long long)all[0]);
    free(all);
    return comm_agree_errors(cm, MPI_COMM_WORLD, err);
}

/* The links to emulate: --emulate-link everywhere, then --link-matrix lines over it (every
 * rank parses the same options, so every rank fails alike).  0, or -1 with err. */
static int setup_links(Comm *cm, Cluster *cl, const StartupOptions *o, char *err,
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
    /* The MPI layer's emulation delays by latency, jitter and bandwidth (a switched network);
     * the medium is for the planner and the simulator. */
    Link *links = xcalloc(nn, sizeof(Link));
    for (size_t i = 0; i < nn; i++)
        links[i] = (Link){cl->link[i].rtt_s, cl->link[i].jitter_s, cl->link[i].bw_Bps};
    comm_set_emulation(cm, links, o->seed);
    free(links);
    return 0;
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

/* Every rank's speed in bytes of weights per second through the model's own layer code
 * (norms, RoPE and attention included; a bare matrix-vector probe overrated the engine by
 * about 20%): synthetic layers of the model's shapes, at least 256 MiB of them so that they
 * stream from memory as the real ones do, the median of three passes.  Measured one rank at
 * a time so that they do not compete; a dilated rank reports its emulated device's speed. */
static void measure_speeds(Comm *cm, const ModelConfig *c, Cluster *cl)
{
    double mine = 0;
    for (int r = 0; r < cm->size; r++) {
        if (r == cm->rank)
            mine = model_probe_layer_Bps(c, (size_t)256 << 20, 3) /
                   (cm->dilate > 1 ? cm->dilate : 1);
        MPI_Request req;
        MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
        comm_wait(cm, &req);
    }
    /* Speed and dilation factor of every rank, in one gather. */
    double pair[2] = {mine, cm->dilate > 1 ? cm->dilate : 1};
    double *all = xcalloc(2 * (size_t)cm->size, sizeof(double));
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(pair, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    for (int r = 0; r < cm->size; r++) {
        cl->dev[r].speed_Bps = all[2 * r];
        cl->dev[r].slowdown = all[2 * r + 1];
    }
    free(all);
}

/* Every rank's memory budget: --mem-budget, else the emulated device's
 * HEADSPLIT_DEVICE_MEM_BYTES ("max" or unset: none). */
static void gather_budgets(Comm *cm, Cluster *cl, size_t mem_budget)
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
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(&m64, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG,
                             MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    for (int r = 0; r < cm->size; r++)
        cl->dev[r].mem_budget = (size_t)all[r];
    free(all);
}

/* --devices: read at rank 0, sent to every rank.  1 on every rank on a bad file (rank 0 has
 * said why). */
static int share_devices_file(Comm *cm, const char *path, size_t *mem, double *speed)
{
    char err[600] = "", ferr[560];
    if (cm->rank == 0 && cluster_load_devices(path, cm->size, mem, speed, ferr, sizeof ferr) < 0)
        snprintf(err, sizeof err, "--devices: %s", ferr);
    if (comm_agree_errors(cm, MPI_COMM_WORLD, err))
        return 1;
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(mem, (int)((size_t)cm->size * sizeof(size_t)), MPI_BYTE, 0,
                         MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    MPI_CHECK(MPI_Ibcast(speed, cm->size, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    return 0;
}

int startup_measure(ClusterInputs *ci, Comm *cm, const ModelConfig *c,
                    const StartupOptions *o)
{
    inputs_init(ci, cm->size);
    ci->assume_rtt_ms = o->assume_rtt_ms;
    /* Links: emulated on one host, then measured (through the emulation, if any). */
    char err[600] = "";
    /* Agreed on, not assumed: on several hosts a matrix file may be missing on one only. */
    int bad = setup_links(cm, &ci->cluster, o, err, sizeof err) < 0;
    if (comm_agree_errors(cm, MPI_COMM_WORLD, bad ? err : NULL))
        return 2;
    cm->timeout_s = o->timeout_s;
    cm->dilate = o->slowdown > 0 ? o->slowdown : device_slowdown(cm->rank);
    cm->stall_rank = o->stall_rank;
    cm->stall_pos = o->stall_pos;
    cm->stall_s = o->stall_s;
    cm->kill_rank = o->kill_rank;
    cm->kill_pos = o->kill_pos;
    comm_measure_rtt(cm, o->rtt_pings);
    if (cm->rank == 0 && util_log_level() >= 1)
        comm_print_rtt(cm, stderr);
    const size_t nn = (size_t)cm->size * (size_t)cm->size;
    memcpy(ci->rtt_ms, cm->rtt_ms, nn * sizeof(double));
    memcpy(ci->rtt_p95_ms, cm->rtt_p95_ms, nn * sizeof(double));
    measure_speeds(cm, c, &ci->cluster);
    gather_budgets(cm, &ci->cluster, o->mem_budget);
    size_t *mem = xcalloc((size_t)cm->size, sizeof(size_t));
    double *speed = xcalloc((size_t)cm->size, sizeof(double));
    bad = o->devices_file ? share_devices_file(cm, o->devices_file, mem, speed)
                          : comm_agree_errors(cm, MPI_COMM_WORLD, NULL);
    if (!bad)
        inputs_derive(ci, c, mem, speed);
    free(mem);
    free(speed);
    return bad;
}

int startup_share_mask(Comm *cm, unsigned char *mask, int n, const char *err)
{
    if (comm_agree_errors(cm, MPI_COMM_WORLD, err))
        return 1;
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(mask, n, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    return 0;
}

void startup_gather_double(Comm *cm, double mine, double *all)
{
    MPI_Request req;
    MPI_CHECK(MPI_Igather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
}

int startup_share_status(Comm *cm, int rc)
{
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
    comm_wait(cm, &req);
    return rc;
}
