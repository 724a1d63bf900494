/* placement.c: pure functions that build a Plan: layer-wise (EdgeShard-style contiguous
 * blocks), round-robin, seeded random, and greedy (FFN and projection first, then heads,
 * balancing memory and compute per device). */
#include "plan.h"
#include "plan_internal.h"
#include "quant.h"
#include "solver.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

const char *plan_partition_name(Partition p)
{
    return p == PARTITION_LAYER ? "layer" : p == PARTITION_SLICE ? "slice" : "head";
}

const char *plan_placement_name(PlacementKind k)
{
    static const char *names[PLACEMENT_COUNT] = {"greedy", "roundrobin", "random", "layer",
                                                 "waterfill", "spread", "dp", "exact"};
    return (unsigned)k < PLACEMENT_COUNT ? names[k] : "?";
}

int plan_parse_partition(const char *s, Partition *out)
{
    if (strcmp(s, "layer") == 0)
        *out = PARTITION_LAYER;
    else if (strcmp(s, "head") == 0)
        *out = PARTITION_HEAD;
    else if (strcmp(s, "slice") == 0)
        *out = PARTITION_SLICE;
    else
        return -1;
    return 0;
}

int plan_parse_placement(const char *s, PlacementKind *out)
{
    for (int k = 0; k < PLACEMENT_COUNT; k++)
        if (strcmp(s, plan_placement_name((PlacementKind)k)) == 0) {
            *out = (PlacementKind)k;
            return 0;
        }
    return -1;
}

/* Splits every unit into s parts of query heads; ranks left at 0 (unassigned). */
static void make_parts(LayerPlan *lp, const ModelConfig *c, int split)
{
    const int Q = config_q_per_kv(c);
    lp->n_parts = c->n_kv_heads * split;
    lp->parts = xcalloc((size_t)lp->n_parts, sizeof(AttnPart));
    for (int g = 0, k = 0; g < c->n_kv_heads; g++)
        for (int j = 0; j < split; j++, k++)
            lp->parts[k] = (AttnPart){0, g, j * Q / split, (j + 1) * Q / split};
}

/* Places every role of layer l on one rank. */
static void whole_layer(LayerPlan *lp, int rank)
{
    for (int k = 0; k < lp->n_parts; k++)
        lp->parts[k].rank = rank;
    lp->proj_rank = rank;
    lp->ffn_rank = rank;
}

void plan_build_local(Plan *plan, const ModelConfig *c, int rank)
{
    memset(plan, 0, sizeof *plan);
    plan->n_layers = c->n_layers;
    plan->n_workers = 0;
    plan->partition = PARTITION_LAYER;
    plan->placement = PLACEMENT_LAYER;
    plan->layers = xcalloc((size_t)c->n_layers, sizeof(LayerPlan));
    for (int l = 0; l < c->n_layers; l++) {
        make_parts(&plan->layers[l], c, 1);
        whole_layer(&plan->layers[l], rank);
    }
}

void plan_free(Plan *plan)
{
    if (!plan || !plan->layers)
        return;
    for (int l = 0; l < plan->n_layers; l++) {
        free(plan->layers[l].parts);
        free(plan->layers[l].slices);
    }
    free(plan->layers);
    plan->layers = NULL;
}

/* Bookkeeping of what each device holds while a placement is built. */
typedef struct {
    const ModelConfig *c;
    const PlanRequest *req;
    size_t *bytes;  /* [n_workers+1] weights + KV per rank */
    double *load;   /* [n_workers+1] bytes / speed: the compute-time proxy */
} Tally;

static double speed_of(const PlanRequest *r, int rank) { return plan_req_speed(r, rank); }

static size_t budget_of(const PlanRequest *r, int rank) { return plan_req_budget(r, rank); }

static size_t part_bytes(const ModelConfig *c, const AttnPart *p, int kv_positions)
{
    return config_attn_unit_bytes(c, p->q1 - p->q0) +
           config_kv_bytes(c, kv_positions);
}

static size_t projffn_bytes(const ModelConfig *c)
{
    return config_proj_bytes(c) + config_ffn_bytes(c, c->ffn_dim);
}

static int fits(const Tally *t, int rank, size_t add)
{
    size_t b = budget_of(t->req, rank);
    return b == 0 || t->bytes[rank] + add <= b;
}

static void charge(Tally *t, int rank, size_t add)
{
    t->bytes[rank] += add;
    t->load[rank] += (double)add / speed_of(t->req, rank);
}

/* Least-loaded rank that fits add bytes; prefer ranks not in avoid[] (may be NULL). */
static int pick_least(const Tally *t, size_t add, const char *avoid)
{
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int r = 1; r <= t->req->n_workers; r++) {
            if (pass == 0 && avoid && avoid[r])
                continue;
            if (!fits(t, r, add))
                continue;
            if (best < 0 || t->load[r] < t->load[best])
                best = r;
        }
    return best;
}

/* Link-aware choice of a part's rank: the one whose result reaches the projection rank
 * soonest (input hop + its queued work + this part + hop to the projection); ties go to the
 * less loaded.  busy[] accumulates each rank's work in this layer. */
static int pick_soonest(const Tally *t, size_t add, int producer, int proj, double *busy)
{
    const double msg = 32.0 + 4.0 * t->c->dim;
    int best = -1;
    double best_v = 0;
    for (int r = 1; r <= t->req->n_workers; r++) {
        if (!fits(t, r, add))
            continue;
        double v = plan_cost_hop_ms(t->req, producer, r, msg) + busy[r] +
                   plan_cost_work_ms(t->req, r, (double)add) +
                   plan_cost_hop_ms(t->req, r, proj, msg);
        if (best < 0 || v < best_v - 1e-9 || (v <= best_v + 1e-9 && t->load[r] < t->load[best])) {
            best = r;
            best_v = v;
        }
    }
    if (best >= 0)
        busy[best] += plan_cost_work_ms(t->req, best, (double)add);
    return best;
}

static int build_layerwise(Plan *p, Tally *t, char *err, size_t errlen)
{
    /* EdgeShard-style: contiguous blocks, sized by device speed, then checked by memory. */
    const ModelConfig *c = t->c;
    const int n = t->req->n_workers, L = c->n_layers;
    double total_speed = 0;
    for (int r = 1; r <= n; r++)
        total_speed += speed_of(t->req, r);
    int l = 0;
    double acc = 0;
    for (int r = 1; r <= n; r++) {
        acc += speed_of(t->req, r);
        int end = r == n ? L : (int)(acc / total_speed * L + 0.5);
        if (end < l)
            end = l;
        for (; l < end; l++)
            whole_layer(&p->layers[l], r);
    }
    (void)err;
    (void)errlen;
    return 0;
}

/* Each device's fair share of the layers: contiguous-block sizes proportional to speed, as
 * the layer-wise placement cuts them (they sum to L). */
static void fair_shares(const PlanRequest *req, int L, int *share)
{
    const int n = req->n_workers;
    double total = 0, acc = 0;
    for (int r = 1; r <= n; r++)
        total += speed_of(req, r);
    int prev = 0;
    for (int r = 1; r <= n; r++) {
        acc += speed_of(req, r);
        int end = r == n ? L : (int)(acc / total * L + 0.5);
        end = end < prev ? prev : end;
        share[r] = end - prev;
        prev = end;
    }
}

/* Whether rank may take a layer of add more bytes: within its fair share of layers, as its
 * budget allows; beyond it only when every device has a budget (never the whole model by
 * default), and then only up to the share of its budget greedy may fill. */
static int may_take(const Tally *t, int rank, size_t add, int count, int share, int budgets)
{
    if (count < share)
        return fits(t, rank, add);
    if (!budgets)
        return 0;
    double f = t->req->fill > 0 && t->req->fill < 1 ? t->req->fill : 1.0;
    return (double)(t->bytes[rank] + add) <= f * (double)budget_of(t->req, rank);
}

/* The device for a layer's FFN and projection (ffn bytes; the whole layer is layer bytes):
 * among devices that may take the whole layer (else the FFN and projection alone), the one
 * where the layer's input (from `prev`) arrives and the FFN's work ends soonest.  Token time
 * is the sum of the layers' work, so the fastest devices fill first, and staying on the
 * previous layer's device costs no hop, so on a network layers form contiguous blocks.
 * Ties (a LAN of equal devices) go to a device within its fair share, then to the least
 * loaded.  When no device qualifies, any device that fits, least loaded first. */
static int pick_ffn(const Tally *t, size_t ffn, size_t layer, int prev, const int *count,
                    const int *share, int budgets)
{
    const double msg = 32.0 + 4.0 * t->c->dim;
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++) {
        double best_v = 0;
        int best_over = 0;
        for (int r = 1; r <= t->req->n_workers; r++) {
            if (!may_take(t, r, pass == 0 ? layer : ffn, count[r], share[r], budgets))
                continue;
            double v = plan_cost_hop_ms(t->req, prev, r, msg) +
                       plan_cost_work_ms(t->req, r, (double)ffn);
            int over = count[r] >= share[r];
            int tie = v <= best_v + 1e-9 && v >= best_v - 1e-9;
            if (best < 0 || v < best_v - 1e-9 || (tie && over < best_over) ||
                (tie && over == best_over && t->load[r] < t->load[best])) {
                best = r;
                best_v = v;
                best_over = over;
            }
        }
    }
    return best >= 0 ? best : pick_least(t, ffn, NULL);
}

static int build_greedy(Plan *p, Tally *t, char *err, size_t errlen)
{
    const ModelConfig *c = t->c;
    const int L = c->n_layers, n = t->req->n_workers;
    char *used = xcalloc((size_t)n + 1, 1);
    double *layer_busy = xcalloc((size_t)n + 1, sizeof(double));
    int *count = xcalloc((size_t)n + 1, sizeof(int));
    int *share = xcalloc((size_t)n + 1, sizeof(int));
    fair_shares(t->req, L, share);
    int budgets = t->req->cluster != NULL;
    for (int r = 1; r <= n && budgets; r++)
        budgets = budget_of(t->req, r) > 0;
    int rc = 0;
    for (int l = 0; l < L && rc == 0; l++) {
        LayerPlan *lp = &p->layers[l];
        memset(used, 0, (size_t)n + 1);
        const int prev = l == 0 ? 0 : p->layers[l - 1].ffn_rank;
        if (p->partition == PARTITION_LAYER) {
            size_t b = projffn_bytes(c);
            for (int k = 0; k < lp->n_parts; k++)
                b += part_bytes(c, &lp->parts[k], t->req->kv_positions);
            int r = pick_ffn(t, b, b, prev, count, share, budgets);
            if (r < 0) {
                rc = util_err(err, errlen, "layer %d (%zu bytes) fits no device's memory budget",
                              l, b);
                break;
            }
            whole_layer(lp, r);
            charge(t, r, b);
            count[r]++;
            continue;
        }
        /* The FFN and projection are the largest pieces: place them first, together. */
        size_t b = projffn_bytes(c), whole = b;
        for (int k = 0; k < lp->n_parts; k++)
            whole += part_bytes(c, &lp->parts[k], t->req->kv_positions);
        int r = pick_ffn(t, b, whole, prev, count, share, budgets);
        if (r < 0) {
            rc = util_err(err, errlen, "the FFN and projection of layer %d (%zu bytes) fit no "
                          "device's memory budget", l, b);
            break;
        }
        lp->proj_rank = lp->ffn_rank = r;
        charge(t, r, b);
        count[r]++;
        used[r] = 1;
        /* Then the heads, spread over devices this layer does not use yet, so that they run
         * in parallel; with measured links, each goes where it reaches the projection
         * soonest (on a slow network that is the projection rank itself). */
        const int producer = prev;
        for (int q = 0; q <= n; q++)
            layer_busy[q] = 0;
        for (int k = 0; k < lp->n_parts; k++) {
            size_t pb = part_bytes(c, &lp->parts[k], t->req->kv_positions);
            /* spread (the reference design): over the devices whatever the links */
            int pr = plan_req_links(t->req) && t->req->placement != PLACEMENT_SPREAD
                         ? pick_soonest(t, pb, producer, r, layer_busy)
                         : pick_least(t, pb, used);
            if (pr < 0) {
                rc = util_err(err, errlen, "attention part %d of layer %d fits no device's "
                              "memory budget", k, l);
                break;
            }
            lp->parts[k].rank = pr;
            charge(t, pr, pb);
            used[pr] = 1;
        }
    }
    free(used);
    free(layer_busy);
    free(count);
    free(share);
    return rc;
}

static void build_roundrobin(Plan *p, const ModelConfig *c, int n)
{
    int k = 0;
    for (int l = 0; l < c->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        if (p->partition == PARTITION_LAYER) {
            whole_layer(lp, l % n + 1);
            continue;
        }
        lp->proj_rank = lp->ffn_rank = l % n + 1;
        for (int j = 0; j < lp->n_parts; j++)
            lp->parts[j].rank = k++ % n + 1;
    }
}

static void build_random(Plan *p, const ModelConfig *c, int n, uint64_t seed)
{
    uint64_t st = seed ^ 0x6a09e667f3bcc909ull;
    for (int l = 0; l < c->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        if (p->partition == PARTITION_LAYER) {
            whole_layer(lp, (int)(rng_next(&st) % (uint64_t)n) + 1);
            continue;
        }
        lp->proj_rank = lp->ffn_rank = (int)(rng_next(&st) % (uint64_t)n) + 1;
        for (int j = 0; j < lp->n_parts; j++)
            lp->parts[j].rank = (int)(rng_next(&st) % (uint64_t)n) + 1;
    }
}

/* SLICE: every worker in every layer; parts dealt round-robin (largest first), the FFN cut
 * into slices proportional to device speed.  In a quantized model every column cut falls on
 * a block boundary of the matrix it cuts: parts are dealt in runs whose output-projection
 * columns end on a block of wo, and the FFN cuts are rounded to blocks of w_down (float32:
 * blocks of 1, the cuts as they always were). */
static void build_slice(Plan *p, const ModelConfig *c, const PlanRequest *req)
{
    const int n = req->n_workers;
    const int bw = config_wkind_block(c, WKIND_WO), bd = config_wkind_block(c, WKIND_W_DOWN);
    double total = 0;
    for (int r = 1; r <= n; r++)
        total += speed_of(req, r);
    for (int l = 0; l < c->n_layers; l++) {
        LayerPlan *lp = &p->layers[l];
        lp->mode = LAYER_SLICE;
        for (int k = 0, run = 0, cols = 0; k < lp->n_parts; k++) {
            lp->parts[k].rank = (run + l) % n + 1;
            cols += (lp->parts[k].q1 - lp->parts[k].q0) * c->head_dim;
            run += cols % bw == 0;
        }
        lp->proj_rank = lp->ffn_rank = 1;
        lp->n_slices = n;
        lp->slices = xcalloc((size_t)n, sizeof(FfnSlice));
        double acc = 0;
        int f = 0;
        for (int r = 1; r <= n; r++) {
            acc += speed_of(req, r);
            int end = r == n ? c->ffn_dim : (int)(acc / total * c->ffn_dim / bd + 0.5) * bd;
            end = end > c->ffn_dim ? c->ffn_dim : end;
            end = end < f ? f : end;
            lp->slices[r - 1] = (FfnSlice){r, f, end};
            f = end;
        }
    }
}

const char *plan_exchange_name(SliceExchange x)
{
    static const char *names[] = {"auto", "all", "reduce", "rsag", "exact"};
    return (unsigned)x < 5 ? names[x] : "?";
}

int plan_parse_exchange(const char *s, SliceExchange *out)
{
    for (int k = 0; k < 5; k++)
        if (strcmp(s, plan_exchange_name((SliceExchange)k)) == 0) {
            *out = (SliceExchange)k;
            return 0;
        }
    return -1;
}

/* A SLICE plan's exchange pattern: the request's; else exact where the model rounds its
 * activations (quantized or half weights, config_rounds_activations) and the wire sends
 * whole floats: partial sums added in another order than one process's would now and then
 * move a rounded activation by a whole step, a drift with no bound, while exact gives the
 * single process's bits; else the one the cost model predicts fastest (all-to-all unless
 * another is at least 1% faster, then reduce before rsag), whose sums differ from one
 * process's by float rounding only. */
static void choose_exchange(Plan *plan, const ModelConfig *c, const PlanRequest *req)
{
    plan->exchange = EXCHANGE_ALL;
    if (plan->partition != PARTITION_SLICE)
        return;
    if (req->exchange != EXCHANGE_AUTO) {
        plan->exchange = req->exchange;
        return;
    }
    if (config_rounds_activations(c) && !(req->wire_bytes > 0 && req->wire_bytes < 4)) {
        plan->exchange = EXCHANGE_EXACT;
        return;
    }
    if (plan->n_workers > 64) /* the prediction is quadratic in the members: keep all-to-all */
        return;
    double best = plan_predict_ms(plan, c, req);
    for (int x = EXCHANGE_REDUCE; x <= EXCHANGE_RSAG; x++) {
        SliceExchange was = plan->exchange;
        plan->exchange = (SliceExchange)x;
        double v = plan_predict_ms(plan, c, req);
        if (v < best * 0.99)
            best = v;
        else
            plan->exchange = was;
    }
}

/* PLACEMENT_DP and PLACEMENT_EXACT: the solvers over req's cluster and cost model. */
static int build_solved(Plan *plan, const ModelConfig *c, const PlanRequest *req, char *err,
                        size_t errlen)
{
    if (!req->cluster || !req->model)
        return util_err(err, errlen, "the %s placement needs a cluster and a cost model",
                        plan_placement_name(req->placement));
    double t0 = time_now();
    SolverRequest sreq = {req->kv_positions, req->max_nodes, 0};
    SolverStats st;
    int rc = req->placement == PLACEMENT_DP
                 ? solver_layer_dp(plan, &st, c, req->cluster, req->model, &sreq, err, errlen)
                 : solver_exact(plan, &st, c, req->cluster, req->model, &sreq, err, errlen);
    if (rc == 0) {
        plan->build_ms = (time_now() - t0) * 1e3;
        if (req->stats)
            *req->stats = st;
    }
    return rc;
}

int plan_build(Plan *plan, const ModelConfig *c, const PlanRequest *req, char *err,
               size_t errlen)
{
    if (req->placement == PLACEMENT_DP || req->placement == PLACEMENT_EXACT)
        return build_solved(plan, c, req, err, errlen);
    double t0 = time_now();
    memset(plan, 0, sizeof *plan);
    const int n = req->n_workers;
    if (n < 1)
        return util_err(err, errlen, "a distributed plan needs at least one worker");
    plan->n_layers = c->n_layers;
    plan->n_workers = n;
    plan->partition = req->partition;
    plan->placement = req->placement;
    if (req->placement == PLACEMENT_LAYER)
        plan->partition = PARTITION_LAYER;
    if (req->placement == PLACEMENT_WATERFILL)
        plan->partition = PARTITION_SLICE;
    /* With more workers than units, split units into parts of query heads. */
    int split = 1;
    if (plan->partition != PARTITION_LAYER) {
        split = (n + c->n_kv_heads - 1) / c->n_kv_heads;
        if (split > config_q_per_kv(c))
            split = config_q_per_kv(c);
    }
    plan->layers = xcalloc((size_t)c->n_layers, sizeof(LayerPlan));
    for (int l = 0; l < c->n_layers; l++)
        make_parts(&plan->layers[l], c, split);

    Tally t = {c, req, xcalloc((size_t)n + 1, sizeof(size_t)), xcalloc((size_t)n + 1,
               sizeof(double))};
    int rc = 0;
    if (plan->partition == PARTITION_SLICE) {
        build_slice(plan, c, req);
        /* Re-dealt within the budgets, which then hold the split LM head's rows too. */
        plan->head_split = !req->head_on_controller && c->n_layers > 0 && n > 1;
        if (req->placement == PLACEMENT_WATERFILL)
            rc = slice_deal_waterfill(plan, c, req, err, errlen);
        else
            plan->placement = PLACEMENT_GREEDY;
    } else switch (req->placement) {
    case PLACEMENT_LAYER: rc = build_layerwise(plan, &t, err, errlen); break;
    case PLACEMENT_GREEDY:
    case PLACEMENT_SPREAD: rc = build_greedy(plan, &t, err, errlen); break;
    case PLACEMENT_ROUNDROBIN: build_roundrobin(plan, c, n); break;
    case PLACEMENT_RANDOM: build_random(plan, c, n, req->seed); break;
    case PLACEMENT_WATERFILL: break; /* always SLICE: above */
    case PLACEMENT_DP:
    case PLACEMENT_EXACT: break; /* the solvers: above */
    }
    free(t.bytes);
    free(t.load);
    const LayerPlan *last = &plan->layers[c->n_layers - 1];
    plan->head_split = rc == 0 && !req->head_on_controller && last->mode == LAYER_SLICE &&
                       last->n_slices > 1;
    plan->build_ms = (time_now() - t0) * 1e3;
    if (rc == 0)
        rc = plan_validate(plan, c, err, errlen);
    /* Every device must hold what the plan gives it, KV cache included. */
    for (int r = 1; rc == 0 && r <= n; r++) {
        size_t need = plan_rank_weight_bytes(plan, c, r) +
                      plan_rank_kv_bytes(plan, c, r, req->kv_positions);
        size_t b = budget_of(req, r);
        if (b && need > b)
            rc = util_err(err, errlen, "the %s placement does not fit: rank %d needs %.1f MB "
                          "(weights and KV cache for %d positions), its budget is %.1f MB",
                          plan_placement_name(req->placement), r, need / 1e6,
                          req->kv_positions, b / 1e6);
    }
    if (rc == 0)
        choose_exchange(plan, c, req);
    if (rc < 0)
        plan_free(plan);
    return rc;
}

int plan_validate(const Plan *plan, const ModelConfig *c, char *err, size_t errlen)
{
    const int Q = config_q_per_kv(c), maxr = plan->n_workers;
    int *seen = xcalloc((size_t)c->n_heads, sizeof(int));
    int rc = 0;
    for (int l = 0; l < plan->n_layers && rc == 0; l++) {
        const LayerPlan *lp = &plan->layers[l];
        memset(seen, 0, (size_t)c->n_heads * sizeof(int));
        if (lp->proj_rank < 0 || lp->proj_rank > maxr || lp->ffn_rank < 0 || lp->ffn_rank > maxr)
            rc = util_err(err, errlen, "plan: layer %d places its projection or FFN on a rank "
                          "outside 0..%d", l, maxr);
        for (int k = 0; k < lp->n_parts && rc == 0; k++) {
            const AttnPart *p = &lp->parts[k];
            if (p->rank < 0 || p->rank > maxr || p->unit < 0 || p->unit >= c->n_kv_heads ||
                p->q0 < 0 || p->q1 > Q || p->q0 >= p->q1) {
                rc = util_err(err, errlen, "plan: layer %d part %d is malformed", l, k);
                break;
            }
            for (int q = p->q0; q < p->q1; q++)
                seen[p->unit * Q + q]++;
        }
        if (lp->mode == LAYER_SLICE) {
            int f = 0;
            for (int k = 0; k < lp->n_slices && rc == 0; k++) {
                const FfnSlice *sl = &lp->slices[k];
                if (sl->f0 != f || sl->f1 < sl->f0 || sl->rank < 1 || sl->rank > maxr ||
                    (k > 0 && sl->rank <= lp->slices[k - 1].rank))
                    rc = util_err(err, errlen, "plan: layer %d FFN slice %d is malformed", l, k);
                f = sl->f1;
            }
            if (rc == 0 && f != c->ffn_dim)
                rc = util_err(err, errlen, "plan: layer %d FFN slices cover %d of %d columns",
                              l, f, c->ffn_dim);
            for (int k = 0; k < lp->n_parts && rc == 0; k++) {
                int member = 0;
                for (int j = 0; j < lp->n_slices; j++)
                    member |= lp->slices[j].rank == lp->parts[k].rank;
                if (!member)
                    rc = util_err(err, errlen, "plan: layer %d part %d on rank %d, which holds "
                                  "no FFN slice", l, k, lp->parts[k].rank);
            }
        }
        for (int h = 0; h < c->n_heads && rc == 0; h++)
            if (seen[h] != 1)
                rc = util_err(err, errlen, "plan: layer %d covers query head %d %d times", l, h,
                              seen[h]);
    }
    free(seen);
    return rc;
}

int plan_head_rows(const Plan *plan, const ModelConfig *c, int rank, int *v0, int *v1)
{
    if (!plan->head_split)
        return 0;
    const LayerPlan *lp = &plan->layers[plan->n_layers - 1];
    for (int i = 0; i < lp->n_slices; i++)
        if (lp->slices[i].rank == rank) {
            const long V = c->vocab_size, n = lp->n_slices;
            *v0 = (int)(i * V / n);
            *v1 = (int)((i + 1) * V / n);
            return 1;
        }
    return 0;
}

int plan_exact_rows(const Plan *plan, const ModelConfig *c, int layer, int rank, int *d0,
                    int *d1)
{
    if (plan->exchange != EXCHANGE_EXACT || layer < 0 || layer >= plan->n_layers)
        return 0;
    const LayerPlan *lp = &plan->layers[layer];
    if (lp->mode != LAYER_SLICE)
        return 0;
    for (int i = 0; i < lp->n_slices; i++)
        if (lp->slices[i].rank == rank) {
            const int64_t D = c->dim, F = c->ffn_dim;
            *d0 = (int)(lp->slices[i].f0 * D / F);
            *d1 = (int)(lp->slices[i].f1 * D / F);
            return 1;
        }
    return 0;
}

size_t plan_rows_bytes(const ModelConfig *c, WeightKind k, int rows, int cols)
{
    return (size_t)rows * quant_row_bytes((QType)c->wtype[k], cols);
}

size_t plan_rank_weight_bytes(const Plan *plan, const ModelConfig *c, int rank)
{
    size_t b = 0;
    int v0, v1;
    if (plan_head_rows(plan, c, rank, &v0, &v1)) /* rows, final norm (and its bias) */
        b += config_head_rows_bytes(c, v1 - v0) +
             (c->arch == ARCH_GPT2 ? 2 : 1) * (size_t)c->dim * sizeof(float);
    for (int l = 0; l < plan->n_layers; l++) {
        const LayerPlan *lp = &plan->layers[l];
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank == rank) {
                int nq = lp->parts[k].q1 - lp->parts[k].q0;
                b += config_attn_unit_bytes(c, nq);
                if (lp->mode == LAYER_SLICE && plan->exchange != EXCHANGE_EXACT)
                    b += config_proj_cols_bytes(c, nq * c->head_dim); /* its wo columns */
            }
        int d0, d1;
        if (plan_exact_rows(plan, c, l, rank, &d0, &d1)) {
            /* rows [d0, d1) of wo and w_down, whole; gate/up rows of its FFN slice */
            const int qd = c->n_heads * c->head_dim;
            for (int k = 0; k < lp->n_slices; k++)
                if (lp->slices[k].rank == rank) {
                    const int f = lp->slices[k].f1 - lp->slices[k].f0;
                    b += config_ffn_bytes(c, f) - plan_rows_bytes(c, WKIND_W_DOWN, c->dim, f) +
                         plan_rows_bytes(c, WKIND_W_DOWN, d1 - d0, c->ffn_dim);
                }
            b += plan_rows_bytes(c, WKIND_WO, d1 - d0, qd) +
                 (c->arch == ARCH_GPT2 ? (size_t)c->dim * sizeof(float) : 0); /* bo */
            continue;
        }
        if (lp->mode == LAYER_SLICE) {
            for (int k = 0; k < lp->n_slices; k++)
                if (lp->slices[k].rank == rank)
                    b += config_ffn_bytes(c, lp->slices[k].f1 - lp->slices[k].f0);
            continue;
        }
        if (lp->proj_rank == rank)
            b += config_proj_bytes(c);
        if (lp->ffn_rank == rank)
            b += config_ffn_bytes(c, c->ffn_dim);
    }
    return b;
}

size_t plan_rank_kv_bytes(const Plan *plan, const ModelConfig *c, int rank, int kv_positions)
{
    size_t b = 0;
    for (int l = 0; l < plan->n_layers; l++)
        for (int k = 0; k < plan->layers[l].n_parts; k++)
            if (plan->layers[l].parts[k].rank == rank)
                b += config_kv_bytes(c, kv_positions);
    return b;
}

int plan_rank_in_layer(const Plan *plan, int layer, int rank)
{
    const LayerPlan *lp = &plan->layers[layer];
    if (lp->proj_rank == rank || lp->ffn_rank == rank)
        return 1;
    for (int k = 0; k < lp->n_parts; k++)
        if (lp->parts[k].rank == rank)
            return 1;
    for (int k = 0; k < lp->n_slices; k++)
        if (lp->slices[k].rank == rank)
            return 1;
    return 0;
}

int plan_slice_members(const Plan *plan, int layer, int *out)
{
    const LayerPlan *lp = &plan->layers[layer];
    for (int k = 0; out && k < lp->n_slices; k++)
        out[k] = lp->slices[k].rank;
    return lp->n_slices;
}

void plan_print(const Plan *plan, const ModelConfig *c, FILE *out)
{
    const int Q = config_q_per_kv(c);
    fprintf(out, "placement: partition %s, placement %s%s%s, %d workers, LM head on %s, built "
            "in %.3f ms\n", plan_partition_name(plan->partition),
            plan_placement_name(plan->placement),
            plan->partition == PARTITION_SLICE ? ", exchange " : "",
            plan->partition == PARTITION_SLICE ? plan_exchange_name(plan->exchange) : "",
            plan->n_workers,
            plan->head_split ? "the last layer's members" : "the controller", plan->build_ms);
    fprintf(out, "%-6s %-6s %-6s  attention parts (unit:heads@rank)\n", "layer", "proj", "ffn");
    for (int l = 0; l < plan->n_layers; l++) {
        const LayerPlan *lp = &plan->layers[l];
        if (lp->mode == LAYER_SLICE) {
            const int exact = plan->exchange == EXCHANGE_EXACT;
            fprintf(out, "%-6d %-13s", l, exact ? "rows" : "row-par");
            for (int k = 0; k < lp->n_slices; k++) {
                int d0, d1;
                fprintf(out, " ffn[%d:%d]", lp->slices[k].f0, lp->slices[k].f1);
                if (plan_exact_rows(plan, c, l, lp->slices[k].rank, &d0, &d1))
                    fprintf(out, "/rows[%d:%d]", d0, d1); /* of wo and w_down */
                fprintf(out, "@%d", lp->slices[k].rank);
            }
            fprintf(out, " |");
        } else {
            fprintf(out, "%-6d %-6d %-6d ", l, lp->proj_rank, lp->ffn_rank);
        }
        for (int k = 0; k < lp->n_parts; k++) {
            const AttnPart *p = &lp->parts[k];
            if (p->q0 == 0 && p->q1 == Q)
                fprintf(out, " u%d@%d", p->unit, p->rank);
            else
                fprintf(out, " u%d:%d-%d@%d", p->unit, p->q0, p->q1 - 1, p->rank);
        }
        fputc('\n', out);
    }
    for (int r = 1; r <= plan->n_workers; r++)
        fprintf(out, "rank %d: %.2f MB of weights\n", r,
                plan_rank_weight_bytes(plan, c, r) / 1e6);
}

json_t *plan_to_json(const Plan *plan, const ModelConfig *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "partition", json_string(plan_partition_name(plan->partition)));
    json_object_set_new(o, "placement", json_string(plan_placement_name(plan->placement)));
    if (plan->partition == PARTITION_SLICE)
        json_object_set_new(o, "exchange", json_string(plan_exchange_name(plan->exchange)));
    json_object_set_new(o, "n_workers", json_integer(plan->n_workers));
    json_object_set_new(o, "build_ms", json_real(plan->build_ms));
    json_object_set_new(o, "lm_head", json_string(plan->head_split ? "split" : "controller"));
    json_t *layers = json_array();
    for (int l = 0; l < plan->n_layers; l++) {
        const LayerPlan *lp = &plan->layers[l];
        json_t *lo = json_object(), *parts = json_array();
        for (int k = 0; k < lp->n_parts; k++)
            json_array_append_new(parts, json_pack("{s:i,s:i,s:i,s:i}", "rank", lp->parts[k].rank,
                                                   "unit", lp->parts[k].unit, "q0",
                                                   lp->parts[k].q0, "q1", lp->parts[k].q1));
        json_object_set_new(lo, "mode", json_string(lp->mode == LAYER_SLICE ? "slice" : "pipe"));
        if (lp->mode == LAYER_SLICE) {
            json_t *sl = json_array();
            for (int k = 0; k < lp->n_slices; k++) {
                json_t *so = json_pack("{s:i,s:i,s:i}", "rank", lp->slices[k].rank, "f0",
                                       lp->slices[k].f0, "f1", lp->slices[k].f1);
                int d0, d1; /* exact: the rows of wo and w_down */
                if (plan_exact_rows(plan, c, l, lp->slices[k].rank, &d0, &d1)) {
                    json_object_set_new(so, "d0", json_integer(d0));
                    json_object_set_new(so, "d1", json_integer(d1));
                }
                json_array_append_new(sl, so);
            }
            json_object_set_new(lo, "ffn_slices", sl);
        }
        json_object_set_new(lo, "proj_rank", json_integer(lp->proj_rank));
        json_object_set_new(lo, "ffn_rank", json_integer(lp->ffn_rank));
        json_object_set_new(lo, "parts", parts);
        json_array_append_new(layers, lo);
    }
    json_object_set_new(o, "layers", layers);
    json_t *wb = json_array();
    for (int r = 1; r <= plan->n_workers; r++)
        json_array_append_new(wb, json_integer((json_int_t)plan_rank_weight_bytes(plan, c, r)));
    json_object_set_new(o, "worker_weight_bytes", wb);
    return o;
}
