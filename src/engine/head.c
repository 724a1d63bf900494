/* head.c: the split LM head: the last layer's members compute the final norm and their rows
 * of logits (HEAD steps) and send them to the controller (the GATHER of logits), which
 * assembles the logits. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* The split LM head's group (collective over every rank), this member's rows and the
 * controller's layout; -1 with err when a member cannot load its rows (nothing is loaded
 * when err already holds an error). */
int engine_setup_head(DistEngine *e, hid_t file, const char *fname, char *err, size_t errlen)
{
    const Schedule *s = &e->sched;
    const ModelConfig *c = e->c;
    e->hd.comm = NULL;
    if (s->n_head == 0)
        return 0;
    e->hd.comm = transport_group_create(e->tp, s->head_members, s->n_head);
    const int me = e->tp->rank;
    if (me == 0) {
        engine_head_alloc(e);
        return 0;
    }
    for (int m = 1; m < s->n_head; m++)
        if (s->head_members[m] == me && !err[0]) {
            e->hd.v0 = s->head_v0[m];
            e->hd.v1 = s->head_v1[m];
            transport_exclusive(e->tp, 1);
            int rc = model_load_head_rows(&e->hd.rows, c, file, fname, e->hd.v0,
                                          e->hd.v1, err, errlen);
            transport_exclusive(e->tp, 0);
            if (rc < 0)
                return -1;
            e->stats.weight_bytes += model_qmat_bytes(&e->hd.rows.lm_head) + /* rows, final norm */
                               (c->arch == ARCH_GPT2 ? 2 : 1) * (size_t)c->dim * sizeof(float);
            engine_head_alloc(e);
        }
    return 0;
}

void engine_head_alloc(DistEngine *e)
{
    const Schedule *s = &e->sched;
    const size_t B = (size_t)e->bmax;
    if (!e->hd.comm)
        return;
    if (e->tp->rank == 0) {
        size_t total = 0;
        for (int m = 1; m < s->n_head; m++)
            total += e->sl.hdr + B * ((size_t)s->h_counts[m] - sizeof(WireHdr));
        free(e->hd.recv);
        free(e->hd.logits);
        e->hd.recv = xcalloc(total, 1);
        e->hd.logits = xcalloc(B * (size_t)e->c->vocab_size, sizeof(float));
        free(e->hd.counts_n);
        free(e->hd.displs_n);
        e->hd.counts_n = xcalloc((size_t)s->n_head, sizeof(int));
        e->hd.displs_n = xcalloc((size_t)s->n_head, sizeof(int));
    } else if (e->hd.v1 > e->hd.v0) {
        free(e->hd.send);
        e->hd.send = xcalloc(e->sl.hdr + B * (size_t)(e->hd.v1 - e->hd.v0) *
                                                 sizeof(float), 1);
    }
}

/* HEAD on a member: the final norm and this rank's rows of logits of X' (the pass's n rows)
 * into its message, [n][rows]. */
void engine_head_rows(DistEngine *e, EngineWalk *w, const Step *st)
{
    (void)st;
    const double t = time_now();
    const int rows = e->hd.v1 - e->hd.v0;
    model_logits_rows_n(e->c, &e->hd.rows, &e->scratch, payload(e, e->buf.xmsg), rows,
                        payload(e, e->hd.send), w->h.n);
    transport_streamed(e->tp, (double)model_qmat_bytes(&e->hd.rows.lm_head));
    engine_timers(e, e->L - 1)[T_BCAST] += time_now() - t;
}

/* GATHER of logits on a member: its rows to the controller. */
void engine_logits_send(DistEngine *e, EngineWalk *w, const Step *st)
{
    (void)st;
    const double t = time_now();
    const int rows = e->hd.v1 - e->hd.v0;
    engine_hdr_put(e, e->hd.send, &w->h);
    transport_msg_stamp(e->tp, e->hd.send, e->L);
    const int bytes = (int)(e->sl.hdr + (size_t)w->h.n * (size_t)rows * sizeof(float));
    TransportReq req;
    transport_igatherv(e->tp, e->hd.comm, e->hd.send, (size_t)bytes, NULL, NULL, NULL, &req);
    transport_wait(e->tp, &req);
    engine_timers(e, e->L - 1)[T_BCAST] += time_now() - t;
}

/* Controller: the members' rows of logits of a pass of n rows, waited out on the emulated
 * links, into rows row0 .. row0+n-1 of e->hd.logits. */
void engine_head_recv(DistEngine *e, int n, int row0)
{
    TransportReq req;
    char none = 0;
    const Schedule *s = &e->sched;
    /* the schedule's counts are of one-row messages with a bare WireHdr */
    const size_t hdr = e->sl.hdr, h0 = sizeof(WireHdr), V = (size_t)e->c->vocab_size;
    int off = 0;
    for (int m = 0; m < s->n_head; m++) {
        e->hd.counts_n[m] = m == 0 ? 0 : (int)(hdr + (size_t)n * ((size_t)s->h_counts[m] - h0));
        e->hd.displs_n[m] = off;
        off += e->hd.counts_n[m];
    }
    transport_igatherv(e->tp, e->hd.comm, &none, 0, e->hd.recv, e->hd.counts_n, e->hd.displs_n,
                       &req);
    LayerRt *r = &e->lr[e->L];
    transport_msg_gathered(e->tp, &req, e->hd.recv, e->hd.counts_n, e->hd.displs_n, s->n_head,
                           e->plan->layers[e->L - 1].ffn_rank, "logits", e->L, &r->ewma[W_IN]);
    for (int m = 1; m < s->n_head; m++) {
        const unsigned char *msg = e->hd.recv + e->hd.displs_n[m];
        engine_read_hdr(msg, e->L);
        const size_t rows = ((size_t)s->h_counts[m] - h0) / sizeof(float);
        for (int i = 0; i < n; i++)
            memcpy(e->hd.logits + (size_t)(row0 + i) * V + s->head_v0[m],
                   msg + hdr + (size_t)i * rows * sizeof(float), rows * sizeof(float));
    }
}

void engine_logits_take(DistEngine *e, EngineWalk *w, const Step *st)
{
    (void)st;
    engine_head_recv(e, w->pass->n, w->pass->row0);
}
