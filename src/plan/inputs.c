/* inputs.c: the planner's view of a measured cluster.  Every rank derives it from the same
 * gathered measurements, so every rank builds the same plan. */
#include "inputs.h"

#include "netmodel.h"
#include "util.h"

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
    free(ci->devices);
    free(ci->lat_ms);
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
    free(ci->devices);
    ci->devices = xcalloc(n > 1 ? (size_t)n - 1 : 1, sizeof(Device));
    double *rel = xcalloc(n > 1 ? (size_t)n - 1 : 1, sizeof(double));
    for (int r = 1; r < n; r++)
        rel[r - 1] = ref > 0 ? dev[r].speed_Bps / ref : 1.0;
    cluster_stabilise_speeds(rel, n - 1);
    int identical = 1;
    for (int r = 1; r < n; r++) {
        ci->devices[r - 1] = (Device){dev[r].mem_budget, rel[r - 1]};
        identical &= rel[r - 1] == 1.0;
    }
    if (identical && n > 1) { /* boards alike: they run at their median speed */
        for (int r = 1; r < n; r++)
            rel[r - 1] = dev[r].speed_Bps;
        ref = util_median(rel, (size_t)n - 1);
    }
    free(rel);
    ci->ref_Bps = ref;
    /* Expected latencies: RTT/2 (the deadlines' margin is not for predictions); their spread
     * from the samples' p95 - median. */
    const size_t nn = (size_t)n * (size_t)n;
    free(ci->lat_ms);
    ci->lat_ms = xcalloc(nn, sizeof(double));
    for (size_t i = 0; i < nn; i++)
        ci->lat_ms[i] = ci->assume_rtt_ms < 0 ? 0.5 * ci->rtt_ms[i]
                        : i / (size_t)n == i % (size_t)n ? 0 : 0.5 * ci->assume_rtt_ms;
    cluster_stabilise_latencies(ci->lat_ms, n);
    ci->lat_sd_ms = ci->assume_rtt_ms < 0
                        ? cluster_latency_sd_ms(ci->rtt_ms, ci->rtt_p95_ms, ci->lat_ms, n)
                        : 0;
    ci->bw_Bps = n > 1 ? ci->cluster.link[1].bw_Bps : 0;
    ci->controller_ms = controller_ms(c, dev[0].speed_Bps);
}

void inputs_fill_request(const ClusterInputs *ci, PlanRequest *req)
{
    req->n_workers = ci->cluster.n - 1;
    req->devices = ci->devices;
    req->lat_ms = ci->lat_ms;
    req->bw_Bps = ci->bw_Bps;
    if (ci->cluster.n > 1) { /* the medium, as the emulation sees it (link 0 -> 1) */
        req->medium = ci->cluster.link[1].medium;
        req->relay_ap = ci->cluster.link[1].relay_ap;
        req->frame_s = ci->cluster.link[1].frame_s;
    }
    req->ref_Bps = ci->ref_Bps;
    req->lat_sd_ms = ci->lat_sd_ms;
    req->fixed_ms = ci->controller_ms;
}

void inputs_planner_cluster(Cluster *out, const ClusterInputs *ci, double budget_frac)
{
    const int n = ci->cluster.n;
    cluster_init(out, n);
    const ClusterDevice *cd = ci->cluster.dev;
    out->dev[0] = (ClusterDevice){.name = "controller",
                                  .speed_Bps = cd[0].speed_Bps > 0 ? cd[0].speed_Bps : 20e9,
                                  .load_Bps = cd[0].load_Bps > 0 ? cd[0].load_Bps : 1e9};
    for (int r = 1; r < n; r++) {
        ClusterDevice *d = &out->dev[r];
        snprintf(d->name, sizeof d->name, "%s", cd[r].name[0] ? cd[r].name : "worker");
        d->speed_Bps = ci->devices[r - 1].speed * ci->ref_Bps;
        d->op_overhead_s = cd[r].op_overhead_s;
        d->mem_budget = (size_t)((double)ci->devices[r - 1].mem_budget * budget_frac);
        d->load_Bps = cd[r].load_Bps > 0 ? cd[r].load_Bps : 1e9;
    }
    const NetLink *l01 = n > 1 ? &ci->cluster.link[1] : NULL;
    const int shared = l01 && l01->medium == MEDIUM_SHARED;
    for (int i = 0; i < n * n; i++)
        out->link[i] = (NetLink){.rtt_s = 2 * (ci->lat_ms[i] * 1e-3), .jitter_s = 0,
                                 .bw_Bps = ci->bw_Bps > 0 ? ci->bw_Bps : 1e12,
                                 .medium = shared ? MEDIUM_SHARED : MEDIUM_SWITCHED,
                                 .relay_ap = shared ? l01->relay_ap : 0,
                                 .frame_s = shared ? l01->frame_s : 0};
    out->jitter = JITTER_HALFNORMAL;
    snprintf(out->links_name, sizeof out->links_name, "measured");
}

/* The unit of the planner's relative speeds: the fastest worker's speed, as the engine's
 * start-up normalises (inputs_derive).  Costs are speed x unit, so the unit cancels. */
static double fastest_worker(const Cluster *cl)
{
    double ref = 0;
    for (int r = 1; r < cl->n; r++)
        ref = cl->dev[r].speed_Bps > ref ? cl->dev[r].speed_Bps : ref;
    return ref > 0 ? ref : 1;
}

Device *cluster_plan_devices(const Cluster *cl, double budget_frac)
{
    const double ref = fastest_worker(cl);
    Device *d = xcalloc(cl->n > 1 ? (size_t)cl->n - 1 : 1, sizeof(Device));
    for (int r = 1; r < cl->n; r++)
        d[r - 1] = (Device){(size_t)((double)cl->dev[r].mem_budget * budget_frac),
                            cl->dev[r].speed_Bps / ref};
    return d;
}

double *cluster_plan_links(const Cluster *cl, PlanRequest *req)
{
    const int n = cl->n;
    double *lat = xcalloc((size_t)n * (size_t)n, sizeof(double));
    double bw = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            const NetLink *lk = cluster_link(cl, a, b);
            if (a == b)
                continue;
            lat[(size_t)a * (size_t)n + (size_t)b] = net_latency_s(lk) * 1e3;
            if (lk->bw_Bps > 0 && (bw == 0 || lk->bw_Bps < bw))
                bw = lk->bw_Bps;
        }
    req->lat_ms = lat;
    req->bw_Bps = bw;
    /* the medium, so that the planner charges the airtime the event core does */
    const NetLink *l01 = n > 1 ? cluster_link(cl, 0, 1) : NULL;
    const int shared = l01 && l01->medium == MEDIUM_SHARED;
    req->medium = shared ? MEDIUM_SHARED : MEDIUM_SWITCHED;
    req->relay_ap = shared && l01->relay_ap;
    req->frame_s = shared ? l01->frame_s : 0;
    req->ref_Bps = fastest_worker(cl);
    return lat;
}
