/* solver.c: exact head-level placement for a few devices by branch and bound.
 * With one token in flight every device is idle when a layer's input is ready, so the token
 * time is embed + sum of layer times + output + LM head, and a layer's time depends only on
 * its own roles and on its producer (the previous FFN rank).  Attention parts of one size are
 * interchangeable (the flow depends on how many each rank holds), so a layer configuration is
 * a canonical part->rank assignment (ranks non-decreasing within a size) plus the projection
 * and FFN ranks; each is timed once per producer by the cost model (cost_layer_s: the
 * simulator's event replay, or the analytic critical path).  The search picks
 * one configuration per layer under the memory budgets, pruned by
 *  - the incumbent (greedy's and layer-dp's plans to start with),
 *  - a Lagrangian lower bound: with multipliers lam[d] >= 0 pricing device memory (fitted by
 *    subgradient ascent at the root), V[r][p] = the cheapest r remaining layers from producer
 *    p at cost + lam.bytes, by DP without budgets; then V[R][p] - lam.(free bytes) bounds
 *    every completion that fits;
 *  - FFN capacity: the remaining layers' FFNs on the fastest devices with room for them;
 *  - a memo of states (layer, producer, roles held per device) reached before at no higher
 *    cost, which also removes the orderings of the same layers (they commute but for the
 *    producer).
 * Children are tried in order of their Lagrangian reduced cost, so the first dives are good
 * placements and the bound check can stop the loop. */
#include "solver.h"

#include "inputs.h"
#include "util.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MEMO_BITS_MAX 21

/* A search state: layer, producer and the roles each device holds, packed per device as
 * parts of size class 0 and 1, projections, FFNs (8 bits each). */
typedef struct {
    uint32_t cnt[6];
    uint8_t l, prev, used, pad;
    double g; /* cost so far */
} MemoEntry;

typedef struct {
    const ModelConfig *c;
    const Cluster *cl;
    const CostModel *m;
    int n, L, P, W;        /* workers, layers, parts per layer, W = P + 2 roles */
    Plan tmpl;
    int n_conf, cap_conf;
    int *rank;             /* [n_conf][W]: part ranks, then proj, ffn */
    size_t *mem;           /* [n_conf][n+1] */
    double *cost;          /* [n_conf][n+1] with producer p */
    double *ffn_t;         /* [n+1] FFN time on d */
    int *by_ffn;           /* [n] devices by FFN time */
    double rmin, tail_min, embed;
    double *lam;           /* [n+1] multipliers of the memory budgets (s per byte) */
    double *V;             /* [(L+1)][n+1] Lagrangian DP */
    int *arg;              /* [(L+1)][n+1] its choices */
    int *order;            /* [L][n+1][n_conf] children by reduced cost, r = 1..L */
    double *tail;          /* [n+1] output message + LM head after the last FFN on p */
    size_t ffn_bytes, *used, *budget;
    int *choice, *best_choice;
    double best;
    long nodes, max_nodes;
    double deadline;
    int aborted;
    uint32_t *cnt;         /* [n_conf][n+1] packed role counts */
    uint32_t ucnt[7];      /* roles held so far, packed */
    int size_class[64];    /* by query heads per part: 0 or 1 (-1: unseen) */
    int memo_ok;
    MemoEntry *memo;       /* [1<<memo_bits] */
    int memo_bits;
    long memo_n;
} Bnb;

static void add_conf(Bnb *b, const int *ranks, int kv)
{
    if (b->n_conf == b->cap_conf) {
        b->cap_conf = b->cap_conf ? 2 * b->cap_conf : 1024;
        b->rank = xrealloc(b->rank, (size_t)b->cap_conf * (size_t)b->W * sizeof(int));
        b->mem = xrealloc(b->mem, (size_t)b->cap_conf * (size_t)(b->n + 1) * sizeof(size_t));
        b->cost = xrealloc(b->cost, (size_t)b->cap_conf * (size_t)(b->n + 1) * sizeof(double));
        b->cnt = xrealloc(b->cnt, (size_t)b->cap_conf * (size_t)(b->n + 1) * sizeof(uint32_t));
    }
    const ModelConfig *c = b->c;
    int k = b->n_conf++;
    memcpy(b->rank + (size_t)k * (size_t)b->W, ranks, (size_t)b->W * sizeof(int));
    size_t *m = b->mem + (size_t)k * (size_t)(b->n + 1);
    memset(m, 0, (size_t)(b->n + 1) * sizeof(size_t));
    uint32_t *cn = b->cnt + (size_t)k * (size_t)(b->n + 1);
    memset(cn, 0, (size_t)(b->n + 1) * sizeof(uint32_t));
    LayerPlan *lp = &b->tmpl.layers[0];
    for (int j = 0; j < b->P; j++) {
        int nq = lp->parts[j].q1 - lp->parts[j].q0;
        lp->parts[j].rank = ranks[j];
        m[ranks[j]] += config_attn_unit_bytes(c, nq) + config_kv_bytes(c, kv);
        cn[ranks[j]] += b->size_class[nq] == 1 ? 1u << 8 : 1u;
    }
    lp->proj_rank = ranks[b->P];
    lp->ffn_rank = ranks[b->P + 1];
    m[lp->proj_rank] += config_proj_bytes(c);
    m[lp->ffn_rank] += b->ffn_bytes;
    cn[lp->proj_rank] += 1u << 16;
    cn[lp->ffn_rank] += 1u << 24;
    for (int p = 0; p <= b->n; p++)
        b->cost[(size_t)k * (size_t)(b->n + 1) + (size_t)p] = cost_layer_s(b->m, lp, p, c);
}

/* Canonical assignments: parts of one size get non-decreasing ranks. */
static void enum_confs(Bnb *b, int *ranks, int j, int *last_of_size, int kv)
{
    if (j == b->W) {
        add_conf(b, ranks, kv);
        return;
    }
    int lo = 1, sz = -1, saved = 0;
    if (j < b->P) {
        const AttnPart *pt = &b->tmpl.layers[0].parts[j];
        sz = pt->q1 - pt->q0;
        lo = last_of_size[sz] > 0 ? last_of_size[sz] : 1;
        saved = last_of_size[sz];
    }
    for (int r = lo; r <= b->n; r++) {
        ranks[j] = r;
        if (sz >= 0)
            last_of_size[sz] = r;
        enum_confs(b, ranks, j + 1, last_of_size, kv);
    }
    if (sz >= 0)
        last_of_size[sz] = saved;
}

/* Lagrangian DP for multipliers b->lam: V[r][p], the cheapest r more layers from producer p
 * (then the output and LM head), every layer charged cost + lam.bytes. */
static void lagrange_dp(Bnb *b)
{
    const int n1 = b->n + 1;
    for (int p = 0; p < n1; p++)
        b->V[p] = b->tail[p];
    for (int r = 1; r <= b->L; r++)
        for (int p = 0; p < n1; p++) {
            double best = DBL_MAX;
            int arg = -1;
            for (int k = 0; k < b->n_conf; k++) {
                const size_t *m = b->mem + (size_t)k * (size_t)n1;
                double v = b->cost[(size_t)k * (size_t)n1 + (size_t)p] +
                           b->V[(size_t)(r - 1) * (size_t)n1 +
                                (size_t)b->rank[(size_t)k * (size_t)b->W + (size_t)b->P + 1]];
                for (int d = 1; d < n1; d++)
                    v += b->lam[d] * (double)m[d];
                if (v < best) {
                    best = v;
                    arg = k;
                }
            }
            b->V[(size_t)r * (size_t)n1 + (size_t)p] = best;
            b->arg[(size_t)r * (size_t)n1 + (size_t)p] = arg;
        }
}

static double lam_dot_free(const Bnb *b)
{
    double s = 0;
    for (int d = 1; d <= b->n; d++)
        if (b->budget[d])
            s += b->lam[d] * (double)(b->budget[d] - b->used[d]);
    return s;
}

/* Subgradient ascent on the Lagrangian dual at the root (upper estimate ub). */
static void lagrange_fit(Bnb *b, double ub)
{
    const int n1 = b->n + 1, L = b->L;
    double *best_lam = xcalloc((size_t)n1, sizeof(double)), *g = xcalloc((size_t)n1,
                                                                          sizeof(double));
    double best = -DBL_MAX, theta = 1.0;
    int stall = 0;
    for (int it = 0; it < 2000; it++) {
        lagrange_dp(b);
        double phi = b->V[(size_t)L * (size_t)n1] - lam_dot_free(b);
        if (phi > best + 1e-12) {
            best = phi;
            memcpy(best_lam, b->lam, (size_t)n1 * sizeof(double));
            stall = 0;
        } else if (++stall >= 20) {
            theta /= 2;
            stall = 0;
        }
        /* Subgradient: the relaxed path's bytes minus the budgets. */
        memset(g, 0, (size_t)n1 * sizeof(double));
        for (int r = L, p = 0; r >= 1; r--) {
            int k = b->arg[(size_t)r * (size_t)n1 + (size_t)p];
            for (int d = 1; d < n1; d++)
                g[d] += (double)b->mem[(size_t)k * (size_t)n1 + (size_t)d];
            p = b->rank[(size_t)k * (size_t)b->W + (size_t)b->P + 1];
        }
        double norm = 0;
        for (int d = 1; d < n1; d++) {
            g[d] = b->budget[d] ? g[d] - (double)b->budget[d] : 0;
            if (b->lam[d] <= 0 && g[d] < 0)
                g[d] = 0;
            norm += g[d] * g[d];
        }
        if (norm == 0 || theta < 1e-4 || !(ub < DBL_MAX))
            break; /* the relaxed path fits: the bound is tight, or nothing to aim at */
        double step = theta * (ub - phi) / norm;
        for (int d = 1; d < n1; d++) {
            b->lam[d] += step * g[d];
            if (b->lam[d] < 0)
                b->lam[d] = 0;
        }
    }
    memcpy(b->lam, best_lam, (size_t)n1 * sizeof(double));
    lagrange_dp(b);
    free(best_lam);
    free(g);
}

static double lower_bound(const Bnb *b, int l, int prev)
{
    int R = b->L - l;
    if (R == 0)
        return b->tail[prev];
    double a = b->V[(size_t)R * (size_t)(b->n + 1) + (size_t)prev] - lam_dot_free(b);
    /* The FFN of every remaining layer runs on some device with room for it. */
    double f = 0;
    int left = R;
    for (int i = 0; i < b->n && left > 0; i++) {
        int d = b->by_ffn[i];
        long cap = left;
        if (b->budget[d])
            cap = b->budget[d] > b->used[d]
                      ? (long)((b->budget[d] - b->used[d]) / b->ffn_bytes) : 0;
        if (cap > left)
            cap = left;
        f += (double)cap * b->ffn_t[d];
        left -= (int)cap;
    }
    if (left > 0)
        return DBL_MAX; /* the remaining FFNs cannot fit */
    double bb = f + R * b->rmin + b->tail_min;
    return a > bb ? a : bb;
}

static uint64_t memo_hash(const MemoEntry *e, int n)
{
    uint64_t h = (uint64_t)e->l * 0x9e3779b97f4a7c15ull ^ (uint64_t)e->prev * 0xc2b2ae3d27d4eb4full;
    for (int d = 0; d < n; d++) {
        h ^= e->cnt[d] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h ^ (h >> 31);
}

/* 1 if the state was reached before at cost <= g (prune); else records g. */
static int memo_seen(Bnb *b, int l, int prev, double g)
{
    if (!b->memo_ok)
        return 0;
    MemoEntry key;
    memset(&key, 0, sizeof key);
    memcpy(key.cnt, b->ucnt + 1, (size_t)b->n * sizeof(uint32_t));
    key.l = (uint8_t)l;
    key.prev = (uint8_t)prev;
    key.used = 1;
    const size_t mask = ((size_t)1 << b->memo_bits) - 1;
    for (size_t i = (size_t)memo_hash(&key, b->n) & mask;; i = (i + 1) & mask) {
        MemoEntry *e = &b->memo[i];
        if (!e->used) {
            if (b->memo_n > (long)(mask * 7 / 10))
                return 0; /* full: stop recording */
            key.g = g;
            *e = key;
            b->memo_n++;
            return 0;
        }
        if (e->l == key.l && e->prev == key.prev &&
            memcmp(e->cnt, key.cnt, sizeof key.cnt) == 0) {
            /* The same layers in another order sum to the same cost up to rounding. */
            if (e->g <= g * (1 + 1e-12))
                return 1;
            e->g = g;
            return 0;
        }
    }
}

/* cost + lam.bytes of configuration k after producer p, plus the best r-1 layers after it. */
static double reduced(const Bnb *b, int k, int p, int r)
{
    const int n1 = b->n + 1;
    double v = b->cost[(size_t)k * (size_t)n1 + (size_t)p] +
               b->V[(size_t)(r - 1) * (size_t)n1 +
                    (size_t)b->rank[(size_t)k * (size_t)b->W + (size_t)b->P + 1]];
    for (int d = 1; d < n1; d++)
        v += b->lam[d] * (double)b->mem[(size_t)k * (size_t)n1 + (size_t)d];
    return v;
}

static void dfs(Bnb *b, int l, int prev, double g)
{
    if (b->aborted)
        return;
    if (++b->nodes > b->max_nodes || (b->deadline > 0 && (b->nodes & 4095) == 0 &&
                                      time_now() > b->deadline)) {
        b->aborted = 1;
        return;
    }
    if (l == b->L) {
        double total = g + b->tail[prev];
        if (total < b->best) {
            b->best = total;
            memcpy(b->best_choice, b->choice, (size_t)b->L * sizeof(int));
        }
        return;
    }
    const int W = b->W, P = b->P;
    double lb = lower_bound(b, l, prev);
    if (lb == DBL_MAX || g + lb >= b->best || memo_seen(b, l, prev, g))
        return;
    const int n1 = b->n + 1, R = b->L - l;
    const int *ord = b->order + ((size_t)(R - 1) * (size_t)n1 + (size_t)prev) * (size_t)b->n_conf;
    const double free_price = lam_dot_free(b);
    for (int i = 0; i < b->n_conf && !b->aborted; i++) {
        int k = ord[i];
        double cc = b->cost[(size_t)k * (size_t)n1 + (size_t)prev];
        if (g + reduced(b, k, prev, R) - free_price >= b->best)
            break; /* sorted: every later configuration has a higher bound */
        const size_t *m = b->mem + (size_t)k * (size_t)n1;
        int ok = 1;
        for (int d = 1; d <= b->n && ok; d++)
            ok = !b->budget[d] || b->used[d] + m[d] <= b->budget[d];
        if (!ok)
            continue;
        const uint32_t *cn = b->cnt + (size_t)k * (size_t)n1;
        for (int d = 1; d <= b->n; d++) {
            b->used[d] += m[d];
            b->ucnt[d] += cn[d];
        }
        b->choice[l] = k;
        dfs(b, l + 1, b->rank[(size_t)k * (size_t)W + (size_t)P + 1], g + cc);
        for (int d = 1; d <= b->n; d++) {
            b->used[d] -= m[d];
            b->ucnt[d] -= cn[d];
        }
    }
}

/* Merge sort of indices by key (stable: ties keep enumeration order). */
static void sort_by_key(int *idx, int *tmp, const double *key, int lo, int hi)
{
    if (hi - lo < 2)
        return;
    int mid = (lo + hi) / 2;
    sort_by_key(idx, tmp, key, lo, mid);
    sort_by_key(idx, tmp, key, mid, hi);
    int i = lo, j = mid, k = lo;
    while (i < mid || j < hi) {
        if (j >= hi || (i < mid && key[idx[i]] <= key[idx[j]]))
            tmp[k++] = idx[i++];
        else
            tmp[k++] = idx[j++];
    }
    memcpy(idx + lo, tmp + lo, (size_t)(hi - lo) * sizeof(int));
}

/* Children orders by reduced cost for every (remaining layers, producer). */
static void bnb_order(Bnb *b)
{
    const int n1 = b->n + 1;
    b->order = xmalloc((size_t)b->L * (size_t)n1 * (size_t)b->n_conf * sizeof(int));
    int *tmp = xmalloc((size_t)b->n_conf * sizeof(int));
    double *key = xmalloc((size_t)b->n_conf * sizeof(double));
    for (int r = 1; r <= b->L; r++)
        for (int p = 0; p < n1; p++) {
            int *idx = b->order + ((size_t)(r - 1) * (size_t)n1 + (size_t)p) * (size_t)b->n_conf;
            for (int k = 0; k < b->n_conf; k++) {
                idx[k] = k;
                key[k] = reduced(b, k, p, r);
            }
            sort_by_key(idx, tmp, key, 0, b->n_conf);
        }
    free(tmp);
    free(key);
}

static void bnb_prepare(Bnb *b, const SolverRequest *req)
{
    const int n = b->n, n1 = n + 1;
    int *ranks = xcalloc((size_t)b->W, sizeof(int));
    int *last = xcalloc((size_t)config_q_per_kv(b->c) + 1, sizeof(int));
    enum_confs(b, ranks, 0, last, req->kv_positions);
    free(ranks);
    free(last);
    b->rmin = DBL_MAX;
    for (int p = 0; p <= n; p++) {
        for (int k = 0; k < b->n_conf; k++) {
            int f = b->rank[(size_t)k * (size_t)b->W + (size_t)b->P + 1];
            double r = b->cost[(size_t)k * (size_t)n1 + (size_t)p] - b->ffn_t[f];
            if (r < b->rmin)
                b->rmin = r;
        }
    }
    if (b->rmin < 0)
        b->rmin = 0;
    b->lam = xcalloc((size_t)n1, sizeof(double));
    b->V = xcalloc((size_t)(b->L + 1) * (size_t)n1, sizeof(double));
    b->arg = xcalloc((size_t)(b->L + 1) * (size_t)n1, sizeof(int));
}

static void bnb_free(Bnb *b)
{
    plan_free(&b->tmpl);
    free(b->rank);
    free(b->mem);
    free(b->cost);
    free(b->order);
    free(b->lam);
    free(b->V);
    free(b->arg);
    free(b->ffn_t);
    free(b->by_ffn);
    free(b->tail);
    free(b->used);
    free(b->budget);
    free(b->choice);
    free(b->best_choice);
    free(b->cnt);
    free(b->memo);
}

/* A head-level plan's structure (parts per layer): plan_build's, which splits KV groups when
 * there are more workers than groups (whole = 0), or one part per KV group (whole = 1). */
static int head_template(Plan *p, const ModelConfig *c, int n, int kv, int whole, char *err,
                         size_t errlen)
{
    PlanRequest req = {.partition = whole ? PARTITION_LAYER : PARTITION_HEAD,
                       .placement = whole ? PLACEMENT_LAYER : PLACEMENT_ROUNDROBIN,
                       .n_workers = n, .kv_positions = kv};
    int rc = plan_build(p, c, &req, err, errlen);
    if (rc == 0 && whole) {
        p->partition = PARTITION_HEAD;
        p->placement = PLACEMENT_ROUNDROBIN;
    }
    return rc;
}

/* 1 if a and b have the same parts in every layer. */
static int same_parts(const Plan *a, const Plan *b)
{
    for (int l = 0; l < a->n_layers; l++) {
        if (a->layers[l].n_parts != b->layers[l].n_parts || b->layers[l].mode != LAYER_PIPE)
            return 0;
        for (int k = 0; k < a->layers[l].n_parts; k++)
            if (a->layers[l].parts[k].unit != b->layers[l].parts[k].unit ||
                a->layers[l].parts[k].q0 != b->layers[l].parts[k].q0 ||
                a->layers[l].parts[k].q1 != b->layers[l].parts[k].q1)
                return 0;
    }
    return 1;
}

static void bnb_init(Bnb *b, const ModelConfig *c, const Cluster *cl, const CostModel *m)
{
    memset(b, 0, sizeof *b);
    b->c = c;
    b->cl = cl;
    b->m = m;
    b->n = cl->n - 1;
    b->L = c->n_layers;
    const int n1 = b->n + 1;
    b->ffn_bytes = config_ffn_bytes(c, c->ffn_dim);
    b->ffn_t = xcalloc((size_t)n1, sizeof(double));
    b->by_ffn = xcalloc((size_t)b->n, sizeof(int));
    b->tail = xcalloc((size_t)n1, sizeof(double));
    b->used = xcalloc((size_t)n1, sizeof(size_t));
    b->budget = xcalloc((size_t)n1, sizeof(size_t));
    b->choice = xcalloc((size_t)b->L, sizeof(int));
    b->best_choice = xcalloc((size_t)b->L, sizeof(int));
    double head = cost_controller_s(m, 0, c);
    b->tail_min = DBL_MAX;
    for (int d = 0; d <= b->n; d++) {
        b->tail[d] = cost_hop_s(m, d, 0, c) + head;
        if (d > 0) {
            b->ffn_t[d] = cost_ffn_s(m, d, c);
            b->budget[d] = cl->dev[d].mem_budget;
            b->by_ffn[d - 1] = d;
            if (b->tail[d] < b->tail_min)
                b->tail_min = b->tail[d];
        }
    }
    for (int i = 1; i < b->n; i++)
        for (int j = i; j > 0 && b->ffn_t[b->by_ffn[j]] < b->ffn_t[b->by_ffn[j - 1]]; j--) {
            int t = b->by_ffn[j];
            b->by_ffn[j] = b->by_ffn[j - 1];
            b->by_ffn[j - 1] = t;
        }
    b->embed = cost_controller_s(m, 1, c);
}

/* Cost of a known plan as an incumbent (DBL_MAX if it does not fit or fails). */
static double incumbent(const Plan *p, const ModelConfig *c, const Cluster *cl,
                        const CostModel *m, int kv)
{
    return solver_plan_fits(p, c, cl, kv) ? cost_token_s(m, p, c) : DBL_MAX;
}

/* Searches the placements with the parts of structure `whole` for a token time below *ub
 * (seconds); a better plan replaces *best and *ub.  inc (may be empty) is a plan of cost *ub
 * in this structure.  Adds its effort to st; *bound gets a lower bound of this structure's
 * optimum.  Returns 0, or -1 with err. */
static int exact_search(int whole, double *ub, Plan *best, const Plan *inc, SolverStats *st,
                        double *bound, const ModelConfig *c, const Cluster *cl,
                        const CostModel *m, const SolverRequest *req, double deadline,
                        char *err, size_t errlen)
{
    Bnb b;
    bnb_init(&b, c, cl, m);
    if (head_template(&b.tmpl, c, b.n, req->kv_positions, whole, err, errlen) < 0) {
        bnb_free(&b);
        return -1;
    }
    b.P = b.tmpl.layers[0].n_parts;
    b.W = b.P + 2;
    /* Packed role counts need at most two part sizes and counts below 256. */
    int n_classes = 0;
    for (int q = 0; q < 64; q++)
        b.size_class[q] = -1;
    for (int j = 0; j < b.P; j++) {
        int nq = b.tmpl.layers[0].parts[j].q1 - b.tmpl.layers[0].parts[j].q0;
        if (nq < 64 && b.size_class[nq] < 0)
            b.size_class[nq] = n_classes++;
    }
    b.memo_ok = n_classes <= 2 && b.P * b.L < 256 && b.L < 256 && b.n <= 6 &&
                config_q_per_kv(c) < 64;
    bnb_prepare(&b, req);
    b.max_nodes = req->max_nodes > 0 ? req->max_nodes : deadline > 0 ? LONG_MAX : 200000000L;
    b.deadline = deadline;
    /* The table grows with the problem (a few entries per configuration and layer). */
    for (b.memo_bits = 12; b.memo_bits < MEMO_BITS_MAX &&
                           ((size_t)1 << b.memo_bits) < (size_t)b.n_conf * (size_t)b.L * 64;
         b.memo_bits++)
        ;
    b.memo = b.memo_ok ? xcalloc((size_t)1 << b.memo_bits, sizeof(MemoEntry)) : NULL;
    /* Slightly above the incumbent, so that the search itself finds one at least as good
     * when the incumbent is in this structure. */
    const int have_inc = inc && inc->layers && same_parts(&b.tmpl, inc);
    b.best = *ub == DBL_MAX ? DBL_MAX : *ub * (have_inc ? 1 + 1e-9 : 1) - b.embed;
    const double best0 = b.best;
    lagrange_fit(&b, b.best);
    bnb_order(&b);
    const double root = lower_bound(&b, 0, 0) + b.embed;
    dfs(&b, 0, 0, 0);
    int rc = 0;
    if (b.best < best0 && b.best + b.embed < *ub * (1 + 1e-9)) {
        Plan p = b.tmpl;
        memset(&b.tmpl, 0, sizeof b.tmpl);
        for (int l = 0; l < b.L; l++) {
            const int *r = b.rank + (size_t)b.best_choice[l] * (size_t)b.W;
            for (int j = 0; j < b.P; j++)
                p.layers[l].parts[j].rank = r[j];
            p.layers[l].proj_rank = r[b.P];
            p.layers[l].ffn_rank = r[b.P + 1];
        }
        rc = plan_validate(&p, c, err, errlen);
        if (rc == 0) {
            plan_free(best);
            *best = p;
            *ub = b.best + b.embed;
        } else {
            plan_free(&p);
        }
    }
    *bound = b.aborted ? root : *ub;
    st->nodes += b.nodes;
    st->configs += b.n_conf;
    st->optimal &= !b.aborted;
    bnb_free(&b);
    return rc;
}

int solver_exact(Plan *plan, SolverStats *st, const ModelConfig *c, const Cluster *cl,
                 const CostModel *m, const SolverRequest *req, char *err, size_t errlen)
{
    double t0 = time_now();
    memset(plan, 0, sizeof *plan);
    if (cl->n - 1 < 1 || cl->n - 1 > 6)
        return util_err(err, errlen, "the exact solver takes 1 to 6 devices, not %d",
                        cl->n - 1);
    /* Incumbents: greedy and layer-dp, whichever is cheaper and fits. */
    Plan known;
    char kerr[256];
    double ub = DBL_MAX;
    PlanRequest greq = {.partition = PARTITION_HEAD, .placement = PLACEMENT_GREEDY,
                        .n_workers = cl->n - 1, .cluster = cl,
                        .kv_positions = req->kv_positions};
    for (int k = 0; k < 2; k++) {
        int ok = k == 0 ? plan_build(&known, c, &greq, kerr, sizeof kerr) == 0
                        : solver_layer_dp(&known, NULL, c, cl, m, req, kerr, sizeof kerr) == 0;
        if (!ok)
            continue;
        double v = incumbent(&known, c, cl, m, req->kv_positions);
        if (v < ub) {
            ub = v;
            plan_free(plan);
            *plan = known;
        } else {
            plan_free(&known);
        }
    }
    /* Both part structures: plan_build's (groups split when workers outnumber them), then
     * whole groups (fewer, larger parts: no K/V weights duplicated), if different. */
    SolverStats s = {0, 0, 1, 0, 0, 0};
    double deadline = req->max_s > 0 ? t0 + req->max_s : 0, bound = DBL_MAX, bd = DBL_MAX;
    Plan inc = *plan;
    int split = (cl->n - 1 + c->n_kv_heads - 1) / c->n_kv_heads > 1 &&
                config_q_per_kv(c) > 1;
    int rc = 0;
    for (int whole = 0; whole <= split && rc == 0; whole++) {
        rc = exact_search(whole, &ub, plan, &inc, &s, &bd, c, cl, m, req, deadline, err,
                          errlen);
        inc = *plan;
        bound = bd < bound ? bd : bound;
    }
    if (rc == 0 && !plan->layers)
        rc = util_err(err, errlen, s.optimal ? "exact solver: no head-level placement fits the "
                      "budgets" : "exact solver: no placement found within the limits");
    if (st) {
        s.cost_s = rc == 0 ? ub : DBL_MAX;
        s.bound_s = s.optimal ? s.cost_s : (bound < s.cost_s ? bound : s.cost_s);
        s.elapsed_s = time_now() - t0;
        *st = s;
    }
    if (rc < 0)
        plan_free(plan);
    return rc;
}

/* Brute force over every assignment of every role of every layer. */
static void brute_rec(Plan *p, int v, int nv, int W, int n, const ModelConfig *c,
                      const Cluster *cl, const CostModel *m, const SolverRequest *req,
                      double *best)
{
    if (v == nv) {
        if (solver_plan_fits(p, c, cl, req->kv_positions)) {
            double t = cost_token_s(m, p, c);
            if (t < *best)
                *best = t;
        }
        return;
    }
    LayerPlan *lp = &p->layers[v / W];
    int j = v % W;
    for (int r = 1; r <= n; r++) {
        if (j < lp->n_parts)
            lp->parts[j].rank = r;
        else if (j == lp->n_parts)
            lp->proj_rank = r;
        else
            lp->ffn_rank = r;
        brute_rec(p, v + 1, nv, W, n, c, cl, m, req, best);
    }
}

double solver_exact_brute(const ModelConfig *c, const Cluster *cl, const CostModel *m,
                          const SolverRequest *req)
{
    Plan p;
    char err[256];
    if (head_template(&p, c, cl->n - 1, req->kv_positions, 0, err, sizeof err) < 0)
        return DBL_MAX;
    const int W = p.layers[0].n_parts + 2;
    double best = DBL_MAX;
    brute_rec(&p, 0, W * c->n_layers, W, cl->n - 1, c, cl, m, req, &best);
    plan_free(&p);
    return best;
}
