/* sim_cluster.c: what is simulated and what it costs: model shapes, device and link
 * descriptions (generated heterogeneous scenarios, link presets, the JSON devices file that
 * the calibration also writes), and the cost model.  Decoding one token streams every weight
 * once, so a compute op costs (weight bytes + KV-cache bytes read) / device speed plus a fixed
 * per-op overhead; weight sizes come from the same accounting as placement
 * (config_attn_unit_bytes, config_proj_bytes, config_ffn_bytes, config_kv_bytes).  A message
 * costs latency + bytes / bandwidth (jitter and contention are the event core's). */
#include "sim.h"

#include "cluster.h"
#include "config_io.h"
#include "h5io.h"
#include "netmodel.h"
#include "util.h"
#include "wire.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEADSPLIT_CATALOGUE
#define HEADSPLIT_CATALOGUE "share/devices.tsv"
#endif

static double uniform(uint64_t *st, double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next(st) >> 11) / 9007199254740992.0;
}

/* A link of one-way latency lat_s (stored as its round trip). */
static NetLink sim_link(double lat_s, double jitter_s, double bw_Bps, Medium m)
{
    return (NetLink){.rtt_s = 2 * lat_s, .jitter_s = jitter_s, .bw_Bps = bw_Bps, .medium = m};
}

void sim_cluster_init(Cluster *cl, int n_workers)
{
    cluster_init(cl, n_workers + 1);
    size_t n = (size_t)(n_workers + 1) * (size_t)(n_workers + 1);
    for (size_t i = 0; i < n; i++)
        cl->link[i] = sim_link(20e-6, 0, 5e9, MEDIUM_SWITCHED);
    cl->jitter = JITTER_HALFNORMAL;
    cl->bcast = BCAST_AUTO;
    snprintf(cl->links_name, sizeof cl->links_name, "loopback");
}

int sim_cluster_generate(Cluster *cl, int n, uint64_t seed, const ModelConfig *c,
                         double mem_slack, int kv_positions, char *err, size_t errlen)
{
    if (n < 1 || n > 4096)
        return util_err(err, errlen, "--devices: %d is not a device count of 1..4096", n);
    /* Device classes: the catalogue's rows marked draw, in file order (share/devices.tsv,
     * which scripts/emulate-device reads too). */
    CatalogueEntry *cat = NULL;
    int n_cat = 0, n_draw = 0;
    char cerr[400];
    if (cluster_load_catalogue(cluster_catalogue_path(HEADSPLIT_CATALOGUE), &cat, &n_cat, cerr,
                               sizeof cerr) < 0)
        return util_err(err, errlen, "%s", cerr);
    const CatalogueEntry **classes = xcalloc((size_t)n_cat, sizeof *classes);
    for (int i = 0; i < n_cat; i++)
        if (cat[i].draw)
            classes[n_draw++] = &cat[i];
    if (n_draw < 2) {
        free(classes);
        free(cat);
        return util_err(err, errlen, "%s: fewer than two devices with draw 1",
                        cluster_catalogue_path(HEADSPLIT_CATALOGUE));
    }
    sim_cluster_init(cl, n);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 0x1234567ull;
    /* The controller: a hub of laptop class holding embeddings and the LM head. */
    cl->dev[0] = (ClusterDevice){.name = "controller", .speed_Bps = 20e9, .load_Bps = 1e9};
    double mem_total = 0;
    for (int r = 1; r <= n; r++) {
        int k = seed ? (int)(rng_next(&st) % (uint64_t)n_draw) : 1;
        double fs = seed ? uniform(&st, 0.85, 1.15) : 1.0;
        double fm = seed ? uniform(&st, 0.85, 1.15) : 1.0;
        ClusterDevice *d = &cl->dev[r];
        snprintf(d->name, sizeof d->name, "%s", classes[k]->dev.name);
        d->speed_Bps = classes[k]->dev.speed_Bps * fs;
        d->mem_budget = (size_t)((double)classes[k]->dev.mem_budget * fm);
        d->load_Bps = classes[k]->dev.load_Bps;
        mem_total += (double)d->mem_budget;
    }
    free(classes);
    free(cat);
    if (mem_slack > 0) {
        /* Budgets that together hold mem_slack times the layers and their KV cache. */
        double need = (double)c->n_layers *
                      ((double)config_layer_bytes(c) +
                       (double)c->n_kv_heads * (double)config_kv_bytes(c, kv_positions));
        for (int r = 1; r <= n; r++)
            cl->dev[r].mem_budget =
                (size_t)((double)cl->dev[r].mem_budget * mem_slack * need / mem_total);
    }
    return sim_cluster_set_links(cl, "gbit", seed, err, errlen);
}

int sim_cluster_set_links(Cluster *cl, const char *preset, uint64_t seed, char *err,
                          size_t errlen)
{
    /* Per device: a link rate and a one-way latency share; a pair gets the slower rate and
     * the sum of the two shares. */
    double rate_lo, rate_hi, lat_lo, lat_hi, jitter;
    Medium medium = MEDIUM_SWITCHED;
    if (strcmp(preset, "wifi") == 0) {
        /* ~10 ms RTT: 3-4 ms one way plus half-normal jitter (sigma 2 ms, mean 1.6 ms). */
        rate_lo = 50e6 / 8, rate_hi = 200e6 / 8, lat_lo = 1.5e-3, lat_hi = 2.0e-3;
        jitter = 2e-3;
        medium = MEDIUM_SHARED;
    } else if (strcmp(preset, "gbit") == 0) {
        rate_lo = 1e9 / 8, rate_hi = 10e9 / 8, lat_lo = 0.05e-3, lat_hi = 0.25e-3;
        jitter = 0.02e-3;
    } else if (strcmp(preset, "loopback") == 0) {
        rate_lo = rate_hi = 5e9, lat_lo = lat_hi = 10e-6;
        jitter = 0;
    } else {
        /* a link description as headsplit --emulate-link takes it (rtt=10ms,bw=200mbit,
         * medium=shared,relay=ap, or its presets: ethernet), the same on every pair */
        NetLink one;
        char why[256];
        if (cluster_parse_link(preset, &one, why, sizeof why) != 0)
            return util_err(err, errlen, "--links '%s': not a preset (wifi, gbit, loopback) "
                            "nor a link description: %s", preset, why);
        for (int a = 0; a < cl->n; a++)
            for (int b = 0; b < cl->n; b++)
                cl->link[(size_t)a * (size_t)cl->n + (size_t)b] =
                    a == b ? sim_link(0, 0, 5e9, MEDIUM_SWITCHED) : one;
        snprintf(cl->links_name, sizeof cl->links_name, "%s", preset);
        return 0;
    }
    const int n = cl->n;
    double *rate = xmalloc((size_t)n * sizeof(double)), *lat = xmalloc((size_t)n * sizeof(double));
    uint64_t st = seed * 0xbf58476d1ce4e5b9ull + 0x51ed27ull;
    for (int r = 0; r < n; r++) {
        rate[r] = uniform(&st, rate_lo, rate_hi);
        lat[r] = uniform(&st, lat_lo, lat_hi);
    }
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
            cl->link[(size_t)a * (size_t)n + (size_t)b] =
                sim_link(lat[a] + lat[b], jitter, rate[a] < rate[b] ? rate[a] : rate[b], medium);
    free(rate);
    free(lat);
    snprintf(cl->links_name, sizeof cl->links_name, "%s", preset);
    return 0;
}

static json_t *matrix_json(const Cluster *cl, int what)
{
    const int n = cl->n;
    json_t *m = json_array();
    for (int a = 0; a < n; a++) {
        json_t *row = json_array();
        for (int b = 0; b < n; b++) {
            const NetLink *lk = cluster_link(cl, a, b);
            double v = what == 0 ? net_latency_s(lk) * 1e3 : what == 1 ? lk->jitter_s * 1e3
                                                                       : lk->bw_Bps * 8 / 1e6;
            json_array_append_new(row, json_real(v));
        }
        json_array_append_new(m, row);
    }
    return m;
}

json_t *sim_cluster_to_json(const Cluster *cl)
{
    json_t *o = json_object(), *devs = json_array();
    for (int r = 0; r < cl->n; r++) {
        const ClusterDevice *d = &cl->dev[r];
        json_array_append_new(devs, json_pack("{s:s,s:f,s:f,s:f,s:f}", "name", d->name,
                              "speed_gbs", d->speed_Bps / 1e9, "op_overhead_us",
                              d->op_overhead_s * 1e6, "mem_mb", (double)d->mem_budget / 1e6,
                              "load_mbs", d->load_Bps / 1e6));
    }
    json_object_set_new(o, "links", json_string(cl->links_name));
    /* one medium for the whole network: link 0 -> 1's */
    static const char *media[] = {"switched", "shared", "ideal"};
    json_object_set_new(o, "medium", json_string(media[cluster_link(cl, 0, 1)->medium]));
    json_object_set_new(o, "jitter", json_string(cl->jitter == JITTER_UNIFORM ? "uniform"
                                                                               : "halfnormal"));
    static const char *bc[] = {"auto", "linear", "binomial"};
    json_object_set_new(o, "bcast", json_string(bc[cl->bcast]));
    json_object_set_new(o, "devices", devs);
    json_object_set_new(o, "link_latency_ms", matrix_json(cl, 0));
    json_object_set_new(o, "link_jitter_ms", matrix_json(cl, 1));
    json_object_set_new(o, "link_bandwidth_mbit", matrix_json(cl, 2));
    return o;
}

int sim_cluster_write(const Cluster *cl, const char *path, char *err, size_t errlen)
{
    json_t *o = sim_cluster_to_json(cl);
    int rc = json_dump_file(o, path, JSON_INDENT(1)) == 0
                 ? 0 : util_err(err, errlen, "%s: cannot write the devices file", path);
    json_decref(o);
    return rc;
}

static double num(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* Reads matrix key (n x n numbers) into the links; 1 if present, 0 if absent, -1 malformed. */
static int read_matrix(Cluster *cl, json_t *o, const char *key, int what)
{
    json_t *m = json_object_get(o, key);
    const int n = cl->n;
    if (!m)
        return 0;
    if (!json_is_array(m) || (int)json_array_size(m) != n)
        return -1;
    for (int a = 0; a < n; a++) {
        json_t *row = json_array_get(m, (size_t)a);
        if (!json_is_array(row) || (int)json_array_size(row) != n)
            return -1;
        for (int b = 0; b < n; b++) {
            json_t *v = json_array_get(row, (size_t)b);
            if (!json_is_number(v))
                return -1;
            double x = json_number_value(v);
            NetLink *lk = cluster_link(cl, a, b);
            if (what == 0)
                lk->rtt_s = 2 * (x / 1e3);
            else if (what == 1)
                lk->jitter_s = x / 1e3;
            else
                lk->bw_Bps = x * 1e6 / 8;
        }
    }
    return 1;
}

int sim_cluster_read(Cluster *cl, const char *path, char *err, size_t errlen)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return util_err(err, errlen, "%s:%d: %s", path, je.line, je.text);
    json_t *devs = json_object_get(o, "devices");
    int n = json_is_array(devs) ? (int)json_array_size(devs) - 1 : -1;
    if (n < 1) {
        json_decref(o);
        return util_err(err, errlen, "%s: field devices must list the controller and at least "
                        "one worker", path);
    }
    sim_cluster_init(cl, n);
    int rc = 0;
    for (int r = 0; r <= n && rc == 0; r++) {
        json_t *d = json_array_get(devs, (size_t)r);
        ClusterDevice *sd = &cl->dev[r];
        json_t *nm = json_object_get(d, "name");
        snprintf(sd->name, sizeof sd->name, "%s", json_is_string(nm) ? json_string_value(nm)
                                                                     : r ? "worker" : "controller");
        sd->speed_Bps = num(d, "speed_gbs", 0) * 1e9;
        sd->op_overhead_s = num(d, "op_overhead_us", 0) / 1e6;
        sd->mem_budget = (size_t)(num(d, "mem_mb", 0) * 1e6);
        sd->load_Bps = num(d, "load_mbs", 200) * 1e6;
        if (!(sd->speed_Bps > 0) || sd->op_overhead_s < 0 || !(sd->load_Bps > 0))
            rc = util_err(err, errlen, "%s: devices[%d]: speed_gbs and load_mbs must be > 0, "
                          "op_overhead_us >= 0", path, r);
    }
    json_t *links = json_object_get(o, "links");
    /* A preset name draws the links unless the matrices give them (then it is a label). */
    if (rc == 0 && json_is_string(links) && !json_object_get(o, "link_latency_ms"))
        rc = sim_cluster_set_links(cl, json_string_value(links), (uint64_t)num(o, "link_seed", 1),
                                   err, errlen);
    else if (rc == 0 && json_is_string(links))
        snprintf(cl->links_name, sizeof cl->links_name, "%s", json_string_value(links));
    const char *keys[3] = {"link_latency_ms", "link_jitter_ms", "link_bandwidth_mbit"};
    for (int w = 0; w < 3 && rc == 0; w++)
        if (read_matrix(cl, o, keys[w], w) < 0)
            rc = util_err(err, errlen, "%s: field %s must be a %d x %d matrix of numbers", path,
                          keys[w], n + 1, n + 1);
    json_t *med = json_object_get(o, "medium"), *bc = json_object_get(o, "bcast");
    if (rc == 0 && json_is_string(med))
        cluster_set_medium(cl, strcmp(json_string_value(med), "shared") == 0  ? MEDIUM_SHARED
                               : strcmp(json_string_value(med), "ideal") == 0 ? MEDIUM_IDEAL
                                                                              : MEDIUM_SWITCHED);
    json_t *jd = json_object_get(o, "jitter");
    if (rc == 0 && json_is_string(jd))
        cl->jitter = strcmp(json_string_value(jd), "uniform") == 0 ? JITTER_UNIFORM
                                                                   : JITTER_HALFNORMAL;
    if (rc == 0 && json_is_string(bc)) {
        const char *s = json_string_value(bc);
        cl->bcast = strcmp(s, "linear") == 0 ? BCAST_LINEAR
                    : strcmp(s, "binomial") == 0 ? BCAST_BINOMIAL : BCAST_AUTO;
    }
    for (size_t i = 0; rc == 0 && i < (size_t)(n + 1) * (size_t)(n + 1); i++)
        if (!(cl->link[i].bw_Bps > 0) || cl->link[i].rtt_s < 0 || cl->link[i].jitter_s < 0)
            rc = util_err(err, errlen, "%s: links need bandwidth > 0, latency and jitter >= 0",
                          path);
    json_decref(o);
    if (rc < 0)
        cluster_free(cl);
    return rc;
}

static double on_device(const Cluster *cl, int rank, double bytes)
{
    const ClusterDevice *d = &cl->dev[rank];
    return bytes / d->speed_Bps + d->op_overhead_s;
}

double sim_cost_attn(const ModelConfig *c, const Cluster *cl, int rank, int n_q, int pos)
{
    /* The part's weights, and K and V of its KV group for positions 0..pos. */
    double bytes = (double)config_attn_unit_bytes(c, n_q) +
                   (double)config_kv_bytes(c, pos + 1);
    return on_device(cl, rank, bytes);
}

double sim_cost_proj(const ModelConfig *c, const Cluster *cl, int rank)
{
    return on_device(cl, rank, (double)config_proj_bytes(c));
}

double sim_cost_ffn(const ModelConfig *c, const Cluster *cl, int rank)
{
    return on_device(cl, rank, (double)config_ffn_bytes(c, c->ffn_dim));
}

/* The final norm's weights (GPT-2: and its bias), as the head step counts them (steps.c). */
static double final_norm_bytes(const ModelConfig *c)
{
    return (c->arch == ARCH_GPT2 ? 2.0 : 1.0) * (double)c->dim * sizeof(float);
}

double sim_cost_controller(const ModelConfig *c, const Cluster *cl, int embed)
{
    /* Embedding: one row.  Head: final norm and the LM head over the vocabulary.  Both in
     * their stored types, as the token's embed and head steps (steps.h). */
    double bytes = embed ? (double)quant_row_bytes((QType)c->wtype[WKIND_EMBED], c->dim)
                         : (double)config_head_rows_bytes(c, c->vocab_size) +
                               final_norm_bytes(c);
    return on_device(cl, 0, bytes);
}

double sim_cost_head_rows(const ModelConfig *c, const Cluster *cl, int rank, int rows)
{
    return on_device(cl, rank, (double)config_head_rows_bytes(c, rows) + final_norm_bytes(c));
}

double sim_cost_msg(const Cluster *cl, int a, int b, double bytes)
{
    if (a == b)
        return 0;
    const NetLink *lk = cluster_link(cl, a, b);
    return net_latency_s(lk) + bytes / lk->bw_Bps;
}

/* Every engine message starts with the wire header (include/proto/wire.h, MPI-free). */
double sim_msg_bytes(const ModelConfig *c)
{
    return (double)sizeof(WireHdr) + (double)c->dim * sizeof(float);
}

int sim_model_preset(ModelConfig *c, const char *name, int layers, char *err, size_t errlen)
{
    if (config_preset(name, c) == 0) { /* the shapes of headsplit-convert --synthetic */
        if (layers > 0)
            c->n_layers = layers;
        return config_validate(c, err, errlen);
    }
    return util_err(err, errlen, "--shape: unknown model '%s' (tinyllama-1.1b, gpt2-small, "
                    "stories260k, llama2-7b, llama2-13b, llama3-8b)", name);
}

int sim_model_read(ModelConfig *c, const char *path, char *err, size_t errlen)
{
    h5io_quiet();
    hid_t f = h5io_open_read(path, err, errlen);
    if (f < 0)
        return -1;
    int rc = config_read(c, f, path, err, errlen);
    H5Fclose(f);
    return rc;
}
