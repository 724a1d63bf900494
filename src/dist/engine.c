/* engine.c: controller and worker sides of the distributed forward pass (see dist.h).
 *
 * The input of layer l is held by the ranks that produced it ("holders": the controller for
 * layer 0, the FFN rank of a PIPE layer, every member of a SLICE layer).  When the ranks that
 * consume it (attention and projection ranks, or the members of a SLICE layer) are not all
 * holders, one holder broadcasts it on the layer's input communicator.  Every message starts
 * with a WireHdr, which carries the stop command down the pipeline and the send time used
 * by link emulation. */
#include "dist.h"
#include "engine_internal.h"

#include "kernels.h"
#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

static const char *timer_names[T_COUNT] = {"attention_ms", "gather_ms", "projection_ms",
                                            "ffn_ms", "broadcast_ms", "z_transfer_ms"};

/* Decides a speculation at the FFN rank of layer l (r = ||FFN(Z)|| / ||Z||); returns the
 * header flags for X'.  Logged at debug level. */
static int spec_decide(DistEngine *e, int l, float ratio, int s_out)
{
    int flags = 0, ok = ratio < e->tolerance;
    if (s_out) {
        e->spec_tried[l]++;
        if (ok) {
            e->spec_kept[l]++;
            flags |= WIRE_FLAG_ACCEPT;
        }
        LOG_DEBUG("speculation layer %d->%d: r = %.5f, tolerance %.4f: %s", l, l + 1,
                  (double)ratio, (double)e->tolerance, ok ? "kept" : "re-executed");
    }
    if (e->adaptive && e->eligible[l]) {
        /* Moving average with hysteresis around --min-acceptance. */
        e->acc_ewma[l] = 0.9 * e->acc_ewma[l] + 0.1 * ok;
        int next = e->spec[l];
        if (next && e->acc_ewma[l] < e->min_acceptance - 0.05)
            next = 0;
        else if (!next && e->acc_ewma[l] >= e->min_acceptance + 0.05)
            next = 1;
        e->spec_pending[l] = (unsigned char)next;
        flags |= WIRE_FLAG_SPEC_ON | (next ? WIRE_FLAG_SPEC_NEXT : 0);
    }
    return flags;
}

static float *payload(unsigned char *msg) { return (float *)(void *)(msg + sizeof(WireHdr)); }

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Sorted unique copy of v[0..n) into out; returns the count. */
static int uniq(int *out, const int *v, int n)
{
    int *t = xmalloc(((size_t)n + 1) * sizeof(int));
    memcpy(t, v, (size_t)n * sizeof(int));
    qsort(t, (size_t)n, sizeof(int), cmp_int);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || t[i] != t[i - 1])
            out[m++] = t[i];
    free(t);
    return m;
}

static int contains(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

/* Ranks that hold the output of layer l-1 (the input of layer l); returns the count. */
static int holders(const Plan *p, int l, int *out)
{
    if (l == 0) {
        out[0] = 0;
        return 1;
    }
    const LayerPlan *lp = &p->layers[l - 1];
    if (lp->mode == LAYER_SLICE)
        return plan_slice_members(p, l - 1, out);
    out[0] = lp->ffn_rank;
    return 1;
}

/* Ranks that need the input of layer l (l == n_layers: the controller). */
static int consumers(const Plan *p, int l, int *out)
{
    if (l == p->n_layers) {
        out[0] = 0;
        return 1;
    }
    const LayerPlan *lp = &p->layers[l];
    if (lp->mode == LAYER_SLICE)
        return plan_slice_members(p, l, out);
    int *t = xmalloc(((size_t)lp->n_parts + 1) * sizeof(int)), n = 0;
    for (int k = 0; k < lp->n_parts; k++)
        t[n++] = lp->parts[k].rank;
    t[n++] = lp->proj_rank;
    n = uniq(out, t, n);
    free(t);
    return n;
}

/* Input communicator members of layer l: [root, other consumers...]; 0 when not needed. */
static int input_members(const Plan *p, int l, int *out, int *buf_h, int *buf_c)
{
    int nh = holders(p, l, buf_h), nc = consumers(p, l, buf_c), all = 1;
    for (int i = 0; i < nc; i++)
        all &= contains(buf_h, nh, buf_c[i]);
    if (all)
        return 0;
    int root = l == 0 ? 0 : p->layers[l - 1].ffn_rank, n = 0;
    out[n++] = root;
    for (int i = 0; i < nc; i++)
        if (buf_c[i] != root)
            out[n++] = buf_c[i];
    return n;
}

int dist_hops_per_token(const Plan *p)
{
    size_t cap = (size_t)p->n_workers + 2 + 64;
    for (int l = 0; l < p->n_layers; l++)
        cap += (size_t)p->layers[l].n_parts;
    int *a = xmalloc(cap * sizeof(int)), *b = xmalloc(cap * sizeof(int));
    int *m = xmalloc(cap * sizeof(int));
    int hops = 0;
    for (int l = 0; l <= p->n_layers; l++) {
        hops += input_members(p, l, m, a, b) > 1;
        if (l == p->n_layers)
            break;
        const LayerPlan *lp = &p->layers[l];
        if (lp->mode == LAYER_SLICE) {
            hops += lp->n_slices > 1 ? 2 : 0; /* two direct exchanges of partial sums */
            continue;
        }
        int g = 0;
        for (int k = 0; k < lp->n_parts; k++)
            g |= lp->parts[k].rank != lp->proj_rank;
        hops += g + (lp->proj_rank != lp->ffn_rank);
    }
    free(a);
    free(b);
    free(m);
    return hops;
}

/* Builds the communicators of layer l (collective over world) and this rank's roles. */
void engine_setup_layer(DistEngine *e, int l)
{
    const Plan *p = e->plan;
    const int me = e->cm->rank;
    LayerRt *r = &e->lr[l];
    size_t cap = (size_t)p->n_workers + 2 + (l < p->n_layers ? (size_t)p->layers[l].n_parts : 0);
    int *mem = xmalloc(cap * sizeof(int)), *bh = xmalloc(cap * sizeof(int));
    int *bc = xmalloc(cap * sizeof(int));
    int n_in = input_members(p, l, mem, bh, bc);
    int nc = consumers(p, l, bc);
    r->consumer = contains(bc, nc, me);
    r->in_size = n_in;
    r->in_root = n_in > 0 && mem[0] == me;
    r->in_peer = n_in > 0 ? mem[0] : -1;
    r->in_comm = n_in > 1 ? comm_create(mem, n_in) : MPI_COMM_NULL;
    if (l < p->n_layers) {
        const LayerPlan *lp = &p->layers[l];
        r->mode = lp->mode;
        r->proj_rank = lp->proj_rank;
        r->ffn_rank = lp->ffn_rank;
        free(r->members);
        free(r->g_members);
        r->members = r->g_members = NULL;
        if (lp->mode == LAYER_SLICE) {
            r->members = xmalloc((size_t)lp->n_slices * sizeof(int));
            r->n_members = plan_slice_members(p, l, r->members);
        } else {
            int n = 0;
            bc[n++] = lp->proj_rank;
            for (int k = 0; k < lp->n_parts; k++)
                if (lp->parts[k].rank != lp->proj_rank && !contains(bc, n, lp->parts[k].rank))
                    bc[n++] = lp->parts[k].rank;
            qsort(bc + 1, (size_t)n - 1, sizeof(int), cmp_int);
            r->g_size = n;
            r->g_members = xmalloc((size_t)n * sizeof(int));
            memcpy(r->g_members, bc, (size_t)n * sizeof(int));
            r->g_comm = n > 1 ? comm_create(bc, n) : MPI_COMM_NULL;
            r->is_proj = lp->proj_rank == me;
            r->is_ffn = lp->ffn_rank == me;
        }
    }
    free(mem);
    free(bh);
    free(bc);
}

/* Root of a PIPE layer's gather: where each member's bytes land and where each part goes. */
void engine_setup_gather_layout(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const LayerPlan *lp = &e->plan->layers[l];
    const int hd = e->c->head_dim, Q = config_q_per_kv(e->c);
    r->g_counts = xcalloc((size_t)r->g_size, sizeof(int));
    r->g_displs = xcalloc((size_t)r->g_size, sizeof(int));
    r->g_part_dst = xcalloc((size_t)lp->n_parts, sizeof(int));
    r->g_part_src = xcalloc((size_t)lp->n_parts, sizeof(int));
    r->g_part_len = xcalloc((size_t)lp->n_parts, sizeof(int));
    int off = 0, np = 0;
    for (int m = 0; m < r->g_size; m++) {
        r->g_displs[m] = off;
        off += (int)sizeof(WireHdr);
        for (int k = 0; k < lp->n_parts; k++)
            if (lp->parts[k].rank == r->g_members[m]) {
                int len = (lp->parts[k].q1 - lp->parts[k].q0) * hd;
                r->g_part_dst[np] = (lp->parts[k].unit * Q + lp->parts[k].q0) * hd;
                r->g_part_src[np] = off;
                r->g_part_len[np++] = len;
                off += len * (int)sizeof(float);
            }
        r->g_counts[m] = off - r->g_displs[m];
    }
    r->g_n_parts = np;
}

/* Loads this rank's slices of layer l; -1 with err. */
static int load_layer(DistEngine *e, int l, hid_t file, const char *fname, int kv_cap,
                      char *err, size_t errlen)
{
    const LayerPlan *lp = &e->plan->layers[l];
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    const int me = e->cm->rank, hd = c->head_dim, Q = config_q_per_kv(c);
    for (int k = 0; k < lp->n_parts; k++)
        r->n_parts += lp->parts[k].rank == me;
    r->parts = xcalloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof(AttnPartW));
    r->wo_cols = xcalloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof(QMat));
    /* SLICE, quantized wo: a run of this rank's parts with adjacent columns shares one
     * block-aligned column slice of wo, held by its first part (the others' stay empty). */
    const int merge = lp->mode == LAYER_SLICE && config_wkind_block(c, WKIND_WO) > 1;
    for (int k = 0, j = 0; k < lp->n_parts; k++) {
        const AttnPart *p = &lp->parts[k];
        if (p->rank != me)
            continue;
        if (model_load_attn_part(&r->parts[j], c, file, fname, l, p->unit, p->q0, p->q1, kv_cap,
                                 err, errlen) < 0)
            return -1;
        e->weight_bytes += model_attn_part_bytes(c, &r->parts[j]);
        int ncols = (p->q1 - p->q0) * hd, col0 = (p->unit * Q + p->q0) * hd;
        if (lp->mode == LAYER_SLICE &&
            !(merge && k > 0 && lp->parts[k - 1].rank == me)) {
            int run = ncols;
            for (int m = k + 1; merge && m < lp->n_parts && lp->parts[m].rank == me; m++)
                run += (lp->parts[m].q1 - lp->parts[m].q0) * hd;
            if (model_load_proj_cols(&r->wo_cols[j], c, file, fname, l, col0, run, err,
                                     errlen) < 0)
                return -1;
            e->weight_bytes += model_qmat_bytes(&r->wo_cols[j]);
        }
        r->my_floats += ncols;
        j++;
    }
    if (lp->mode == LAYER_SLICE) {
        for (int k = 0; k < lp->n_slices; k++)
            if (lp->slices[k].rank == me) {
                r->is_ffn = 1;
                if (model_load_ffn(&r->ffn, c, file, fname, l, lp->slices[k].f0,
                                   lp->slices[k].f1, err, errlen) < 0)
                    return -1;
                e->weight_bytes += model_ffn_bytes(c, &r->ffn);
            }
        if (c->arch == ARCH_GPT2 && r->n_members > 0 && r->members[0] == me) {
            /* The projection bias is added once, by the first member. */
            if (model_load_proj_bias(&r->proj.bo, c, file, fname, l, err, errlen) < 0)
                return -1;
        }
        return 0;
    }
    if (r->is_proj) {
        if (model_load_proj(&r->proj, c, file, fname, l, err, errlen) < 0)
            return -1;
        e->weight_bytes += model_proj_bytes(c, &r->proj);
        engine_setup_gather_layout(e, l);
    }
    if (r->is_ffn) {
        if (model_load_ffn(&r->ffn, c, file, fname, l, 0, c->ffn_dim, err, errlen) < 0)
            return -1;
        e->weight_bytes += model_ffn_bytes(c, &r->ffn);
    }
    return 0;
}

static WireHdr read_hdr(const unsigned char *msg, int layer);

/* The split LM head's communicator (collective over world), this member's rows and the
 * controller's layout; -1 with err when a member cannot load its rows (nothing is loaded
 * when err already holds an error). */
static int setup_head(DistEngine *e, hid_t file, const char *fname, char *err, size_t errlen)
{
    const Plan *p = e->plan;
    const ModelConfig *c = e->c;
    e->head_comm = MPI_COMM_NULL;
    if (!p->head_split)
        return 0;
    int *mem = xmalloc(((size_t)p->n_workers + 1) * sizeof(int)), n = 0, v0, v1;
    mem[n++] = 0;
    for (int r = 1; r <= p->n_workers; r++)
        if (plan_head_rows(p, c, r, &v0, &v1))
            mem[n++] = r;
    e->head_size = n;
    e->head_comm = comm_create(mem, n);
    const int me = e->cm->rank;
    if (me == 0) {
        e->h_counts = xcalloc((size_t)n, sizeof(int));
        e->h_displs = xcalloc((size_t)n, sizeof(int));
        e->h_v0 = xcalloc((size_t)n, sizeof(int));
        int off = 0;
        for (int m = 1; m < n; m++) {
            plan_head_rows(p, c, mem[m], &v0, &v1);
            e->h_v0[m] = v0;
            e->h_displs[m] = off;
            e->h_counts[m] = (int)(sizeof(WireHdr) + (size_t)(v1 - v0) * sizeof(float));
            off += e->h_counts[m];
        }
        e->hrecv = xcalloc((size_t)off, 1);
        e->logits = xcalloc((size_t)c->vocab_size, sizeof(float));
    } else if (!err[0] && plan_head_rows(p, c, me, &e->head_v0, &e->head_v1)) {
        if (model_load_head_rows(&e->head_rows, c, file, fname, e->head_v0, e->head_v1, err,
                                 errlen) < 0) {
            free(mem);
            return -1;
        }
        e->weight_bytes += model_qmat_bytes(&e->head_rows.lm_head) + /* rows, final norm */
                           (c->arch == ARCH_GPT2 ? 2 : 1) * (size_t)c->dim * sizeof(float);
        e->hsend = xcalloc(sizeof(WireHdr) + (size_t)(e->head_v1 - e->head_v0) * sizeof(float),
                           1);
    }
    free(mem);
    return 0;
}

/* Member: the final norm and this rank's rows of logits of X' (x), sent to the controller. */
static void head_send(DistEngine *e, const WireHdr *h, const float *x)
{
    const int rows = e->head_v1 - e->head_v0;
    model_logits_rows(e->c, &e->head_rows, &e->scratch, x, rows,
                      (float *)(void *)(e->hsend + sizeof(WireHdr)));
    WireHdr gh = *h;
    gh.layer = e->L;
    comm_stamp(e->cm, &gh);
    memcpy(e->hsend, &gh, sizeof gh);
    const int bytes = (int)(sizeof gh + (size_t)rows * sizeof(float));
    MPI_Request req;
    MPI_CHECK(MPI_Igatherv(e->hsend, bytes, MPI_BYTE, NULL, NULL, NULL, MPI_BYTE, 0,
                           e->head_comm, &req));
    e->cm->bytes_sent += (uint64_t)bytes;
    e->cm->msgs_sent++;
    comm_wait(e->cm, &req);
}

/* Controller: the members' rows of logits, waited out on the emulated links, into e->logits. */
static void head_recv(DistEngine *e)
{
    MPI_Request req;
    char none = 0;
    MPI_CHECK(MPI_Igatherv(&none, 0, MPI_BYTE, e->hrecv, e->h_counts, e->h_displs, MPI_BYTE, 0,
                           e->head_comm, &req));
    LayerRt *r = &e->lr[e->L];
    comm_wait_link(e->cm, &req, e->plan->layers[e->L - 1].ffn_rank, "logits", e->L,
                   &r->ewma[W_IN]);
    for (int m = 1; m < e->head_size; m++) {
        const unsigned char *msg = e->hrecv + e->h_displs[m];
        WireHdr mh = read_hdr(msg, e->L);
        comm_deliver(e->cm, &mh, (size_t)e->h_counts[m]);
        memcpy(e->logits + e->h_v0[m], msg + sizeof mh,
               (size_t)e->h_counts[m] - sizeof mh);
    }
}

int dist_setup(DistEngine **out, Comm *cm, const ModelConfig *c, const Plan *plan,
               hid_t file, const char *fname, int kv_cap)
{
    DistEngine *e = xcalloc(1, sizeof *e);
    e->cm = cm;
    e->c = c;
    plan_copy(&e->plan_own, plan);
    e->plan = &e->plan_own;
    plan = e->plan;
    e->fname = xstrdup(fname);
    e->kv_cap = kv_cap;
    e->L = c->n_layers;
    e->lr = xcalloc((size_t)e->L + 1, sizeof(LayerRt));
    for (int l = 0; l <= e->L; l++)
        engine_setup_layer(e, l);
    char err[512] = "";
    if (cm->rank > 0)
        for (int l = 0; l < e->L; l++)
            if (load_layer(e, l, file, fname, kv_cap, err, sizeof err) < 0)
                break; /* roles (e->active) are set by engine_refresh_roles below */
    const size_t qd = (size_t)c->n_heads * (size_t)c->head_dim;
    const size_t hdr = sizeof(WireHdr);
    e->msg_bytes = hdr + (size_t)c->dim * sizeof(float);
    e->xmsg = xcalloc(e->msg_bytes, 1);
    e->zmsg = xcalloc(e->msg_bytes, 1);
    e->gbuf = xcalloc(hdr + qd * sizeof(float), 1);
    e->staging = xcalloc(((size_t)plan->n_workers + 2) * hdr + qd * sizeof(float), 1);
    e->xsend = xcalloc(e->msg_bytes, 1);
    e->xrecv = xcalloc(((size_t)plan->n_workers + 1) * e->msg_bytes, 1);
    e->wire_bytes = hdr + (size_t)c->dim * sizeof(uint16_t);
    e->wsend = xcalloc(e->wire_bytes, 1);
    e->wrecv = xcalloc(((size_t)plan->n_workers + 1) * e->wire_bytes, 1);
    e->heads = xcalloc(qd, sizeof(float));
    e->acc = xcalloc((size_t)c->dim, sizeof(float));
    e->timers = xcalloc((size_t)e->L * T_COUNT, sizeof(double));
    e->eligible = xcalloc((size_t)e->L, 1);
    e->spec = xcalloc((size_t)e->L, 1);
    e->spec_pending = xcalloc((size_t)e->L, 1);
    e->zspec = xcalloc(e->msg_bytes, 1);
    e->acc_ewma = xcalloc((size_t)e->L, sizeof(double));
    e->spec_tried = xcalloc((size_t)e->L, sizeof(long));
    e->spec_kept = xcalloc((size_t)e->L, sizeof(long));
    e->spec_attn_s = xcalloc((size_t)e->L, sizeof(double));
    e->ffn_s_spec = xcalloc((size_t)e->L, sizeof(double));
    engine_refresh_roles(e);
    model_scratch_init(&e->scratch, c, kv_cap);
    setup_head(e, file, fname, err, sizeof err); /* collective: every rank, error or not */
    *out = e;
    if (comm_agree_errors(cm, MPI_COMM_WORLD, err)) {
        dist_free(e);
        *out = NULL;
        return -1;
    }
    return 0;
}

void engine_refresh_roles(DistEngine *e)
{
    const Plan *plan = e->plan;
    e->active = 0;
    for (int l = 0; l < e->L; l++) {
        e->active |= e->cm->rank > 0 && plan_rank_in_layer(plan, l, e->cm->rank);
        e->eligible[l] = 0;
        if (l + 1 < e->L) {
            const LayerPlan *a = &plan->layers[l], *b = &plan->layers[l + 1];
            e->eligible[l] = a->mode == LAYER_PIPE && b->mode == LAYER_PIPE &&
                             a->proj_rank == a->ffn_rank && e->lr[l + 1].in_size > 1;
        }
        e->spec[l] &= e->eligible[l];
        e->spec_pending[l] &= e->eligible[l];
    }
}

void engine_teardown_layer_comms(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    if (r->in_comm != MPI_COMM_NULL)
        MPI_Comm_free(&r->in_comm);
    if (r->g_comm != MPI_COMM_NULL)
        MPI_Comm_free(&r->g_comm);
    r->in_comm = r->g_comm = MPI_COMM_NULL;
    free(r->g_counts);
    free(r->g_displs);
    free(r->g_part_dst);
    free(r->g_part_src);
    free(r->g_part_len);
    r->g_counts = r->g_displs = r->g_part_dst = r->g_part_src = r->g_part_len = NULL;
}

void dist_free(DistEngine *e)
{
    if (!e)
        return;
    for (int l = 0; l <= e->L; l++) {
        LayerRt *r = &e->lr[l];
        engine_teardown_layer_comms(e, l);
        free(r->g_members);
        for (int k = 0; k < r->n_parts; k++) {
            model_free_attn_part(&r->parts[k]);
            model_qmat_free(&r->wo_cols[k]);
        }
        free(r->parts);
        free(r->wo_cols);
        free(r->members);
        model_free_proj(&r->proj);
        model_free_ffn(&r->ffn);
    }
    free(e->lr);
    free(e->xmsg);
    free(e->zmsg);
    free(e->gbuf);
    free(e->staging);
    free(e->xsend);
    free(e->xrecv);
    free(e->wsend);
    free(e->wrecv);
    free(e->heads);
    free(e->acc);
    free(e->timers);
    free(e->eligible);
    free(e->spec);
    free(e->spec_pending);
    free(e->zspec);
    free(e->acc_ewma);
    free(e->spec_tried);
    free(e->spec_kept);
    free(e->spec_attn_s);
    free(e->ffn_s_spec);
    model_scratch_free(&e->scratch);
    if (e->head_comm != MPI_COMM_NULL)
        MPI_Comm_free(&e->head_comm);
    model_free_head(&e->head_rows);
    free(e->hsend);
    free(e->hrecv);
    free(e->h_counts);
    free(e->h_displs);
    free(e->h_v0);
    free(e->logits);
    plan_free(&e->plan_own);
    free(e->fname);
    free(e->mem.devices);
    free(e->mem.lat_ms);
    free(e->mem.peak);
    json_decref(e->mem.records);
    free(e);
}

static WireHdr read_hdr(const unsigned char *msg, int layer)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    CHECK(h.magic == WIRE_MAGIC, "layer %d: message with a bad magic 0x%08x (protocol "
          "mismatch between ranks?)", layer, h.magic);
    CHECK((h.cmd & 0xff) == WIRE_STEP || (h.cmd & 0xff) == WIRE_STOP ||
              (h.cmd & 0xff) == WIRE_REPLAN,
          "layer %d: unknown command %d", layer, h.cmd);
    return h;
}

/* Broadcast of a pipeline message on layer l's input communicator (root sends, others
 * receive and wait out the emulated link). */
static void bcast_input(DistEngine *e, int l, unsigned char *msg)
{
    LayerRt *r = &e->lr[l];
    MPI_Request req;
    if (r->in_root) {
        WireHdr h;
        memcpy(&h, msg, sizeof h);
        comm_stamp(e->cm, &h);
        memcpy(msg, &h, sizeof h);
    }
    MPI_CHECK(MPI_Ibcast(msg, (int)e->msg_bytes, MPI_BYTE, 0, r->in_comm, &req));
    if (r->in_root) {
        e->cm->bytes_sent += e->msg_bytes * (uint64_t)(r->in_size - 1);
        e->cm->msgs_sent += (uint64_t)(r->in_size - 1);
        comm_wait(e->cm, &req);
        return;
    }
    comm_wait_link(e->cm, &req, r->in_peer, "layer input", l, &r->ewma[W_IN]);
    WireHdr h = read_hdr(msg, l);
    comm_deliver(e->cm, &h, e->msg_bytes);
}

/* SLICE: exchanges this rank's partial sum (xsend) with every member directly and adds all
 * partials in member order to base (in place), so every member gets identical bits. */
static void exchange_partials(DistEngine *e, int l, int phase, float *base)
{
    LayerRt *r = &e->lr[l];
    const int n = r->n_members, me = e->cm->rank, tag = WIRE_TAG_XCHG + 2 * l + phase;
    const int dim = e->c->dim;
    MPI_Request *rq = xmalloc(2 * (size_t)n * sizeof(MPI_Request));
    int nr = 0;
    WireHdr h;
    memcpy(&h, e->xsend, sizeof h);
    comm_stamp(e->cm, &h);
    h.layer = l;
    memcpy(e->xsend, &h, sizeof h);
    /* f16: the message carries the halves; this member's own partial is rounded the same
     * way, so that every member adds identical values. */
    const size_t wb = e->wire16 ? e->wire_bytes : e->msg_bytes;
    unsigned char *sbuf = e->wire16 ? e->wsend : e->xsend;
    unsigned char *rbuf = e->wire16 ? e->wrecv : e->xrecv;
    if (e->wire16) {
        uint16_t *half = (uint16_t *)(void *)(e->wsend + sizeof h);
        memcpy(e->wsend, &h, sizeof h);
        kernels_f32_to_f16(half, payload(e->xsend), dim);
        kernels_f16_to_f32(payload(e->xsend), half, dim);
    }
    for (int i = 0; i < n; i++) {
        if (r->members[i] == me)
            continue;
        MPI_CHECK(MPI_Irecv(rbuf + (size_t)i * wb, (int)wb, MPI_BYTE,
                            r->members[i], tag, MPI_COMM_WORLD, &rq[nr++]));
    }
    for (int i = 0; i < n; i++) {
        if (r->members[i] == me)
            continue;
        MPI_CHECK(MPI_Isend(sbuf, (int)wb, MPI_BYTE, r->members[i], tag,
                            MPI_COMM_WORLD, &rq[nr++]));
        e->cm->bytes_sent += wb;
        e->cm->msgs_sent++;
    }
    for (int i = 0, k = 0; i < n; i++) {
        if (r->members[i] == me)
            continue;
        comm_wait_link(e->cm, &rq[k++], r->members[i], phase ? "FFN partial sums" :
                       "projection partial sums", l, &r->ewma[phase ? W_X2 : W_X1]);
        WireHdr hi = read_hdr(rbuf + (size_t)i * wb, l);
        comm_deliver(e->cm, &hi, wb);
        if (e->wire16)
            kernels_f16_to_f32(payload(e->xrecv + (size_t)i * e->msg_bytes),
                               (const uint16_t *)(const void *)(rbuf + (size_t)i * wb +
                                                                sizeof hi), dim);
    }
    for (int k = n - 1; k < nr; k++)
        comm_wait(e->cm, &rq[k]);
    for (int i = 0; i < n; i++) {
        const float *p = r->members[i] == me ? payload(e->xsend)
                                             : payload(e->xrecv + (size_t)i * e->msg_bytes);
        kernels_add(base, p, dim);
    }
    free(rq);
}

/* One SLICE layer on this member; returns 1 if the message was a stop. */
static int worker_slice_layer(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    double *tm = e->timers + (size_t)l * T_COUNT, t;
    if (r->in_comm != MPI_COMM_NULL && !r->in_root) {
        t = time_now();
        bcast_input(e, l, e->xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    WireHdr h = read_hdr(e->xmsg, l);
    if (h.cmd != WIRE_STEP)
        goto forward;
    float *x = payload(e->xmsg), *part = payload(e->xsend);
    t = time_now();
    memset(part, 0, (size_t)c->dim * sizeof(float));
    /* A run of parts sharing one slice of wo (load_layer) writes its heads side by side. */
    for (int k = 0, run = 0, off = 0; k < r->n_parts; k++) {
        if (r->wo_cols[k].data) {
            run = k;
            off = 0;
        }
        model_attn_part_forward(c, &r->parts[k], &e->scratch, x, h.pos, e->heads + off);
        off += (r->parts[k].q1 - r->parts[k].q0) * c->head_dim;
        if (k + 1 == r->n_parts || r->wo_cols[k + 1].data) {
            model_proj_partial(c, &e->scratch, &r->wo_cols[run], e->heads, off, e->acc);
            kernels_add(part, e->acc, c->dim);
        }
    }
    if (r->proj.bo)
        kernels_add(part, r->proj.bo, c->dim);
    tm[T_ATTN] += time_now() - t;
    memcpy(e->xsend, &h, sizeof h);
    t = time_now();
    exchange_partials(e, l, 0, x); /* x becomes Z */
    tm[T_GATHER] += time_now() - t;
    t = time_now();
    model_ffn_delta(c, &r->ffn, &e->scratch, x, part);
    tm[T_FFN] += time_now() - t;
    t = time_now();
    exchange_partials(e, l, 1, x); /* x becomes X' */
    tm[T_BCAST] += time_now() - t;
forward:
    memcpy(e->xmsg, &h, sizeof h);
    if (l == e->L - 1 && e->hsend && h.cmd == WIRE_STEP) { /* split LM head: logits go */
        t = time_now();
        head_send(e, &h, x);
        tm[T_BCAST] += time_now() - t;
        return h.cmd & 0xff;
    }
    if (l + 1 <= e->L && e->lr[l + 1].in_root && e->lr[l + 1].in_comm != MPI_COMM_NULL) {
        t = time_now();
        bcast_input(e, l + 1, e->xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    return h.cmd & 0xff;
}

/* Computes this rank's attention parts of layer l on input x into gbuf's payload. */
static void attn_parts(DistEngine *e, int l, const float *x, int pos)
{
    LayerRt *r = &e->lr[l];
    float *mine = payload(e->gbuf);
    double t = time_now();
    for (int k = 0, off = 0; k < r->n_parts; k++) {
        model_attn_part_forward(e->c, &r->parts[k], &e->scratch, x, pos, mine + off);
        off += (r->parts[k].q1 - r->parts[k].q0) * e->c->head_dim;
    }
    e->timers[(size_t)l * T_COUNT + T_ATTN] += time_now() - t;
}

/* Posts this rank's contribution to layer l's gather of head outputs. */
static void gather_post(DistEngine *e, int l, const WireHdr *h, MPI_Request *req)
{
    LayerRt *r = &e->lr[l];
    WireHdr gh = *h;
    gh.layer = l;
    comm_stamp(e->cm, &gh);
    memcpy(e->gbuf, &gh, sizeof gh);
    int bytes = (int)sizeof(WireHdr) + r->my_floats * (int)sizeof(float);
    MPI_CHECK(MPI_Igatherv(e->gbuf, bytes, MPI_BYTE, e->staging, r->g_counts, r->g_displs,
                           MPI_BYTE, 0, r->g_comm, req));
    if (!r->is_proj) {
        e->cm->bytes_sent += (uint64_t)bytes;
        e->cm->msgs_sent++;
    }
}

/* Completes the gather; at the projection rank, waits out the emulated links and assembles
 * the head outputs in head order into e->heads. */
static void gather_finish(DistEngine *e, int l, MPI_Request *req)
{
    LayerRt *r = &e->lr[l];
    const unsigned char *src = e->gbuf;
    double t = time_now();
    if (r->g_comm != MPI_COMM_NULL) {
        if (!r->is_proj) {
            comm_wait(e->cm, req);
        } else {
            comm_wait_link(e->cm, req, r->g_members[r->g_size - 1], "head outputs", l,
                           &r->ewma[W_GATHER]);
            for (int m = 1; m < r->g_size; m++) {
                WireHdr mh = read_hdr(e->staging + r->g_displs[m], l);
                comm_deliver(e->cm, &mh, (size_t)r->g_counts[m]);
            }
        }
        src = e->staging;
    }
    e->timers[(size_t)l * T_COUNT + T_GATHER] += time_now() - t;
    if (r->is_proj)
        for (int k = 0; k < r->g_n_parts; k++)
            memcpy(e->heads + r->g_part_dst[k], src + r->g_part_src[k],
                   (size_t)r->g_part_len[k] * sizeof(float));
}

/* Attention and gather of a consumer of layer l.  Without speculation: one round on X.  With
 * speculation into l: a round on Z of layer l-1 (sent before that layer's FFN ran), then X'
 * with the decision; a second round on X' only when the speculation was rejected. */
static WireHdr pipe_attention(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    double *tm = e->timers + (size_t)l * T_COUNT, t;
    const int recv = r->in_comm != MPI_COMM_NULL && !r->in_root;
    const int s_in = l > 0 && e->spec[l - 1];
    MPI_Request g1 = MPI_REQUEST_NULL, g2 = MPI_REQUEST_NULL;
    WireHdr h;
    if (!s_in) {
        if (recv) {
            t = time_now();
            bcast_input(e, l, e->xmsg);
            tm[T_BCAST] += time_now() - t;
        }
        h = read_hdr(e->xmsg, l);
        if (!r->in_root && l > 0 && (h.cmd & WIRE_FLAG_SPEC_ON))
            e->spec[l - 1] = (h.cmd & WIRE_FLAG_SPEC_NEXT) != 0; /* adaptive switch */
        h.cmd &= 0xff;
        if (h.cmd != WIRE_STEP)
            return h;
        attn_parts(e, l, payload(e->xmsg), h.pos);
        if (r->g_comm != MPI_COMM_NULL)
            gather_post(e, l, &h, &g1);
        gather_finish(e, l, &g1);
        return h;
    }
    /* Speculation into layer l. The root of the input (the previous FFN rank) already knows
     * the decision; everyone else learns it from X''s header. */
    unsigned char *zin = r->in_root ? e->zmsg : e->zspec;
    int known_reject = 0;
    if (r->in_root) {
        WireHdr xh = read_hdr(e->xmsg, l);
        known_reject = !(xh.cmd & WIRE_FLAG_ACCEPT);
    } else {
        t = time_now();
        bcast_input(e, l, e->zspec);
        tm[T_BCAST] += time_now() - t;
    }
    h = read_hdr(zin, l);
    h.cmd &= 0xff;
    if (h.cmd != WIRE_STEP) {
        if (recv)
            bcast_input(e, l, e->xmsg);
        h = read_hdr(e->xmsg, l);
        h.cmd &= 0xff;
        return h;
    }
    double ts = time_now();
    if (!known_reject)
        attn_parts(e, l, payload(zin), h.pos);
    e->spec_attn_s[l] += time_now() - ts;
    if (r->g_comm != MPI_COMM_NULL)
        gather_post(e, l, &h, &g1);
    if (recv) {
        /* Post the receive of X' before completing the gather, so that neither side waits
         * for the other to finish first. */
        t = time_now();
        bcast_input(e, l, e->xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    WireHdr xh = read_hdr(e->xmsg, l);
    const int accept = (xh.cmd & WIRE_FLAG_ACCEPT) != 0;
    if (!r->in_root && (xh.cmd & WIRE_FLAG_SPEC_ON))
        e->spec[l - 1] = (xh.cmd & WIRE_FLAG_SPEC_NEXT) != 0; /* adaptive switch */
    gather_finish(e, l, &g1);
    if (!accept) {
        attn_parts(e, l, payload(e->xmsg), xh.pos); /* re-executed: K/V at pos overwritten */
        if (r->g_comm != MPI_COMM_NULL)
            gather_post(e, l, &xh, &g2);
        gather_finish(e, l, &g2);
    }
    xh.cmd &= 0xff;
    return xh;
}

/* One PIPE layer on this rank; returns 1 if the message was a stop. */
static int worker_pipe_layer(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    double *tm = e->timers + (size_t)l * T_COUNT, t;
    WireHdr h = {0, WIRE_STEP, 0, 0, 0, 0, 0};
    const int s_out = e->spec[l];
    MPI_Request zreq = MPI_REQUEST_NULL;
    if (r->consumer) {
        h = pipe_attention(e, l);
        const int stop = h.cmd != WIRE_STEP;
        if (r->is_proj) {
            t = time_now();
            if (!stop)
                model_proj_forward(c, &r->proj, &e->scratch, payload(e->xmsg), e->heads,
                                   payload(e->zmsg));
            memcpy(e->zmsg, &h, sizeof h);
            tm[T_PROJ] += time_now() - t;
            if (s_out) {
                /* Z goes to the next layer's ranks now; they start its attention while our
                 * FFN runs (proj and FFN share this rank where speculation is allowed). */
                LayerRt *next = &e->lr[l + 1];
                WireHdr zh = h;
                zh.layer = l;
                comm_stamp(e->cm, &zh);
                memcpy(e->zmsg, &zh, sizeof zh);
                MPI_CHECK(MPI_Ibcast(e->zmsg, (int)e->msg_bytes, MPI_BYTE, 0, next->in_comm,
                                     &zreq));
                e->cm->bytes_sent += e->msg_bytes * (uint64_t)(next->in_size - 1);
                e->cm->msgs_sent += (uint64_t)(next->in_size - 1);
            } else if (!r->is_ffn) {
                t = time_now();
                WireHdr zh = h;
                zh.layer = l;
                comm_stamp(e->cm, &zh);
                memcpy(e->zmsg, &zh, sizeof zh);
                MPI_Request req;
                MPI_CHECK(MPI_Isend(e->zmsg, (int)e->msg_bytes, MPI_BYTE, r->ffn_rank,
                                    WIRE_TAG_Z + l, MPI_COMM_WORLD, &req));
                e->cm->bytes_sent += e->msg_bytes;
                e->cm->msgs_sent++;
                comm_wait(e->cm, &req);
                tm[T_ZSEND] += time_now() - t;
            }
        }
    }
    if (r->is_ffn) {
        if (!r->is_proj) {
            t = time_now();
            MPI_Request req;
            MPI_CHECK(MPI_Irecv(e->zmsg, (int)e->msg_bytes, MPI_BYTE, r->proj_rank,
                                WIRE_TAG_Z + l, MPI_COMM_WORLD, &req));
            comm_wait_link(e->cm, &req, r->proj_rank, "Z", l, &r->ewma[W_Z]);
            WireHdr zh = read_hdr(e->zmsg, l);
            comm_deliver(e->cm, &zh, e->msg_bytes);
            tm[T_ZSEND] += time_now() - t;
        }
        h = read_hdr(e->zmsg, l);
        h.cmd &= 0xff;
        t = time_now();
        if (h.cmd == WIRE_STEP) {
            float ratio = model_ffn_forward(c, &r->ffn, &e->scratch, payload(e->zmsg),
                                            payload(e->xmsg));
            if (s_out || e->adaptive)
                h.cmd |= spec_decide(e, l, ratio, s_out);
            if (s_out)
                e->ffn_s_spec[l] += time_now() - t;
        }
        memcpy(e->xmsg, &h, sizeof h);
        tm[T_FFN] += time_now() - t;
        if (zreq != MPI_REQUEST_NULL)
            comm_wait(e->cm, &zreq);
        LayerRt *next = &e->lr[l + 1];
        if (next->in_comm != MPI_COMM_NULL) {
            t = time_now();
            bcast_input(e, l + 1, e->xmsg);
            tm[T_BCAST] += time_now() - t;
        }
    }
    return h.cmd & 0xff;
}

static int worker_token(DistEngine *e);

/* Waits (sleeping, without a deadline: an idle worker may wait long) for the controller's
 * confirmation of a control command on the world communicator. */
static WireHdr wait_control(DistEngine *e)
{
    WireHdr h;
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD, &req));
    comm_wait(e->cm, &req);
    CHECK(h.magic == WIRE_MAGIC, "control message with a bad magic");
    return h;
}

void dist_worker_loop(DistEngine *e)
{
    for (;;) {
        int cmd = WIRE_STEP;
        if (!e->active) {
            cmd = WIRE_STOP; /* nothing to run: wait for the controller's word */
        } else {
            cmd = worker_token(e);
            if (cmd == WIRE_STEP)
                continue;
        }
        WireHdr h = wait_control(e);
        if (h.cmd == WIRE_STOP)
            return;
        if (h.cmd == WIRE_REPLAN)
            engine_replan(e, h.pos);
    }
}

void engine_controller_control(DistEngine *e, int cmd, int pos)
{
    WireHdr h = {WIRE_MAGIC, cmd, pos, 0, 0, 0, 0};
    memcpy(e->xmsg, &h, sizeof h);
    bcast_input(e, 0, e->xmsg);
    bcast_input(e, e->L, e->xmsg);
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(&h, sizeof h, MPI_BYTE, 0, MPI_COMM_WORLD, &req));
    comm_wait(e->cm, &req);
}

/* One token's pass over this rank's layers; returns the pipeline command seen. */
static int worker_token(DistEngine *e)
{
    {
        int stop = WIRE_STEP;
        if (e->adaptive)
            for (int l = 0; l < e->L; l++)
                if (e->lr[l].is_ffn && e->eligible[l])
                    e->spec[l] = e->spec_pending[l];
        for (int l = 0; l < e->L; l++) {
            if (!plan_rank_in_layer(e->plan, l, e->cm->rank))
                continue;
            stop = e->lr[l].mode == LAYER_SLICE ? worker_slice_layer(e, l)
                                                : worker_pipe_layer(e, l);
        }
        return stop;
    }
}

static void controller_send(DistEngine *e, int cmd, const float *x, int pos, int token)
{
    WireHdr h = {WIRE_MAGIC, cmd, pos, token, 0, 0, 0};
    memcpy(e->xmsg, &h, sizeof h);
    if (x)
        memcpy(payload(e->xmsg), x, (size_t)e->c->dim * sizeof(float));
    bcast_input(e, 0, e->xmsg);
    if (cmd == WIRE_STEP && e->head_comm != MPI_COMM_NULL)
        head_recv(e); /* the members send logits, not X' */
    else
        bcast_input(e, e->L, e->xmsg);
}

void dist_set_wire(DistEngine *e, int f16) { e->wire16 = f16 != 0; }

int dist_set_speculation(DistEngine *e, const unsigned char *mask, float tolerance,
                         float min_acceptance, int adaptive)
{
    int n = 0;
    for (int l = 0; l < e->L; l++) {
        e->spec[l] = e->spec_pending[l] = mask && mask[l] && e->eligible[l];
        e->acc_ewma[l] = e->spec[l] ? 1.0 : 0.0;
        n += e->spec[l];
    }
    e->tolerance = tolerance;
    e->min_acceptance = min_acceptance;
    e->adaptive = adaptive;
    return n;
}

const unsigned char *dist_spec_eligible(const DistEngine *e) { return e->eligible; }

static void controller_forward(void *ctx, float *x, int pos, int token)
{
    DistEngine *e = ctx;
    controller_send(e, WIRE_STEP, x, pos, token);
    if (e->head_comm == MPI_COMM_NULL)
        memcpy(x, payload(e->xmsg), (size_t)e->c->dim * sizeof(float));
}

static int controller_logits(void *ctx, float *logits)
{
    DistEngine *e = ctx;
    if (e->head_comm == MPI_COMM_NULL)
        return 0;
    memcpy(logits, e->logits, (size_t)e->c->vocab_size * sizeof(float));
    return 1;
}

LayerBackend dist_backend(DistEngine *e)
{
    return (LayerBackend){.ctx = e, .forward = controller_forward,
                          .prepare = dist_controller_prepare, .logits = controller_logits};
}

void dist_controller_stop(DistEngine *e) { engine_controller_control(e, WIRE_STOP, 0); }

json_t *dist_collect_metrics(DistEngine *e, int n_tokens)
{
    enum { R_WEIGHT, R_RSS, R_BYTES, R_MSGS, R_WAIT, R_CPU, R_WALL, R_SLOW, R_DIL, R_COUNT };
    const int size = e->cm->size;
    const int per = R_COUNT + e->L * T_COUNT + 3 * size + 4 * e->L;
    double *send = xcalloc((size_t)per, sizeof(double));
    double mine[R_COUNT] = {(double)e->weight_bytes, (double)util_peak_rss(),
                            (double)e->cm->bytes_sent, (double)e->cm->msgs_sent, e->cm->wait_s,
                            time_cpu(), time_now(), e->cm->dilate > 1 ? e->cm->dilate : 1,
                            e->cm->dilated_s};
    memcpy(send, mine, sizeof mine);
    memcpy(send + R_COUNT, e->timers, (size_t)e->L * T_COUNT * sizeof(double));
    double *ls = send + R_COUNT + (size_t)e->L * T_COUNT;
    for (int p = 0; p < size; p++) {
        ls[3 * p] = (double)e->cm->links[p].misses;
        ls[3 * p + 1] = (double)e->cm->links[p].retries;
        ls[3 * p + 2] = e->cm->links[p].max_wait_s;
    }
    double *sp = ls + 3 * size;
    for (int l = 0; l < e->L; l++) {
        sp[4 * l] = (double)e->spec_tried[l];
        sp[4 * l + 1] = (double)e->spec_kept[l];
        sp[4 * l + 2] = e->spec_attn_s[l];
        sp[4 * l + 3] = e->ffn_s_spec[l];
    }
    double *all = e->cm->rank == 0 ? xmalloc((size_t)per * (size_t)size * sizeof(double)) : NULL;
    MPI_Request req;
    MPI_CHECK(MPI_Igather(send, per, MPI_DOUBLE, all, per, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
    comm_wait(e->cm, &req);
    free(send);
    if (e->cm->rank != 0)
        return NULL;
    json_t *o = json_object(), *ranks = json_array(), *layers = json_array();
    json_t *links = json_array();
    double total_bytes = 0;
    uint64_t misses = 0, retries = 0;
    for (int r = 0; r < size; r++) {
        const double *v = all + (size_t)r * (size_t)per;
        total_bytes += v[R_BYTES];
        json_array_append_new(ranks, json_pack("{s:i,s:s,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f}",
                              "rank", r,
                              "role", r == 0 ? "controller" : "worker",
                              "weight_bytes", (json_int_t)v[R_WEIGHT],
                              "peak_rss_bytes", (json_int_t)v[R_RSS],
                              "bytes_sent", (json_int_t)v[R_BYTES],
                              "messages_sent", (json_int_t)v[R_MSGS],
                              "wait_s", v[R_WAIT], "cpu_s", v[R_CPU],
                              "slowdown", v[R_SLOW], "dilated_s", v[R_DIL]));
        const double *lv = v + R_COUNT + (size_t)e->L * T_COUNT;
        for (int p = 0; p < size; p++)
            if (lv[3 * p] > 0 || lv[3 * p + 1] > 0) {
                misses += (uint64_t)lv[3 * p];
                retries += (uint64_t)lv[3 * p + 1];
                json_array_append_new(links, json_pack("{s:i,s:i,s:I,s:I,s:f}", "from", p,
                                      "to", r, "deadline_misses", (json_int_t)lv[3 * p],
                                      "retries", (json_int_t)lv[3 * p + 1],
                                      "max_wait_ms", lv[3 * p + 2] * 1e3));
            }
    }
    double nt = n_tokens > 0 ? n_tokens : 1;
    long tried_all = 0, kept_all = 0;
    for (int l = 0; l < e->L; l++) {
        json_t *lo = json_pack("{s:i}", "layer", l);
        double tried = 0, kept = 0, sattn = 0, sffn = 0;
        for (int r = 1; r < size; r++) {
            const double *v = all + (size_t)r * (size_t)per + R_COUNT + (size_t)e->L * T_COUNT +
                              3 * (size_t)size + 4 * (size_t)l;
            tried += v[0];
            kept += v[1];
            sattn = v[2] > sattn ? v[2] : sattn; /* heads of layer l (attention on Z) */
            sffn += v[3];
        }
        /* Transition l -> l+1 is decided at layer l's FFN rank; its hidden work is layer
         * l+1's speculative attention, measured on that layer's head ranks. */
        double next_attn = 0;
        if (l + 1 < e->L)
            for (int r = 1; r < size; r++) {
                const double *v = all + (size_t)r * (size_t)per + R_COUNT +
                                  (size_t)e->L * T_COUNT + 3 * (size_t)size + 4 * (size_t)(l + 1);
                next_attn = v[2] > next_attn ? v[2] : next_attn;
            }
        (void)sattn;
        tried_all += (long)tried;
        kept_all += (long)kept;
        json_object_set_new(lo, "spec_tried", json_integer((json_int_t)tried));
        json_object_set_new(lo, "spec_kept", json_integer((json_int_t)kept));
        json_object_set_new(lo, "spec_reexecuted", json_integer((json_int_t)(tried - kept)));
        json_object_set_new(lo, "spec_overlap",
                            json_real(sffn > 0 ? (next_attn < sffn ? next_attn : sffn) / sffn : 0));
        for (int t = 0; t < T_COUNT; t++) {
            /* The slowest rank of a role sets the layer's pace: report the max. */
            double mx = 0;
            for (int r = 1; r < size; r++) {
                double v = all[(size_t)r * (size_t)per + R_COUNT + (size_t)l * T_COUNT + t];
                mx = v > mx ? v : mx;
            }
            json_object_set_new(lo, timer_names[t], json_real(mx * 1e3 / nt));
        }
        json_array_append_new(layers, lo);
    }
    json_object_set_new(o, "ranks", ranks);
    json_object_set_new(o, "layers", layers);
    json_object_set_new(o, "spec_tried", json_integer(tried_all));
    json_object_set_new(o, "spec_kept", json_integer(kept_all));
    json_object_set_new(o, "spec_acceptance",
                        json_real(tried_all ? (double)kept_all / (double)tried_all : 0));
    json_object_set_new(o, "links", links);
    json_object_set_new(o, "deadline_misses", json_integer((json_int_t)misses));
    json_object_set_new(o, "retries", json_integer((json_int_t)retries));
    json_object_set_new(o, "bytes_total", json_integer((json_int_t)total_bytes));
    json_object_set_new(o, "bytes_per_token", json_real(total_bytes / nt));
    json_object_set_new(o, "hops_per_token", json_integer(dist_hops_per_token(e->plan)));
    free(all);
    return o;
}

void dist_print_layer_times(json_t *metrics, FILE *out)
{
    json_t *layers = json_object_get(metrics, "layers");
    size_t i;
    json_t *lo;
    fprintf(out, "per-layer time per token (ms, slowest rank of each role):\n%-6s", "layer");
    for (int t = 0; t < T_COUNT; t++)
        fprintf(out, " %13.*s", (int)(strlen(timer_names[t]) - 3), timer_names[t]);
    fputc('\n', out);
    json_array_foreach(layers, i, lo) {
        fprintf(out, "%-6zu", i);
        for (int t = 0; t < T_COUNT; t++)
            fprintf(out, " %13.3f", json_real_value(json_object_get(lo, timer_names[t])));
        fputc('\n', out);
    }
}
