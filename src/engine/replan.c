/* replan.c: memory budgets of the workers, the prediction of when each would be exceeded,
 * and re-placement with KV-cache migration while generation runs.
 *
 * Every rank can compute every other rank's accounted bytes from the plan and the position
 * (weights + KV cache + buffers), so the controller checks budgets before each token without
 * messages.  A re-placement is a pure function of the plan and the position (plan_replace),
 * so once the controller announces it, every rank computes the same new plan, moves what
 * changed and rebuilds the groups. */
#include "engine_internal.h"

#include "h5io.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

void dist_set_memory(DistEngine *e, const PlanRequest *req, int steps, double threshold,
                     int static_plan)
{
    MemState *m = &e->mem;
    const int size = e->tp->size;
    m->req = *req; /* its cluster is the caller's, alive as long as the engine */
    m->steps = steps;
    m->threshold = threshold;
    m->static_plan = static_plan;
    m->peak = xcalloc((size_t)size, sizeof(size_t));
    m->records = json_array();
}

const Plan *dist_plan(const DistEngine *e) { return e->plan; }

static size_t budget_of(const MemState *m, int rank)
{
    return m->req.cluster ? m->req.cluster->dev[rank].mem_budget : 0;
}

void dist_print_memory_prediction(const DistEngine *e, FILE *out)
{
    const MemState *m = &e->mem;
    const ModelConfig *c = e->c;
    int any = 0;
    for (int r = 1; r <= e->plan->n_workers; r++)
        any |= budget_of(m, r) > 0;
    if (!any)
        return;
    fprintf(out, "memory: budgets over %d positions (re-placement at %.0f%%%s):\n", m->steps,
            m->threshold * 100, m->static_plan ? ", off: --static" : "");
    for (int r = 1; r <= e->plan->n_workers; r++) {
        size_t b = budget_of(m, r);
        size_t now = plan_rank_accounted_bytes(e->plan, c, r, 1);
        size_t per = plan_rank_kv_bytes(e->plan, c, r, 1);
        int soft = plan_rank_crossing(e->plan, c, r, b, m->threshold, m->steps);
        int hard = plan_rank_crossing(e->plan, c, r, b, 1.0, m->steps);
        fprintf(out, "  rank %d: %.2f MB at start, +%.1f KB per token, budget %s", r, now / 1e6,
                per / 1e3, b ? "" : "none");
        if (b)
            fprintf(out, "%.2f MB", b / 1e6);
        if (hard >= 0)
            fprintf(out, ": exceeds it at token %d", hard - 1);
        else if (soft >= 0)
            fprintf(out, ": passes %.0f%% at token %d", m->threshold * 100, soft - 1);
        else if (b)
            fprintf(out, ": fits");
        fputc('\n', out);
    }
}

/* A re-placement's KV caches and parts in motion on this rank: the new plan, the messages
 * posted, the parts this rank holds under it ([L] arrays in plan order), the model file
 * opened for arriving parts (-1 until needed), and the bytes moved and loaded. */
typedef struct {
    const Plan *next;
    size_t kv_bytes; /* of one cache (K or V) of a part */
    TransportReq *reqs;
    int nreq;
    AttnPartW **fresh;
    hid_t file;
    size_t kv_moved, loaded;
} Migration;

/* Layer l's parts leaving this rank: their KV caches sent to the new owners. */
static void migrate_send(DistEngine *e, Migration *mg, int l)
{
    const ModelConfig *c = e->c;
    const int me = e->tp->rank;
    const LayerPlan *old = &e->plan->layers[l], *nw = &mg->next->layers[l];
    LayerRt *r = &e->lr[l];
    for (int k = 0, j = 0; k < old->n_parts; k++) {
        if (old->parts[k].rank != me)
            continue;
        AttnPartW *pw = &r->parts[j++];
        int to = nw->parts[k].rank;
        if (to == me)
            continue;
        int tag = WIRE_TAG_MIG + 2 * (l * c->n_heads + k);
        transport_isend(e->tp, model_attn_part_cache(pw, 0), mg->kv_bytes, to, tag,
                        &mg->reqs[mg->nreq++]);
        transport_isend(e->tp, model_attn_part_cache(pw, 1), mg->kv_bytes, to, tag + 1,
                        &mg->reqs[mg->nreq++]);
        mg->kv_moved += 2 * mg->kv_bytes;
    }
}

/* This rank's parts of layer l under the new plan, in plan order: kept ones move over,
 * arriving ones are read from this rank's own copy of the model and get the KV by message. */
static void migrate_take(DistEngine *e, Migration *mg, int l)
{
    const ModelConfig *c = e->c;
    const int me = e->tp->rank;
    const LayerPlan *old = &e->plan->layers[l], *nw = &mg->next->layers[l];
    LayerRt *r = &e->lr[l];
    char err[512];
    int n_new = 0;
    for (int k = 0; k < nw->n_parts; k++)
        n_new += nw->parts[k].rank == me;
    mg->fresh[l] = xcalloc((size_t)(n_new ? n_new : 1), sizeof(AttnPartW));
    for (int k = 0, j = 0; k < nw->n_parts; k++) {
        if (nw->parts[k].rank != me)
            continue;
        AttnPartW *dst = &mg->fresh[l][j++];
        int from = old->parts[k].rank;
        if (from == me) {
            int idx = 0;
            for (int q = 0; q < k; q++)
                idx += old->parts[q].rank == me;
            *dst = r->parts[idx];
            memset(&r->parts[idx], 0, sizeof r->parts[idx]);
            continue;
        }
        if (mg->file < 0)
            mg->file = h5io_open_read(e->fname, err, sizeof err);
        CHECK(mg->file >= 0, "re-placement: %s", err);
        const AttnPart *p = &nw->parts[k];
        CHECK(model_load_attn_part(dst, c, mg->file, e->fname, l, p->unit, p->q0, p->q1,
                                   e->kv_cap, err, sizeof err) == 0,
              "re-placement: %s", err);
        mg->loaded += model_attn_part_bytes(c, dst);
        e->stats.weight_bytes += model_attn_part_bytes(c, dst);
        int tag = WIRE_TAG_MIG + 2 * (l * c->n_heads + k);
        transport_irecv(e->tp, model_attn_part_cache(dst, 0), mg->kv_bytes, from, tag,
                        &mg->reqs[mg->nreq++]);
        transport_irecv(e->tp, model_attn_part_cache(dst, 1), mg->kv_bytes, from, tag + 1,
                        &mg->reqs[mg->nreq++]);
    }
}

/* Frees the parts that left, installs the new ones (fresh, taken over) and the plan next
 * (taken over), and rebuilds the groups from it. */
static void replan_install(DistEngine *e, AttnPartW **fresh, Plan *next)
{
    const ModelConfig *c = e->c;
    const int me = e->tp->rank, hd = c->head_dim;
    for (int l = 0; l < e->L; l++) {
        LayerRt *r = &e->lr[l];
        for (int j = 0; j < r->n_parts; j++) {
            if (r->parts[j].wq.data)
                e->stats.weight_bytes -= model_attn_part_bytes(c, &r->parts[j]);
            model_free_attn_part(&r->parts[j]);
        }
        free(r->parts);
        r->parts = fresh[l];
        /* PIPE layers hold no projection columns (SLICE layers are never re-placed). */
        for (int j = 0; j < r->n_parts; j++)
            model_qmat_free(&r->wo_cols[j]);
        free(r->wo_cols);
        r->n_parts = 0;
        r->my_floats = 0;
        for (int k = 0; k < next->layers[l].n_parts; k++)
            if (next->layers[l].parts[k].rank == me) {
                r->n_parts++;
                r->my_floats += (next->layers[l].parts[k].q1 - next->layers[l].parts[k].q0) * hd;
            }
        r->wo_cols = xcalloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof(QMat));
    }
    plan_free(&e->plan_own);
    e->plan_own = *next;
    e->plan = &e->plan_own;
    schedule_free(&e->sched);
    plan_schedule(&e->sched, e->plan, c);
    for (int l = 0; l <= e->L; l++) {
        engine_teardown_layer_comms(e, l);
        engine_setup_layer(e, l);
    }
    engine_refresh_roles(e);
    e->prog.built = 0; /* the program of the new plan, before the next pass */
}

/* The controller's record of what the re-placement at `positions` cost (collective: the
 * ranks' moved and loaded bytes summed). */
static void replan_record(DistEngine *e, int positions, int moved, const Migration *mg,
                          double t0)
{
    uint64_t mine[2] = {mg->kv_moved, mg->loaded}, all[2] = {0, 0};
    uint64_t *every = xmalloc(2 * (size_t)e->tp->size * sizeof(uint64_t));
    transport_allgather(e->tp, mine, sizeof mine, every);
    for (int r = 0; r < e->tp->size; r++) {
        all[0] += every[2 * r];
        all[1] += every[2 * r + 1];
    }
    free(every);
    if (e->tp->rank == 0) {
        json_t *rec = json_pack("{s:i,s:i,s:I,s:I,s:f,s:f}", "token", positions,
                                "parts_moved", moved, "kv_bytes_moved", (json_int_t)all[0],
                                "weight_bytes_loaded", (json_int_t)all[1],
                                "placement_ms", e->plan->build_ms,
                                "pause_ms", (time_now() - t0) * 1e3);
        json_array_append_new(e->mem.records, rec);
    }
}

/* Re-places attention parts (collective).  See plan_replace for the policy. */
void engine_replan(DistEngine *e, int positions)
{
    const ModelConfig *c = e->c;
    CHECK(e->sl.n == 1, "re-placement with %d sequence slots: it moves one sequence's "
          "caches", e->sl.n);
    double t0 = time_now();
    Plan next;
    char err[512];
    /* The decision looks at the next position (positions + 1 cached after this token), as the
     * controller's check did; the caches hold `positions` positions now. */
    int moved = plan_replace(&next, e->plan, c, &e->mem.req, positions + 1, e->mem.steps,
                             e->mem.threshold, err, sizeof err);
    CHECK(moved >= 0, "%s", err);
    const int cap = 4 * c->n_layers * c->n_heads + 4;
    Migration mg = {.next = &next, .kv_bytes = config_kv_bytes(c, positions) / 2,
                    .reqs = xmalloc((size_t)cap * sizeof(TransportReq)),
                    .fresh = xcalloc((size_t)e->L, sizeof(AttnPartW *)), .file = -1};
    transport_exclusive(e->tp, 1); /* posts and file reads only: nothing waits in here */
    for (int l = 0; l < e->L; l++) {
        migrate_send(e, &mg, l);
        migrate_take(e, &mg, l);
    }
    if (mg.file >= 0)
        H5Fclose(mg.file);
    transport_exclusive(e->tp, 0);
    for (int i = 0; i < mg.nreq; i++)
        transport_wait(e->tp, &mg.reqs[i]);
    free(mg.reqs);
    replan_install(e, mg.fresh, &next);
    free(mg.fresh);
    replan_record(e, positions, moved, &mg, t0);
}

int dist_check_slots_memory(const DistEngine *e, char *err, size_t errlen)
{
    const MemState *m = &e->mem;
    const ModelConfig *c = e->c;
    const int S = e->sl.n, cap = m->steps;
    for (int r = 1; S > 1 && r <= e->plan->n_workers; r++) {
        const size_t b = budget_of(m, r), kv = plan_rank_kv_bytes(e->plan, c, r, cap);
        const size_t need = plan_rank_accounted_bytes(e->plan, c, r, cap) + (size_t)(S - 1) * kv;
        if (b && need > b)
            return util_err(err, errlen, "rank %d: %d slots (--parallel) of %d positions "
                            "(--ctx-size) need %.2f MB: weights %.2f MB and %d KV caches of "
                            "%.2f MB (--cache-type %s), over its budget of %.2f MB; give fewer "
                            "--parallel, a smaller --ctx-size or --cache-type f16 or q8_0", r, S,
                            cap, need / 1e6, plan_rank_weight_bytes(e->plan, c, r) / 1e6, S,
                            kv / 1e6, quant_type_name(c->kv_type), b / 1e6);
    }
    return 0;
}

int dist_controller_prepare(void *ctx, int pos, char *err, size_t errlen)
{
    DistEngine *e = ctx;
    MemState *m = &e->mem;
    const ModelConfig *c = e->c;
    /* without dist_set_memory, nothing to check; with several slots every slot's caches
     * at the full positions were checked at start-up (dist_check_slots_memory), and the
     * slots' passes do not re-place */
    if (!m->peak || e->sl.n > 1)
        return 0;
    for (int pass = 0; pass < 2; pass++) {
        int over = 0;
        for (int r = 1; r <= e->plan->n_workers; r++) {
            size_t acc = plan_rank_accounted_bytes(e->plan, c, r, pos + 1), b = budget_of(m, r);
            if (pass == 0 && acc > m->peak[r])
                m->peak[r] = acc;
            if (!b)
                continue;
            if (acc > b && (m->static_plan || m->exhausted || pass == 1))
                return util_err(err, errlen, "budget exceeded on rank %d at token %d: %.2f MB "
                                "accounted (weights %.2f MB, KV cache %.2f MB), budget %.2f MB%s",
                                r, pos, acc / 1e6, plan_rank_weight_bytes(e->plan, c, r) / 1e6,
                                plan_rank_kv_bytes(e->plan, c, r, pos + 1) / 1e6, b / 1e6,
                                m->static_plan ? " (--static: no re-placement)" : "");
            over |= (double)acc > m->threshold * (double)b;
        }
        if (!over || m->static_plan || m->exhausted || pass == 1)
            return 0;
        /* Worth announcing only if parts can actually move. */
        Plan next;
        char perr[256];
        int moved = plan_replace(&next, e->plan, c, &m->req, pos + 1, m->steps, m->threshold,
                                 perr, sizeof perr);
        if (moved > 0) {
            plan_free(&next);
            double t0 = time_now();
            engine_controller_control(e, WIRE_REPLAN, pos);
            engine_replan(e, pos);
            json_t *last = json_array_get(m->records, json_array_size(m->records) - 1);
            json_object_set_new(last, "pause_ms", json_real((time_now() - t0) * 1e3));
            LOG_INFO("headsplit: re-placement at token %d: %d attention parts moved in %.1f ms",
                     pos, moved, (time_now() - t0) * 1e3);
        } else {
            if (moved == 0)
                plan_free(&next);
            m->exhausted = 1;
            LOG_INFO("headsplit: at token %d a worker passed %.0f%% of its budget, but no "
                     "re-placement helps%s%s", pos, m->threshold * 100, moved < 0 ? ": " : "",
                     moved < 0 ? perr : "");
        }
    }
    return 0;
}

json_t *dist_memory_json(const DistEngine *e)
{
    const MemState *m = &e->mem;
    json_t *o = json_object(), *ranks = json_array();
    for (int r = 1; r <= e->plan->n_workers; r++)
        json_array_append_new(ranks, json_pack("{s:i,s:I,s:I,s:I,s:I}", "rank", r,
                              "budget_bytes", (json_int_t)budget_of(m, r),
                              "peak_accounted_bytes", (json_int_t)(m->peak ? m->peak[r] : 0),
                              "final_accounted_bytes", (json_int_t)plan_rank_accounted_bytes(
                                  e->plan, e->c, r, 1),
                              "kv_bytes_per_token", (json_int_t)plan_rank_kv_bytes(
                                  e->plan, e->c, r, 1)));
    json_object_set_new(o, "memory", ranks);
    json_object_set_new(o, "replacements", m->records ? json_incref(m->records) : json_array());
    json_object_set_new(o, "replacement_count",
                        json_integer(m->records ? (json_int_t)json_array_size(m->records) : 0));
    json_object_set_new(o, "replace_threshold", json_real(m->threshold));
    json_object_set_new(o, "static_placement", json_boolean(m->static_plan));
    return o;
}
