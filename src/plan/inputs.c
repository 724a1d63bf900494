/* inputs.c: the planner's view of a measured cluster.  Every rank derives it from the same
 * gathered measurements, so every rank builds the same plan. */
#include "inputs.h"

#include "netmodel.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void inputs_init(ClusterInputs *ci, int n)
{
    memset(ci, 0, sizeof *ci);
    cluster_init(&ci->cluster, n);
    ci->rtt_ms = xcalloc((size_t)n * (size_t)n, sizeof(double));
    ci->rtt_p95_ms = xcalloc((size_t)n * (size_t)n, sizeof(double));
    ci->assume_rtt_ms = -1;
}

void inputs_free(ClusterInputs *ci)
{
    if (!ci)
        return;
    cluster_free(&ci->cluster);
    free(ci->rtt_ms);
    free(ci->rtt_p95_ms);
    cluster_free(&ci->planner);
    memset(ci, 0, sizeof *ci);
}

/* The controller's work per token in ms at its speed: the final norm and the LM head's rows
 * in their stored type (the head step of steps.h). */
static double controller_ms(const ModelConfig *c, double speed_Bps)
{
    double bytes = (double)config_head_rows_bytes(c, c->vocab_size) +
                   (c->arch == ARCH_GPT2 ? 2.0 : 1.0) * (double)c->dim * sizeof(float);
    return speed_Bps > 0 ? bytes / speed_Bps * 1e3 : 0;
}

/* An RTT whose half reads back as lat_ms exactly (net_latency_s x 1e3), so that the
 * planner's latencies are the stabilised ones to the bit (and its costs the same). */
static double rtt_s_of(double lat_ms)
{
    double rtt = 2 * (lat_ms * 1e-3);
    for (int i = 0; i < 8 && 0.5 * rtt * 1e3 != lat_ms; i++)
        rtt = nextafter(rtt, 0.5 * rtt * 1e3 < lat_ms ? INFINITY : 0);
    return 0.5 * rtt * 1e3 == lat_ms ? rtt : 2 * (lat_ms * 1e-3);
}

/* The unit of the relative speeds rel[n]: ref, or the nearest value to it for which every
 * speed rel x unit reads back as rel (divided by the unit, the fastest worker's speed), so
 * that the planner's relative speeds are the stabilised ones to the bit. */
static double exact_unit(double ref, const double *rel, int n)
{
    double lo = ref, hi = ref;
    for (int i = 0; i < 256 && ref > 0; i++) {
        for (int side = 0; side < 2; side++) {
            double u = side ? hi : lo;
            int ok = 1;
            for (int r = 0; r < n && ok; r++)
                ok = rel[r] * u / u == rel[r];
            if (ok)
                return u;
        }
        lo = nextafter(lo, 0);
        hi = nextafter(hi, INFINITY);
    }
    return ref;
}

/* The planner's cluster from the derived speeds rel[n-1] (units of ref), latencies lat_ms
 * [n*n] and bandwidth bw_Bps. */
static void planner_cluster(ClusterInputs *ci, const double *rel, const double *lat_ms,
                            double bw_Bps)
{
    const double unit = exact_unit(ci->ref_Bps, rel, ci->cluster.n - 1);
    const int n = ci->cluster.n;
    Cluster *out = &ci->planner;
    cluster_free(out);
    cluster_init(out, n);
    const ClusterDevice *cd = ci->cluster.dev;
    out->dev[0] = (ClusterDevice){.name = "controller",
                                  .speed_Bps = cd[0].speed_Bps > 0 ? cd[0].speed_Bps : 20e9,
                                  .load_Bps = cd[0].load_Bps > 0 ? cd[0].load_Bps : 1e9};
    for (int r = 1; r < n; r++) {
        ClusterDevice *d = &out->dev[r];
        snprintf(d->name, sizeof d->name, "%s", cd[r].name[0] ? cd[r].name : "worker");
        d->speed_Bps = rel[r - 1] * unit;
        d->op_overhead_s = cd[r].op_overhead_s;
        d->mem_budget = cd[r].mem_budget;
        d->load_Bps = cd[r].load_Bps > 0 ? cd[r].load_Bps : 1e9;
    }
    /* every link on link 0 -> 1's medium, as the emulation sees it */
    const NetLink *l01 = n > 1 ? &ci->cluster.link[1] : NULL;
    const int shared = l01 && l01->medium == MEDIUM_SHARED;
    for (int i = 0; i < n * n; i++)
        out->link[i] = (NetLink){.rtt_s = rtt_s_of(lat_ms[i]), .jitter_s = 0, .bw_Bps = bw_Bps,
                                 .medium = shared ? MEDIUM_SHARED : MEDIUM_SWITCHED,
                                 .relay_ap = shared ? l01->relay_ap : 0,
                                 .frame_s = shared ? l01->frame_s : 0};
    out->jitter = JITTER_HALFNORMAL;
    snprintf(out->links_name, sizeof out->links_name, "measured");
}

void inputs_derive(ClusterInputs *ci, const ModelConfig *c, const size_t *file_mem,
                   const double *file_speed)
{
    const int n = ci->cluster.n;
    ClusterDevice *dev = ci->cluster.dev;
    /* Relative to the fastest probed worker (before the devices file, whose speeds are
     * fractions of that one). */
    double ref = 0;
    for (int r = 1; r < n; r++)
        ref = dev[r].speed_Bps > ref ? dev[r].speed_Bps : ref;
    const double fastest = ref;
    for (int r = 1; r < n; r++) {
        if (file_mem && file_mem[r])
            dev[r].mem_budget = file_mem[r];
        if (file_speed && file_speed[r] > 0)
            dev[r].speed_Bps = file_speed[r] * fastest;
    }
    double *rel = xcalloc(n > 1 ? (size_t)n - 1 : 1, sizeof(double));
    double *stab = xcalloc(n > 1 ? (size_t)n - 1 : 1, sizeof(double));
    for (int r = 1; r < n; r++)
        rel[r - 1] = ref > 0 ? dev[r].speed_Bps / ref : 1.0;
    cluster_stabilise_speeds(rel, n - 1);
    int identical = 1;
    for (int r = 1; r < n; r++)
        identical &= rel[r - 1] == 1.0;
    if (identical && n > 1) { /* boards alike: they run at their median speed */
        for (int r = 1; r < n; r++)
            stab[r - 1] = dev[r].speed_Bps;
        ref = util_median(stab, (size_t)n - 1);
    }
    free(stab);
    ci->ref_Bps = ref;
    /* Expected latencies: RTT/2 (the deadlines' margin is not for predictions); their spread
     * from the samples' p95 - median. */
    const size_t nn = (size_t)n * (size_t)n;
    double *lat = xcalloc(nn, sizeof(double));
    for (size_t i = 0; i < nn; i++)
        lat[i] = ci->assume_rtt_ms < 0 ? 0.5 * ci->rtt_ms[i]
                 : i / (size_t)n == i % (size_t)n ? 0 : 0.5 * ci->assume_rtt_ms;
    cluster_stabilise_latencies(lat, n);
    ci->lat_sd_ms = ci->assume_rtt_ms < 0
                        ? cluster_latency_sd_ms(ci->rtt_ms, ci->rtt_p95_ms, lat, n)
                        : 0;
    planner_cluster(ci, rel, lat, n > 1 ? ci->cluster.link[1].bw_Bps : 0);
    free(rel);
    free(lat);
    ci->controller_ms = controller_ms(c, dev[0].speed_Bps);
}

void inputs_fill_request(const ClusterInputs *ci, PlanRequest *req)
{
    req->n_workers = ci->cluster.n - 1;
    req->cluster = &ci->planner;
    req->ref_Bps = ci->ref_Bps;
    req->lat_sd_ms = ci->lat_sd_ms;
    req->fixed_ms = ci->controller_ms;
}

void plan_cluster_copy(Cluster *out, const Cluster *in, double budget_frac)
{
    cluster_init(out, in->n);
    memcpy(out->dev, in->dev, (size_t)in->n * sizeof(ClusterDevice));
    for (int r = 1; r < in->n; r++)
        out->dev[r].mem_budget = (size_t)((double)in->dev[r].mem_budget * budget_frac);
    if (in->link)
        memcpy(out->link, in->link, (size_t)in->n * (size_t)in->n * sizeof(NetLink));
    else {
        free(out->link);
        out->link = NULL;
    }
    out->jitter = in->jitter;
    out->bcast = in->bcast;
    memcpy(out->links_name, in->links_name, sizeof out->links_name);
}

void inputs_solver_cluster(Cluster *out, const ClusterInputs *ci, double budget_frac)
{
    plan_cluster_copy(out, &ci->planner, budget_frac);
    /* bytes/s: the relative speeds times ref_Bps, one-way latencies from the planner's ms */
    double unit = 0;
    for (int r = 1; r < out->n; r++)
        unit = out->dev[r].speed_Bps > unit ? out->dev[r].speed_Bps : unit;
    for (int r = 1; r < out->n && unit > 0; r++)
        out->dev[r].speed_Bps = out->dev[r].speed_Bps / unit * ci->ref_Bps;
    for (int i = 0; i < out->n * out->n; i++) {
        NetLink *l = &out->link[i];
        l->rtt_s = 2 * (net_latency_s(l) * 1e3 * 1e-3);
        if (l->bw_Bps <= 0)
            l->bw_Bps = 1e12;
    }
}

int plan_build_cluster(Plan *plan, const ModelConfig *c, const PlanRequest *req,
                       const Cluster *cl, double budget_frac, int links, char *err,
                       size_t errlen)
{
    Cluster view;
    plan_cluster_copy(&view, cl, budget_frac);
    if (!links) {
        free(view.link);
        view.link = NULL;
    }
    PlanRequest r = *req;
    r.n_workers = cl->n - 1;
    r.cluster = &view;
    int rc = plan_build(plan, c, &r, err, errlen);
    cluster_free(&view);
    return rc;
}
