/* slice_exact.c: a SLICE layer under --exchange exact.  No partial sums: every value is
 * computed whole by one member with one process's kernel on one process's input, and the
 * members all-gather the pieces, four rounds per layer:
 *   1. the head outputs of each member's attention parts -> [n][n_heads*hd] in head order;
 *   2. Z rows [d0, d1) of each member (wo by rows, plan_exact_rows) -> Z [n][dim];
 *   3. the FFN's hidden activations of each member's slice [f0, f1) -> [n][ffn];
 *   4. X' rows [d0, d1) (w_down by rows) -> X' [n][dim].
 * So the logits are bit-identical to a single process's, for f32 and quantized weights
 * alike (a quantized matvec quantizes its whole input row, which every member now holds).
 * Each compute and each round is a step of the program (steps.c's exact_layer) with its
 * handler here. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

enum { R_HEADS, R_Z, R_HIDDEN, R_X, R_COUNT };

/* The idx-th column range [*c0, *c0 + *nc) that rank contributes to round `round` of layer
 * l (in the plan's order); 0 when it has no more. */
static int segment(const DistEngine *e, int l, int round, int rank, int idx, int *c0, int *nc)
{
    const LayerPlan *lp = &e->plan->layers[l];
    const ModelConfig *c = e->c;
    if (round == R_HEADS) {
        const int Q = config_q_per_kv(c), hd = c->head_dim;
        for (int k = 0; k < lp->n_parts; k++) {
            const AttnPart *p = &lp->parts[k];
            if (p->rank != rank || idx-- > 0)
                continue;
            *c0 = (p->unit * Q + p->q0) * hd;
            *nc = (p->q1 - p->q0) * hd;
            return 1;
        }
        return 0;
    }
    if (round == R_HIDDEN) {
        for (int k = 0; k < lp->n_slices; k++) {
            if (lp->slices[k].rank != rank || idx-- > 0)
                continue;
            *c0 = lp->slices[k].f0;
            *nc = lp->slices[k].f1 - lp->slices[k].f0;
            return 1;
        }
        return 0;
    }
    int d0, d1;
    if (idx > 0 || !plan_exact_rows(e->plan, c, l, rank, &d0, &d1))
        return 0;
    *c0 = d0;
    *nc = d1 - d0;
    return 1;
}

/* Floats rank contributes per row in the round. */
static size_t round_floats(const DistEngine *e, int l, int round, int rank)
{
    size_t f = 0;
    int c0, nc;
    for (int s = 0; segment(e, l, round, rank, s, &c0, &nc); s++)
        f += (size_t)nc;
    return f;
}

/* Copies rank's columns of the n rows of buf ([n][width]) into msg (pack) or back. */
static void pack_rows(const DistEngine *e, int l, int round, int rank, float *buf, int width,
                      int n, float *msg, int unpack)
{
    int c0, nc;
    for (int i = 0; i < n; i++)
        for (int s = 0; segment(e, l, round, rank, s, &c0, &nc); s++) {
            float *row = buf + (size_t)i * (size_t)width + c0;
            if (unpack)
                memcpy(row, msg, (size_t)nc * sizeof(float));
            else
                memcpy(msg, row, (size_t)nc * sizeof(float));
            msg += nc;
        }
}

/* One all-gather round among the step's members: this member sends its columns of buf's n
 * rows to every other member and fills in theirs (member to member, one hop, messages of
 * about 1/n of the rows). */
static void exact_allgather(DistEngine *e, const Step *st, int round, const WireHdr *h0,
                            float *buf, int width, int n)
{
    static const char *what[R_COUNT] = {"head outputs", "Z rows", "FFN hidden slices",
                                        "X' rows"};
    static const int site[R_COUNT] = {W_GATHER, W_X1, W_Z, W_X2};
    static const int base[R_COUNT] = {WIRE_TAG_XCHG, WIRE_TAG_XSUM, WIRE_TAG_XCHG,
                                      WIRE_TAG_XSUM};
    const int l = st->layer, nm = st->n_members, me = e->tp->rank;
    const int *members = steps_members(&e->prog.prog, st);
    const int tag = base[round] + 2 * l + (round >= R_HIDDEN);
    const size_t hdr = e->sl.hdr;
    LayerRt *r = &e->lr[l];
    TransportReq *rq = e->ex.reqs;
    engine_hdr_put(e, e->ex.send, h0);
    transport_msg_stamp(e->tp, e->ex.send, l);
    pack_rows(e, l, round, me, buf, width, n, payload(e, e->ex.send), 0);
    const size_t sb = hdr + (size_t)n * round_floats(e, l, round, me) * sizeof(float);
    int nr = 0;
    for (int i = 0; i < nm; i++) {
        if (members[i] == me)
            continue;
        const size_t rb = hdr + (size_t)n * round_floats(e, l, round, members[i]) *
                                    sizeof(float);
        transport_irecv(e->tp, e->ex.recv + (size_t)i * e->ex.stride, rb, members[i], tag,
                        &rq[nr++]);
    }
    for (int i = 0; i < nm; i++)
        if (members[i] != me)
            transport_isend(e->tp, e->ex.send, sb, members[i], tag, &rq[nr++]);
    for (int i = 0, k = 0; i < nm; i++) {
        const int peer = members[i];
        if (peer == me)
            continue;
        unsigned char *msg = e->ex.recv + (size_t)i * e->ex.stride;
        transport_msg_take(e->tp, &rq[k++], msg,
                           hdr + (size_t)n * round_floats(e, l, round, peer) * sizeof(float),
                           peer, what[round], l, &r->ewma[site[round]]);
        engine_read_hdr(msg, l);
        pack_rows(e, l, round, peer, buf, width, n, payload(e, msg), 1);
    }
    for (int k = nm - 1; k < nr; k++)
        transport_wait(e->tp, &rq[k]);
}

/* ATTN: each part's heads straight into their place in head order. */
void engine_exact_attn(DistEngine *e, EngineWalk *w, const Step *st)
{
    const int l = st->layer;
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    const double t = time_now();
    const int qd = c->n_heads * c->head_dim, Q = config_q_per_kv(c);
    const float *x = payload(e, e->buf.xmsg);
    for (int k = 0; k < r->n_parts; k++) {
        const AttnPartW *p = &r->parts[k];
        float *out = e->buf.heads + (size_t)(p->unit * Q + p->q0) * (size_t)c->head_dim;
        transport_streamed(e->tp, engine_attn_part(e, l, k, x, &w->h, out, qd));
    }
    engine_timers(e, l)[T_ATTN] += time_now() - t;
}

/* An ALLGATHER round: the head outputs (HEADS), or the rows of what the step follows: Z's
 * (after PROJ), the FFN's hidden activations (after FFN), X''s (after FFN_DOWN). */
void engine_exact_round(DistEngine *e, EngineWalk *w, const Step *st)
{
    const ModelConfig *c = e->c;
    const double t = time_now();
    int round = R_HEADS;
    if (st->what != STEP_MSG_HEADS) {
        const StepWhat after = e->prog.prog.steps[steps_deps(&e->prog.prog, st)[0]].what;
        round = after == STEP_WORK_PROJ ? R_Z : after == STEP_WORK_FFN ? R_HIDDEN : R_X;
    }
    float *x = payload(e, e->buf.xmsg);
    float *buf[R_COUNT] = {e->buf.heads, x, e->ex.hidden, x};
    const int width[R_COUNT] = {c->n_heads * c->head_dim, c->dim, c->ffn_dim, c->dim};
    exact_allgather(e, st, round, &w->h, buf[round], width[round], w->h.n);
    engine_timers(e, st->layer)[round <= R_Z ? T_GATHER : T_BCAST] += time_now() - t;
}

/* PROJ: this member's rows of Z (in place: x's rows [d0, d1) become Z's). */
void engine_exact_proj(DistEngine *e, EngineWalk *w, const Step *st)
{
    LayerRt *r = &e->lr[st->layer];
    const double t = time_now();
    float *x = payload(e, e->buf.xmsg);
    model_proj_rows_n(e->c, &r->proj, &e->scratch, r->d0, x, e->buf.heads, x, w->h.n);
    transport_streamed(e->tp, (double)model_proj_bytes(e->c, &r->proj));
    engine_timers(e, st->layer)[T_PROJ] += time_now() - t;
}

/* FFN: the hidden activations of this member's slice (gate and up rows). */
void engine_exact_ffn(DistEngine *e, EngineWalk *w, const Step *st)
{
    LayerRt *r = &e->lr[st->layer];
    const double t = time_now();
    model_ffn_hidden_n(e->c, &r->ffn, &e->scratch, payload(e, e->buf.xmsg),
                       e->ex.hidden + r->ffn.f0, e->c->ffn_dim, w->h.n);
    engine_timers(e, st->layer)[T_FFN] += time_now() - t;
}

/* FFN_DOWN: this member's rows of X' (w_down's rows; in place over Z's). */
void engine_exact_down(DistEngine *e, EngineWalk *w, const Step *st)
{
    LayerRt *r = &e->lr[st->layer];
    const double t = time_now();
    float *x = payload(e, e->buf.xmsg);
    model_ffn_down_rows_n(e->c, &r->ffn, &e->scratch, x, e->ex.hidden, x, w->h.n);
    transport_streamed(e->tp, (double)model_ffn_bytes(e->c, &r->ffn));
    engine_timers(e, st->layer)[T_FFN] += time_now() - t;
}

/* Loads this member's share of exact SLICE layer l besides its attention parts: wo rows
 * [d0, d1) (and the whole bias bo, gpt2), the FFN's gate/up rows of its slice and w_down rows
 * [d0, d1).  -1 with err. */
int engine_exact_load(DistEngine *e, int l, hid_t file, const char *fname, char *err,
                      size_t errlen)
{
    const LayerPlan *lp = &e->plan->layers[l];
    const ModelConfig *c = e->c;
    LayerRt *r = &e->lr[l];
    const int me = e->tp->rank;
    if (!plan_exact_rows(e->plan, c, l, me, &r->d0, &r->d1))
        return 0;
    r->proj.layer = l;
    if (model_load_proj_rows(&r->proj.wo, c, file, fname, l, r->d0, r->d1, err, errlen) < 0)
        return -1;
    if (c->arch == ARCH_GPT2 &&
        model_load_proj_bias(&r->proj.bo, c, file, fname, l, err, errlen) < 0)
        return -1;
    e->stats.weight_bytes += model_proj_bytes(c, &r->proj);
    for (int k = 0; k < lp->n_slices; k++)
        if (lp->slices[k].rank == me) {
            r->is_ffn = 1;
            if (model_load_ffn_rows(&r->ffn, c, file, fname, l, lp->slices[k].f0,
                                    lp->slices[k].f1, r->d0, r->d1, err, errlen) < 0)
                return -1;
            e->stats.weight_bytes += model_ffn_bytes(c, &r->ffn);
        }
    return 0;
}

/* The all-gather buffers for passes of e->bmax rows (NULL unless the plan is exact). */
void engine_exact_alloc(DistEngine *e)
{
    if (e->plan->exchange != EXCHANGE_EXACT)
        return;
    const ModelConfig *c = e->c;
    const size_t W = (size_t)e->plan->n_workers, B = (size_t)e->bmax;
    size_t w = (size_t)c->n_heads * (size_t)c->head_dim;
    if ((size_t)c->ffn_dim > w)
        w = (size_t)c->ffn_dim;
    if ((size_t)c->dim > w)
        w = (size_t)c->dim;
    e->ex.stride = e->sl.hdr + B * w * sizeof(float);
    e->ex.send = xcalloc(e->ex.stride, 1);
    e->ex.recv = xcalloc((W + 1) * e->ex.stride, 1);
    e->ex.reqs = xcalloc(2 * (W + 1), sizeof(TransportReq));
    e->ex.hidden = xcalloc(B * (size_t)c->ffn_dim, sizeof(float));
}

void engine_exact_free(DistEngine *e)
{
    free(e->ex.send);
    free(e->ex.recv);
    free(e->ex.reqs);
    free(e->ex.hidden);
    e->ex.send = e->ex.recv = NULL;
    e->ex.reqs = NULL;
    e->ex.hidden = NULL;
}
