/* galaxy.c: the Galaxy-style hybrid as a plan variant of the simulator.  Every layer is split
 * over all devices: each device holds a contiguous range of query heads (with the K/V weights
 * and cache of the KV groups they touch, and the matching rows of the output projection) and
 * a range of FFN columns, sized in proportion to its speed within its memory budget.  Per
 * layer: attention on every device, an all-reduce, the FFN on every device, an all-reduce
 * (recursive doubling; devices past the largest power of two fold in first and get the result
 * back last).  The controller broadcasts the embedding to all devices and device 1 returns the
 * output.  Speculation does not apply: every device takes part in both blocks. */
#include "sim_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

void galaxy_free(GalaxySplit *g)
{
    if (!g)
        return;
    free(g->head0);
    free(g->heads);
    free(g->cols);
    memset(g, 0, sizeof *g);
}

/* Integer shares of total proportional to share[1..n] (largest remainder). */
static void apportion(int *out, const double *share, int n, int total)
{
    int given = 0;
    for (int d = 1; d <= n; d++) {
        out[d] = (int)(share[d] * total);
        given += out[d];
    }
    while (given < total) {
        int best = 1;
        double bestrem = -1;
        for (int d = 1; d <= n; d++) {
            double rem = share[d] * total - out[d];
            if (rem > bestrem) {
                bestrem = rem;
                best = d;
            }
        }
        out[best]++;
        given++;
    }
}

/* Query heads of device d in KV group grp. */
static int heads_in_group(const GalaxySplit *g, int d, int grp, int Q)
{
    int lo = g->head0[d], hi = g->head0[d] + g->heads[d];
    int glo = grp * Q, ghi = glo + Q;
    int a = lo > glo ? lo : glo, b = hi < ghi ? hi : ghi;
    return b > a ? b - a : 0;
}

/* Bytes of one layer's attention weights on device d (plus KV of kv_positions per group). */
static double attn_bytes(const GalaxySplit *g, const ModelConfig *c, int d, int kv_positions)
{
    const int Q = config_q_per_kv(c);
    double b = (double)g->heads[d] * c->head_dim * c->dim * sizeof(float); /* wo rows */
    for (int grp = 0; grp < c->n_kv_heads; grp++) {
        int nq = heads_in_group(g, d, grp, Q);
        if (nq)
            b += (double)config_attn_unit_floats(c, nq) * sizeof(float) +
                 (double)config_kv_bytes(c, kv_positions);
    }
    return b;
}

size_t galaxy_rank_bytes(const GalaxySplit *g, const ModelConfig *c, int rank, int kv_positions)
{
    double ffn = g->cols[rank] ? (double)config_ffn_floats(c, g->cols[rank]) * sizeof(float) : 0;
    return (size_t)((attn_bytes(g, c, rank, kv_positions) + ffn) * c->n_layers);
}

int galaxy_split(GalaxySplit *g, const ModelConfig *c, const SimCluster *cl, int kv_positions,
                 char *err, size_t errlen)
{
    const int n = cl->n_workers;
    memset(g, 0, sizeof *g);
    g->n = n;
    g->head0 = xcalloc((size_t)n + 1, sizeof(int));
    g->heads = xcalloc((size_t)n + 1, sizeof(int));
    g->cols = xcalloc((size_t)n + 1, sizeof(int));
    double *share = xcalloc((size_t)n + 1, sizeof(double)), *cap = xcalloc((size_t)n + 1,
                                                                           sizeof(double));
    double total = (double)c->n_layers *
                   ((double)config_layer_floats(c) * sizeof(float) +
                    (double)c->n_kv_heads * (double)config_kv_bytes(c, kv_positions));
    for (int d = 1; d <= n; d++)
        cap[d] = cl->dev[d].mem_budget ? (double)cl->dev[d].mem_budget / total : 1e30;
    int rc = -1;
    for (int attempt = 0; attempt < 40 && rc < 0; attempt++) {
        /* Water-filling: shares proportional to speed, capped by memory. */
        char *fixed = xcalloc((size_t)n + 1, 1);
        double left = 1.0;
        for (int it = 0; it <= n; it++) {
            double w = 0;
            for (int d = 1; d <= n; d++)
                if (!fixed[d])
                    w += cl->dev[d].speed;
            int changed = 0;
            for (int d = 1; d <= n; d++)
                if (!fixed[d]) {
                    share[d] = w > 0 ? left * cl->dev[d].speed / w : 0;
                    if (share[d] > cap[d]) {
                        share[d] = cap[d];
                        fixed[d] = 1;
                        left -= cap[d];
                        changed = 1;
                    }
                }
            if (!changed)
                break;
        }
        free(fixed);
        double sum = 0;
        for (int d = 1; d <= n; d++)
            sum += share[d];
        if (sum < 1 - 1e-9)
            break; /* the budgets together cannot hold the model */
        apportion(g->heads, share, n, c->n_heads);
        apportion(g->cols, share, n, c->ffn_dim);
        for (int d = 1, h = 0; d <= n; d++) {
            g->head0[d] = h;
            h += g->heads[d];
        }
        rc = 0;
        for (int d = 1; d <= n; d++) {
            size_t need = galaxy_rank_bytes(g, c, d, kv_positions);
            if (cl->dev[d].mem_budget && need > cl->dev[d].mem_budget) {
                cap[d] *= 0.97; /* rounding and KV replication overshot: shrink and retry */
                rc = -1;
            }
        }
    }
    free(share);
    free(cap);
    if (rc < 0) {
        galaxy_free(g);
        return util_err(err, errlen, "galaxy: the devices' memory budgets cannot hold the model "
                        "split in proportion to speed");
    }
    return 0;
}

/* Recursive-doubling all-reduce over ranks 1..n; st[d] is the op after which device d holds
 * its partial sum, and afterwards the op after which it holds the total. */
static void galaxy_allreduce(SimFlow *f, int l, int *st, int n, double bytes)
{
    SimDes *d = f->d;
    int p2 = 1;
    while (p2 * 2 <= n)
        p2 *= 2;
    for (int i = p2; i < n; i++) { /* fold in: rank i+1 -> rank i-p2+1 */
        int m = des_msg(d, SIM_TAG_ALLREDUCE, l, i + 1, i - p2 + 1, bytes);
        des_dep(d, st[i + 1], m);
        int j = des_join(d, l);
        des_dep(d, st[i - p2 + 1], j);
        des_dep(d, m, j);
        st[i - p2 + 1] = j;
    }
    int *msg = f->scratch;
    for (int mask = 1; mask < p2; mask <<= 1) {
        for (int i = 0; i < p2; i++) {
            msg[i] = des_msg(d, SIM_TAG_ALLREDUCE, l, i + 1, (i ^ mask) + 1, bytes);
            des_dep(d, st[i + 1], msg[i]);
        }
        for (int i = 0; i < p2; i++) {
            int j = des_join(d, l);
            des_dep(d, st[i + 1], j);
            des_dep(d, msg[i ^ mask], j);
            msg[p2 + i] = j;
        }
        for (int i = 0; i < p2; i++)
            st[i + 1] = msg[p2 + i];
    }
    for (int i = p2; i < n; i++) { /* send the total back */
        int m = des_msg(d, SIM_TAG_ALLREDUCE, l, i - p2 + 1, i + 1, bytes);
        des_dep(d, st[i - p2 + 1], m);
        st[i + 1] = m;
    }
}

int flow_galaxy_token(SimFlow *f, const GalaxySplit *g)
{
    SimDes *d = f->d;
    const ModelConfig *c = f->c;
    const int n = g->n;
    int *members = f->members, *st = f->ready;
    int embed = des_compute(d, SIM_TAG_EMBED, -1, 0, sim_cost_controller(c, f->cl, 1));
    for (int i = 0; i <= n; i++)
        members[i] = i;
    flow_bcast(f, SIM_TAG_BCAST, 0, members, n + 1, embed, sim_msg_bytes(c), f->recv);
    for (int r = 1; r <= n; r++)
        st[r] = f->recv[r];
    const double vec = (double)c->dim * sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        for (int r = 1; r <= n; r++)
            if (g->heads[r]) {
                const SimDevice *dv = &f->cl->dev[r];
                double t = attn_bytes(g, c, r, f->pos + 1) / dv->speed + dv->op_overhead;
                int a = des_compute(d, SIM_TAG_ATTN, l, r, t);
                des_dep(d, st[r], a);
                st[r] = a;
            }
        galaxy_allreduce(f, l, st, n, vec);
        for (int r = 1; r <= n; r++)
            if (g->cols[r]) {
                const SimDevice *dv = &f->cl->dev[r];
                double t = (double)config_ffn_floats(c, g->cols[r]) * sizeof(float) / dv->speed +
                           dv->op_overhead;
                int a = des_compute(d, SIM_TAG_FFN, l, r, t);
                des_dep(d, st[r], a);
                st[r] = a;
            }
        galaxy_allreduce(f, l, st, n, vec);
    }
    int out = des_msg(d, SIM_TAG_OUT, c->n_layers, 1, 0, sim_msg_bytes(c));
    des_dep(d, st[1], out);
    int head = des_compute(d, SIM_TAG_HEAD, c->n_layers, 0, sim_cost_controller(c, f->cl, 0));
    des_dep(d, out, head);
    return head;
}
