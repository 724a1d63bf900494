/* setup.c: setting the engine up from the plan and tearing it down: the plan's schedule, one
 * transport group per broadcast and gather group, this rank's roles, weights and buffers. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

int dist_hops_per_token(const Plan *p)
{
    /* Hops do not depend on sizes: a one-float model config serves every plan. */
    ModelConfig c = {0};
    c.dim = c.head_dim = c.n_heads = c.n_kv_heads = c.vocab_size = 1;
    Schedule s;
    plan_schedule(&s, p, &c);
    int hops = s.hops_per_token;
    schedule_free(&s);
    return hops;
}

/* Builds the groups of layer l from the schedule (collective over every rank) and this
 * rank's roles. */
void engine_setup_layer(DistEngine *e, int l)
{
    const ScheduleLayer *sl = &e->sched.layers[l];
    const int me = e->tp->rank;
    LayerRt *r = &e->lr[l];
    r->in_root = sl->n_bcast > 0 && sl->bcast[0] == me;
    r->in_peer = sl->n_bcast > 0 ? sl->bcast[0] : -1;
    r->in_comm = sl->n_bcast > 1 ? transport_group_create(e->tp, sl->bcast, sl->n_bcast)
                                  : NULL;
    if (l < e->L) {
        if (sl->mode == LAYER_PIPE) {
            r->g_comm = sl->n_gather > 1 ? transport_group_create(e->tp, sl->gather, sl->n_gather)
                                         : NULL;
            r->is_proj = sl->proj_rank == me;
            r->is_ffn = sl->ffn_rank == me;
        }
    }
}

/* Loads this rank's slices of layer l; -1 with err. */
static int load_layer(DistEngine *e, int l, hid_t file, const char *fname, int kv_cap,
                      char *err, size_t errlen)
{
    const LayerPlan *lp = &e->plan->layers[l];
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    const int me = e->tp->rank, hd = c->head_dim, Q = config_q_per_kv(c);
    for (int k = 0; k < lp->n_parts; k++)
        r->n_parts += lp->parts[k].rank == me;
    r->parts = xcalloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof(AttnPartW));
    r->wo_cols = xcalloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof(QMat));
    /* SLICE, quantized wo: a run of this rank's parts with adjacent columns shares one
     * block-aligned column slice of wo, held by its first part (the others' stay empty). */
    const int merge = lp->mode == LAYER_SLICE && config_wkind_block(c, WKIND_WO) > 1;
    const int exact = lp->mode == LAYER_SLICE && e->plan->exchange == EXCHANGE_EXACT;
    for (int k = 0, j = 0; k < lp->n_parts; k++) {
        const AttnPart *p = &lp->parts[k];
        if (p->rank != me)
            continue;
        if (model_load_attn_part(&r->parts[j], c, file, fname, l, p->unit, p->q0, p->q1, kv_cap,
                                 err, errlen) < 0)
            return -1;
        e->stats.weight_bytes += model_attn_part_bytes(c, &r->parts[j]);
        int ncols = (p->q1 - p->q0) * hd, col0 = (p->unit * Q + p->q0) * hd;
        if (lp->mode == LAYER_SLICE && !exact && /* exact: wo by rows, below */
            !(merge && k > 0 && lp->parts[k - 1].rank == me)) {
            int run = ncols;
            for (int m = k + 1; merge && m < lp->n_parts && lp->parts[m].rank == me; m++)
                run += (lp->parts[m].q1 - lp->parts[m].q0) * hd;
            if (model_load_proj_cols(&r->wo_cols[j], c, file, fname, l, col0, run, err,
                                     errlen) < 0)
                return -1;
            e->stats.weight_bytes += model_qmat_bytes(&r->wo_cols[j]);
        }
        r->my_floats += ncols;
        j++;
    }
    if (exact)
        return engine_exact_load(e, l, file, fname, err, errlen);
    if (lp->mode == LAYER_SLICE) {
        for (int k = 0; k < lp->n_slices; k++)
            if (lp->slices[k].rank == me) {
                r->is_ffn = 1;
                if (model_load_ffn(&r->ffn, c, file, fname, l, lp->slices[k].f0,
                                   lp->slices[k].f1, err, errlen) < 0)
                    return -1;
                e->stats.weight_bytes += model_ffn_bytes(c, &r->ffn);
            }
        const ScheduleLayer *sl = &e->sched.layers[l];
        if (c->arch == ARCH_GPT2 && sl->n_members > 0 && sl->members[0] == me) {
            /* The projection bias is added once, by the first member. */
            if (model_load_proj_bias(&r->proj.bo, c, file, fname, l, err, errlen) < 0)
                return -1;
        }
        return 0;
    }
    if (r->is_proj) {
        if (model_load_proj(&r->proj, c, file, fname, l, err, errlen) < 0)
            return -1;
        e->stats.weight_bytes += model_proj_bytes(c, &r->proj);
    }
    if (r->is_ffn) {
        if (model_load_ffn(&r->ffn, c, file, fname, l, 0, c->ffn_dim, err, errlen) < 0)
            return -1;
        e->stats.weight_bytes += model_ffn_bytes(c, &r->ffn);
    }
    return 0;
}

/* The message buffers and scratch for passes of up to e->bmax positions (rows). */
static void alloc_buffers(DistEngine *e)
{
    const ModelConfig *c = e->c;
    const size_t B = (size_t)e->bmax, W = (size_t)e->plan->n_workers;
    const size_t qd = (size_t)c->n_heads * (size_t)c->head_dim;
    const size_t hdr = e->sl.hdr; /* the header and the segment table */
    e->buf.msg_bytes = hdr + B * (size_t)c->dim * sizeof(float);
    e->buf.xmsg = xcalloc(e->buf.msg_bytes, 1);
    e->buf.xout = xcalloc(e->buf.msg_bytes, 1);
    e->buf.zmsg = xcalloc(e->buf.msg_bytes, 1);
    e->buf.zspec = xcalloc(e->buf.msg_bytes, 1);
    e->buf.gbuf = xcalloc(hdr + B * qd * sizeof(float), 1);
    e->buf.staging = xcalloc((W + 2) * hdr + B * qd * sizeof(float), 1);
    e->buf.xsend = xcalloc(e->buf.msg_bytes, 1);
    e->buf.xrecv = xcalloc((W + 1) * e->buf.msg_bytes, 1);
    e->buf.wire_bytes = hdr + B * (size_t)c->dim * sizeof(uint16_t);
    e->buf.wsend = xcalloc(e->buf.wire_bytes, 1);
    e->buf.wbcast = xcalloc(e->buf.wire_bytes, 1);
    e->buf.wzspec = xcalloc(e->buf.wire_bytes, 1);
    e->buf.wrecv = xcalloc((W + 1) * e->buf.wire_bytes, 1);
    e->buf.heads = xcalloc(B * qd, sizeof(float));
    e->buf.acc = xcalloc(B * (size_t)c->dim, sizeof(float));
    e->buf.g_counts_n = xcalloc(W + 2, sizeof(int));
    e->buf.g_displs_n = xcalloc(W + 2, sizeof(int));
    model_scratch_init_batch(&e->scratch, c, e->kv_cap, e->bmax);
    engine_exact_alloc(e);
}

static void free_buffers(DistEngine *e)
{
    free(e->buf.xmsg);
    free(e->buf.xout);
    free(e->buf.zmsg);
    free(e->buf.zspec);
    free(e->buf.gbuf);
    free(e->buf.staging);
    free(e->buf.xsend);
    free(e->buf.xrecv);
    free(e->buf.wsend);
    free(e->buf.wbcast);
    free(e->buf.wzspec);
    free(e->buf.wrecv);
    free(e->buf.heads);
    free(e->buf.acc);
    free(e->buf.g_counts_n);
    free(e->buf.g_displs_n);
    model_scratch_free(&e->scratch);
    engine_exact_free(e);
}

void dist_set_max_batch(DistEngine *e, int max_batch)
{
    CHECK(max_batch >= 1 && max_batch <= WIRE_MAX_ROWS, "batch of %d positions: must be 1..%d",
          max_batch, WIRE_MAX_ROWS);
    free_buffers(e);
    e->bmax = max_batch;
    e->nb = max_batch; /* the first pass (a prompt, usually) may carry them all */
    alloc_buffers(e);
    engine_head_alloc(e);
}

int dist_max_batch(const DistEngine *e) { return e->bmax; }

void dist_set_slots(DistEngine *e, int n_slots)
{
    CHECK(n_slots >= 1 && n_slots <= WIRE_MAX_SLOTS, "%d sequence slots: must be 1..%d",
          n_slots, WIRE_MAX_SLOTS);
    for (int l = 0; l < e->L && n_slots > 1; l++)
        CHECK(!e->sp.on[l] && !e->sp.adaptive, "%d sequence slots with speculation on: it "
              "follows one sequence", n_slots);
    free_buffers(e); /* every message's header grows by the segment table */
    engine_slots_free(e);
    e->sl.n = n_slots;
    engine_slots_alloc(e);
    alloc_buffers(e);
    engine_head_alloc(e);
}

int dist_slots(const DistEngine *e) { return e->sl.n; }

int dist_setup(DistEngine **out, Transport *tp, const ModelConfig *c, const Plan *plan,
               hid_t file, const char *fname, int kv_cap)
{
    DistEngine *e = xcalloc(1, sizeof *e);
    e->tp = tp;
    e->c = c;
    plan_copy(&e->plan_own, plan);
    e->plan = &e->plan_own;
    plan = e->plan;
    plan_schedule(&e->sched, plan, c);
    e->fname = xstrdup(fname);
    e->kv_cap = kv_cap;
    e->L = c->n_layers;
    e->lr = xcalloc((size_t)e->L + 1, sizeof(LayerRt));
    for (int l = 0; l <= e->L; l++)
        engine_setup_layer(e, l);
    char err[512] = "";
    if (tp->rank > 0) {
        transport_exclusive(tp, 1); /* ranks that share a process read the file in turn */
        for (int l = 0; l < e->L; l++)
            if (load_layer(e, l, file, fname, kv_cap, err, sizeof err) < 0)
                break; /* roles (e->active) are set by engine_refresh_roles below */
        transport_exclusive(tp, 0);
    }
    e->bmax = 1;
    e->nb = 1;
    e->sl.n = 1;
    engine_slots_alloc(e);
    alloc_buffers(e);
    e->stats.timers = xcalloc((size_t)e->L * T_COUNT, sizeof(double));
    e->sp.eligible = xcalloc((size_t)e->L, 1);
    e->sp.on = xcalloc((size_t)e->L, 1);
    e->sp.pending = xcalloc((size_t)e->L, 1);
    e->sp.acc_ewma = xcalloc((size_t)e->L, sizeof(double));
    e->sp.tried = xcalloc((size_t)e->L, sizeof(long));
    e->sp.kept = xcalloc((size_t)e->L, sizeof(long));
    e->sp.attn_s = xcalloc((size_t)e->L, sizeof(double));
    e->sp.ffn_s = xcalloc((size_t)e->L, sizeof(double));
    engine_refresh_roles(e);
    engine_setup_head(e, file, fname, err, sizeof err); /* collective: every rank, error or not */
    *out = e;
    if (transport_agree_errors(tp, err)) {
        dist_free(e);
        *out = NULL;
        return -1;
    }
    return 0;
}

int engine_chain_depth(const DistEngine *e)
{
    const Plan *p = e->plan;
    int runs = 0, prev = -1;
    for (int l = 0; l < p->n_layers; l++) {
        const LayerPlan *lp = &p->layers[l];
        const int r = lp->ffn_rank;
        if (lp->mode != LAYER_PIPE || lp->proj_rank != r)
            return 0;
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank != r)
                return 0;
        if (r == prev)
            continue;
        for (int m = 0; m < l; m++) /* a rank that comes back would wait on itself */
            if (p->layers[m].ffn_rank == r)
                return 0;
        runs++;
        prev = r;
    }
    if (p->head_split)
        return 0;
    const int d = runs - 1;
    return d < ENGINE_MAX_DEPTH ? d : ENGINE_MAX_DEPTH;
}

void engine_refresh_roles(DistEngine *e)
{
    const Plan *plan = e->plan;
    e->active = 0;
    for (int l = 0; l < e->L; l++) {
        e->active |= e->tp->rank > 0 && plan_rank_in_layer(plan, l, e->tp->rank);
        e->sp.eligible[l] = (unsigned char)e->sched.layers[l].spec_eligible;
        e->sp.on[l] &= e->sp.eligible[l];
        e->sp.pending[l] &= e->sp.eligible[l];
    }
    e->chain = engine_chain_depth(e);
}

void engine_teardown_layer_comms(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    transport_group_free(e->tp, r->in_comm);
    transport_group_free(e->tp, r->g_comm);
    r->in_comm = r->g_comm = NULL;
}

void dist_free(DistEngine *e)
{
    if (!e)
        return;
    engine_slots_free(e); /* the slots' caches (the weights are the parts') */
    for (int l = 0; l <= e->L; l++) {
        LayerRt *r = &e->lr[l];
        engine_teardown_layer_comms(e, l);
        for (int k = 0; k < r->n_parts; k++) {
            model_free_attn_part(&r->parts[k]);
            model_qmat_free(&r->wo_cols[k]);
        }
        free(r->parts);
        free(r->wo_cols);
        model_free_proj(&r->proj);
        model_free_ffn(&r->ffn);
    }
    free(e->lr);
    engine_program_free(e);
    free_buffers(e);
    free(e->stats.timers);
    free(e->sp.eligible);
    free(e->sp.on);
    free(e->sp.pending);
    free(e->sp.acc_ewma);
    free(e->sp.tried);
    free(e->sp.kept);
    free(e->sp.attn_s);
    free(e->sp.ffn_s);
    transport_group_free(e->tp, e->hd.comm);
    transport_group_free(e->tp, e->ctl);
    model_free_head(&e->hd.rows);
    free(e->hd.send);
    free(e->hd.recv);
    free(e->hd.logits);
    free(e->hd.counts_n);
    free(e->hd.displs_n);
    free(e->svc.req);
    free(e->svc.resp);
    schedule_free(&e->sched);
    plan_free(&e->plan_own);
    free(e->fname);
    free(e->mem.peak);
    json_decref(e->mem.records);
    free(e);
}
