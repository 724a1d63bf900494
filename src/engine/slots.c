/* slots.c: several sequences per pass (dist_set_slots; --parallel's slots on several ranks).
 * Every rank that holds attention parts keeps a KV cache per slot: slot 0's are the parts'
 * own, slots 1.. have copies of the parts (the weights shared) with caches of their own,
 * resident as positions are written.  A pass's rows are the segments of its table (wire.h),
 * which every message of the engine carries after its header, so that whichever message
 * brings a pass to a rank brings its table too; the rows' attention (model_attn_part_
 * forward_segs) reads and writes only their own slot's caches, while every other piece of
 * the layer (projection, FFN, exchanges, LM head) works row by row as for one sequence.  So
 * each sequence's results are bit-identical to running it alone. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void engine_hdr_put(const DistEngine *e, unsigned char *msg, const WireHdr *h)
{
    memcpy(msg, h, sizeof *h);
    if (e->sl.n < 2)
        return;
    WireSeg *t = (WireSeg *)(void *)(msg + sizeof *h);
    memset(t, 0, e->sl.hdr - sizeof *h);
    if (h->cmd == WIRE_STEP)
        memcpy(t, e->sl.cur, (size_t)e->sl.n_cur * sizeof(WireSeg));
}

void engine_table_take(DistEngine *e, const unsigned char *msg, const WireHdr *h, int l)
{
    if (e->sl.n < 2 || h->cmd != WIRE_STEP)
        return;
    const WireSeg *t = (const WireSeg *)(const void *)(msg + sizeof *h);
    int rows = 0, k = 0;
    for (; k < e->sl.n && t[k].n > 0; k++) {
        const WireSeg s = t[k];
        CHECK(s.slot >= 0 && s.slot < e->sl.n && s.pos >= 0 && s.pos + s.n <= e->kv_cap,
              "layer %d: a segment of %d rows at position %d of slot %d (this rank holds %d "
              "slots of %d positions; protocol mismatch?)", l, s.n, s.pos, s.slot, e->sl.n,
              e->kv_cap);
        e->sl.cur[k] = s;
        rows += s.n;
    }
    CHECK(k > 0 && rows == h->n, "layer %d: a pass of %d rows whose segments hold %d", l, h->n,
          rows);
    e->sl.n_cur = k;
}

/* Slot s's copy of part k of layer l on this rank. */
static AttnPartW *slot_part(DistEngine *e, int l, int s, int k)
{
    LayerRt *r = &e->lr[l];
    return s == 0 ? &r->parts[k] : &r->slot_parts[(size_t)(s - 1) * (size_t)r->n_parts + (size_t)k];
}

double engine_attn_part(DistEngine *e, int l, int k, const float *x, const WireHdr *h,
                        float *out, int out_stride)
{
    AttnPartW *p = &e->lr[l].parts[k];
    if (e->sl.n < 2) {
        model_attn_part_forward_n(e->c, p, &e->scratch, x, h->pos, h->n, out, out_stride);
        return attn_stream_bytes(e->c, p, h->pos, h->n);
    }
    double bytes = (double)model_attn_part_bytes(e->c, p);
    for (int i = 0; i < e->sl.n_cur; i++) {
        const WireSeg s = e->sl.cur[i];
        e->sl.segs[i] = (AttnSeg){slot_part(e, l, s.slot, k), s.pos, s.n};
        bytes += attn_stream_bytes(e->c, p, s.pos, s.n) - (double)model_attn_part_bytes(e->c, p);
    }
    model_attn_part_forward_segs(e->c, &e->scratch, x, e->sl.segs, e->sl.n_cur, out,
                                 out_stride);
    return bytes;
}

void engine_slots_alloc(DistEngine *e)
{
    const int S = e->sl.n;
    e->sl.hdr = sizeof(WireHdr) + (size_t)wire_table_bytes(S);
    e->sl.cur = xcalloc((size_t)S, sizeof(WireSeg));
    e->sl.segs = xcalloc((size_t)S, sizeof(AttnSeg));
    e->sl.n_cur = 0;
    for (int l = 0; l < e->L && S > 1; l++) {
        LayerRt *r = &e->lr[l];
        if (r->n_parts == 0)
            continue;
        r->slot_parts = xcalloc((size_t)(S - 1) * (size_t)r->n_parts, sizeof(AttnPartW));
        for (int s = 1; s < S; s++)
            for (int k = 0; k < r->n_parts; k++) {
                AttnPartW *a = slot_part(e, l, s, k);
                *a = r->parts[k]; /* the weights are shared: the part owns them */
                model_attn_part_caches_new(e->c, a, a->kv_cap);
            }
    }
}

void engine_slots_free(DistEngine *e)
{
    for (int l = 0; l < e->L && e->lr; l++) {
        LayerRt *r = &e->lr[l];
        for (int s = 1; r->slot_parts && s < e->sl.n; s++)
            for (int k = 0; k < r->n_parts; k++)
                model_attn_part_caches_free(slot_part(e, l, s, k));
        free(r->slot_parts);
        r->slot_parts = NULL;
    }
    free(e->sl.cur);
    free(e->sl.segs);
    e->sl.cur = NULL;
    e->sl.segs = NULL;
}
