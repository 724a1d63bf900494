/* engine.c: controller and worker sides of the distributed forward pass (see dist.h). */
#include "dist.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

enum { T_ATTN, T_GATHER, T_PROJ, T_FFN, T_BCAST, T_ZSEND, T_COUNT };
static const char *timer_names[T_COUNT] = {"attention_ms", "gather_ms", "projection_ms",
                                            "ffn_ms", "broadcast_ms", "z_transfer_ms"};

/* What this rank does in one layer. */
typedef struct {
    MPI_Comm in_comm;   /* layer input: root (comm rank 0) = producer; NULL if not a member */
    int in_size;
    int in_root;        /* 1 if this rank produces the input (previous FFN or controller) */
    MPI_Comm g_comm;    /* head outputs -> projection rank (comm rank 0) */
    int g_size;
    int *g_counts, *g_displs; /* root: floats from each member */
    int *g_part_dst;    /* root: for every part in gather order, its offset in heads */
    int *g_part_len;
    int g_n_parts;
    int n_parts;
    AttnPartW *parts;   /* this rank's parts of the layer */
    int my_floats;      /* floats of head outputs this rank contributes */
    int is_proj, is_ffn;
    int proj_rank, ffn_rank;
    ProjW proj;
    FfnW ffn;
} LayerRt;

struct DistEngine {
    Comm *cm;
    const ModelConfig *c;
    const Plan *plan;
    int L;
    LayerRt *lr;         /* [L+1]: lr[L].in_comm carries the last output to the controller */
    Scratch scratch;
    unsigned char *xmsg; /* [hdr | dim floats] the current layer input / output */
    unsigned char *zmsg; /* [hdr | dim floats] Z */
    float *partbuf;      /* [n_heads*hd] this rank's head outputs */
    float *staging;      /* [n_heads*hd] gathered, in member order */
    float *heads;        /* [n_heads*hd] in head order */
    size_t msg_bytes;
    double *timers;      /* [L][T_COUNT] seconds */
    size_t weight_bytes;
    int active;          /* has any role */
};

static float *payload(unsigned char *msg) { return (float *)(void *)(msg + sizeof(WireHdr)); }

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* members = [first] + sorted unique others without first. Returns the count. */
static int member_list(int *out, int first, const int *others, int n_others)
{
    int n = 0;
    out[n++] = first;
    int *tmp = xmalloc(((size_t)n_others + 1) * sizeof(int));
    memcpy(tmp, others, (size_t)n_others * sizeof(int));
    qsort(tmp, (size_t)n_others, sizeof(int), cmp_int);
    for (int i = 0; i < n_others; i++)
        if (tmp[i] != first && (i == 0 || tmp[i] != tmp[i - 1]))
            out[n++] = tmp[i];
    free(tmp);
    return n;
}

static int producer_of(const Plan *p, int l) { return l == 0 ? 0 : p->layers[l - 1].ffn_rank; }

int dist_hops_per_token(const Plan *p)
{
    int hops = 0, *tmp = xmalloc(((size_t)p->n_workers + 2) * 64 * sizeof(int));
    int *mem = xmalloc(((size_t)p->n_workers + 2) * 64 * sizeof(int));
    for (int l = 0; l <= p->n_layers; l++) {
        int n = 0;
        if (l < p->n_layers) {
            const LayerPlan *lp = &p->layers[l];
            for (int k = 0; k < lp->n_parts; k++)
                tmp[n++] = lp->parts[k].rank;
            tmp[n++] = lp->proj_rank;
            int in = member_list(mem, producer_of(p, l), tmp, n);
            int g = member_list(mem, lp->proj_rank, tmp, n - 1);
            hops += (in > 1) + (g > 1) + (lp->proj_rank != lp->ffn_rank);
        } else {
            tmp[n++] = 0;
            hops += member_list(mem, producer_of(p, l), tmp, n) > 1;
        }
    }
    free(tmp);
    free(mem);
    return hops;
}

/* Builds the communicators of layer l (collective over world) and this rank's roles. */
static void setup_layer_comms(DistEngine *e, int l)
{
    const Plan *p = e->plan;
    const int me = e->cm->rank;
    LayerRt *r = &e->lr[l];
    int max = 4 * (p->n_workers + 2) + (l < p->n_layers ? p->layers[l].n_parts : 0);
    int *others = xmalloc((size_t)max * sizeof(int)), *mem = xmalloc((size_t)max * sizeof(int));
    int n = 0;
    if (l < p->n_layers) {
        const LayerPlan *lp = &p->layers[l];
        for (int k = 0; k < lp->n_parts; k++)
            others[n++] = lp->parts[k].rank;
        others[n++] = lp->proj_rank;
    } else {
        others[n++] = 0;
    }
    int n_in = member_list(mem, producer_of(p, l), others, n);
    r->in_size = n_in;
    r->in_root = mem[0] == me;
    r->in_comm = n_in > 1 ? comm_create(mem, n_in) : MPI_COMM_NULL;
    if (l == p->n_layers) {
        free(others);
        free(mem);
        return;
    }
    const LayerPlan *lp = &p->layers[l];
    int n_g = member_list(mem, lp->proj_rank, others, n - 1);
    r->g_size = n_g;
    r->g_comm = n_g > 1 ? comm_create(mem, n_g) : MPI_COMM_NULL;
    r->proj_rank = lp->proj_rank;
    r->ffn_rank = lp->ffn_rank;
    r->is_proj = lp->proj_rank == me;
    r->is_ffn = lp->ffn_rank == me;
    const int hd = e->c->head_dim, Q = config_q_per_kv(e->c);
    if (r->is_proj) {
        /* Gather layout: members in comm order, each with its parts in plan order. */
        r->g_counts = xcalloc((size_t)n_g, sizeof(int));
        r->g_displs = xcalloc((size_t)n_g, sizeof(int));
        r->g_part_dst = xcalloc((size_t)lp->n_parts, sizeof(int));
        r->g_part_len = xcalloc((size_t)lp->n_parts, sizeof(int));
        int off = 0, np = 0;
        for (int m = 0; m < n_g; m++) {
            r->g_displs[m] = off;
            for (int k = 0; k < lp->n_parts; k++)
                if (lp->parts[k].rank == mem[m]) {
                    int len = (lp->parts[k].q1 - lp->parts[k].q0) * hd;
                    r->g_part_dst[np] = (lp->parts[k].unit * Q + lp->parts[k].q0) * hd;
                    r->g_part_len[np++] = len;
                    r->g_counts[m] += len;
                    off += len;
                }
        }
        r->g_n_parts = np;
    }
    free(others);
    free(mem);
}

/* Loads this rank's slices of layer l; -1 with err. */
static int load_layer(DistEngine *e, int l, hid_t file, const char *fname, int kv_cap,
                      char *err, size_t errlen)
{
    const LayerPlan *lp = &e->plan->layers[l];
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    for (int k = 0; k < lp->n_parts; k++)
        r->n_parts += lp->parts[k].rank == e->cm->rank;
    r->parts = xcalloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof(AttnPartW));
    for (int k = 0, j = 0; k < lp->n_parts; k++) {
        const AttnPart *p = &lp->parts[k];
        if (p->rank != e->cm->rank)
            continue;
        if (model_load_attn_part(&r->parts[j], c, file, fname, l, p->unit, p->q0, p->q1, kv_cap,
                                 err, errlen) < 0)
            return -1;
        e->weight_bytes += model_attn_part_bytes(c, &r->parts[j]);
        r->my_floats += (p->q1 - p->q0) * c->head_dim;
        j++;
    }
    if (r->is_proj) {
        if (model_load_proj(&r->proj, c, file, fname, l, err, errlen) < 0)
            return -1;
        e->weight_bytes += config_proj_floats(c) * sizeof(float);
    }
    if (r->is_ffn) {
        if (model_load_ffn(&r->ffn, c, file, fname, l, 0, c->ffn_dim, err, errlen) < 0)
            return -1;
        e->weight_bytes += model_ffn_bytes(c, &r->ffn);
    }
    return 0;
}

int dist_setup(DistEngine **out, Comm *cm, const ModelConfig *c, const Plan *plan,
               hid_t file, const char *fname, int kv_cap)
{
    DistEngine *e = xcalloc(1, sizeof *e);
    e->cm = cm;
    e->c = c;
    e->plan = plan;
    e->L = c->n_layers;
    e->lr = xcalloc((size_t)e->L + 1, sizeof(LayerRt));
    for (int l = 0; l <= e->L; l++)
        setup_layer_comms(e, l);
    char err[512] = "";
    if (cm->rank > 0)
        for (int l = 0; l < e->L; l++) {
            e->active |= plan_rank_in_layer(plan, l, cm->rank);
            if (load_layer(e, l, file, fname, kv_cap, err, sizeof err) < 0)
                break;
        }
    const size_t qd = (size_t)c->n_heads * (size_t)c->head_dim;
    e->msg_bytes = sizeof(WireHdr) + (size_t)c->dim * sizeof(float);
    e->xmsg = xcalloc(e->msg_bytes, 1);
    e->zmsg = xcalloc(e->msg_bytes, 1);
    e->partbuf = xcalloc(qd, sizeof(float));
    e->staging = xcalloc(qd, sizeof(float));
    e->heads = xcalloc(qd, sizeof(float));
    e->timers = xcalloc((size_t)e->L * T_COUNT, sizeof(double));
    model_scratch_init(&e->scratch, c, kv_cap);
    *out = e;
    if (comm_agree_errors(cm, MPI_COMM_WORLD, err)) {
        dist_free(e);
        *out = NULL;
        return -1;
    }
    return 0;
}

void dist_free(DistEngine *e)
{
    if (!e)
        return;
    for (int l = 0; l <= e->L; l++) {
        LayerRt *r = &e->lr[l];
        if (r->in_comm != MPI_COMM_NULL)
            MPI_Comm_free(&r->in_comm);
        if (r->g_comm != MPI_COMM_NULL)
            MPI_Comm_free(&r->g_comm);
        free(r->g_counts);
        free(r->g_displs);
        free(r->g_part_dst);
        free(r->g_part_len);
        for (int k = 0; k < r->n_parts; k++)
            model_free_attn_part(&r->parts[k]);
        free(r->parts);
        model_free_proj(&r->proj);
        model_free_ffn(&r->ffn);
    }
    free(e->lr);
    free(e->xmsg);
    free(e->zmsg);
    free(e->partbuf);
    free(e->staging);
    free(e->heads);
    free(e->timers);
    model_scratch_free(&e->scratch);
    free(e);
}

/* Broadcast of a pipeline message on a layer-input communicator. */
static void bcast_msg(DistEngine *e, LayerRt *r, unsigned char *msg)
{
    MPI_Request req;
    MPI_CHECK(MPI_Ibcast(msg, (int)e->msg_bytes, MPI_BYTE, 0, r->in_comm, &req));
    if (r->in_root) {
        e->cm->bytes_sent += e->msg_bytes * (uint64_t)(r->in_size - 1);
        e->cm->msgs_sent += (uint64_t)(r->in_size - 1);
    }
    comm_wait(e->cm, &req);
}

static WireHdr read_hdr(const unsigned char *msg, int layer)
{
    WireHdr h;
    memcpy(&h, msg, sizeof h);
    CHECK(h.magic == WIRE_MAGIC, "layer %d: message with a bad magic 0x%08x (protocol "
          "mismatch between ranks?)", layer, h.magic);
    CHECK(h.cmd == WIRE_STEP || h.cmd == WIRE_STOP, "layer %d: unknown command %d", layer,
          h.cmd);
    return h;
}

/* One layer on this rank; returns 1 if the message was a stop. */
static int worker_layer(DistEngine *e, int l)
{
    LayerRt *r = &e->lr[l];
    const ModelConfig *c = e->c;
    double *tm = e->timers + (size_t)l * T_COUNT;
    double t;
    int member_in = r->in_comm != MPI_COMM_NULL || r->in_root;
    if (r->in_comm != MPI_COMM_NULL && !r->in_root) {
        t = time_now();
        bcast_msg(e, r, e->xmsg);
        tm[T_BCAST] += time_now() - t;
    }
    WireHdr h = {0, WIRE_STEP, 0, 0};
    const float *x = payload(e->xmsg);
    if (member_in || r->n_parts) {
        h = read_hdr(e->xmsg, l);
        int stop = h.cmd == WIRE_STOP;
        t = time_now();
        int off = 0;
        for (int k = 0; k < r->n_parts && !stop; k++) {
            CHECK(h.pos >= 0 && h.pos < r->parts[k].kv_cap, "layer %d: position %d outside "
                  "the KV cache of %d positions", l, h.pos, r->parts[k].kv_cap);
            model_attn_part_forward(c, &r->parts[k], &e->scratch, x, h.pos, e->partbuf + off);
            off += (r->parts[k].q1 - r->parts[k].q0) * c->head_dim;
        }
        tm[T_ATTN] += time_now() - t;
        const float *gathered = e->partbuf;
        if (r->g_comm != MPI_COMM_NULL) {
            t = time_now();
            MPI_Request req;
            MPI_CHECK(MPI_Igatherv(e->partbuf, r->my_floats, MPI_FLOAT, e->staging, r->g_counts,
                                   r->g_displs, MPI_FLOAT, 0, r->g_comm, &req));
            if (!r->is_proj) {
                e->cm->bytes_sent += (uint64_t)r->my_floats * sizeof(float);
                e->cm->msgs_sent++;
            }
            comm_wait(e->cm, &req);
            tm[T_GATHER] += time_now() - t;
            gathered = e->staging;
        }
        if (r->is_proj) {
            t = time_now();
            if (!stop) {
                for (int k = 0, off2 = 0; k < r->g_n_parts; k++) {
                    memcpy(e->heads + r->g_part_dst[k], gathered + off2,
                           (size_t)r->g_part_len[k] * sizeof(float));
                    off2 += r->g_part_len[k];
                }
                model_proj_forward(c, &r->proj, &e->scratch, x, e->heads, payload(e->zmsg));
            }
            memcpy(e->zmsg, &h, sizeof h);
            tm[T_PROJ] += time_now() - t;
            if (!r->is_ffn) {
                t = time_now();
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
            comm_wait(e->cm, &req);
            tm[T_ZSEND] += time_now() - t;
        }
        h = read_hdr(e->zmsg, l);
        t = time_now();
        if (h.cmd != WIRE_STOP)
            model_ffn_forward(c, &r->ffn, &e->scratch, payload(e->zmsg), payload(e->xmsg));
        memcpy(e->xmsg, &h, sizeof h);
        tm[T_FFN] += time_now() - t;
        LayerRt *next = &e->lr[l + 1];
        if (next->in_comm != MPI_COMM_NULL) {
            t = time_now();
            bcast_msg(e, next, e->xmsg);
            tm[T_BCAST] += time_now() - t;
        }
    }
    return h.cmd == WIRE_STOP;
}

void dist_worker_loop(DistEngine *e)
{
    if (!e->active)
        return;
    for (;;) {
        int stop = 0, any = 0;
        for (int l = 0; l < e->L; l++) {
            if (!plan_rank_in_layer(e->plan, l, e->cm->rank))
                continue;
            any = 1;
            stop = worker_layer(e, l);
        }
        if (!any || stop)
            return;
    }
}

static void controller_send(DistEngine *e, int cmd, const float *x, int pos, int token)
{
    WireHdr h = {WIRE_MAGIC, cmd, pos, token};
    memcpy(e->xmsg, &h, sizeof h);
    if (x)
        memcpy(payload(e->xmsg), x, (size_t)e->c->dim * sizeof(float));
    bcast_msg(e, &e->lr[0], e->xmsg);
    bcast_msg(e, &e->lr[e->L], e->xmsg);
    read_hdr(e->xmsg, e->L);
}

static void controller_forward(void *ctx, float *x, int pos, int token)
{
    DistEngine *e = ctx;
    controller_send(e, WIRE_STEP, x, pos, token);
    memcpy(x, payload(e->xmsg), (size_t)e->c->dim * sizeof(float));
}

LayerBackend dist_backend(DistEngine *e) { return (LayerBackend){e, controller_forward}; }

void dist_controller_stop(DistEngine *e) { controller_send(e, WIRE_STOP, NULL, 0, 0); }

json_t *dist_collect_metrics(DistEngine *e, int n_tokens)
{
    /* Per rank: weight bytes, peak RSS, wall/cpu are filled by the caller; here the traffic
     * and the per-layer timers. */
    enum { R_WEIGHT, R_RSS, R_BYTES, R_MSGS, R_WAIT, R_CPU, R_COUNT };
    double mine[R_COUNT] = {(double)e->weight_bytes, (double)util_peak_rss(),
                            (double)e->cm->bytes_sent, (double)e->cm->msgs_sent, e->cm->wait_s,
                            time_cpu()};
    const int size = e->cm->size, per = R_COUNT + e->L * T_COUNT;
    double *send = xmalloc((size_t)per * sizeof(double));
    memcpy(send, mine, sizeof mine);
    memcpy(send + R_COUNT, e->timers, (size_t)e->L * T_COUNT * sizeof(double));
    double *all = e->cm->rank == 0 ? xmalloc((size_t)per * (size_t)size * sizeof(double)) : NULL;
    MPI_Request req;
    MPI_CHECK(MPI_Igather(send, per, MPI_DOUBLE, all, per, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
    comm_wait(e->cm, &req);
    free(send);
    if (e->cm->rank != 0)
        return NULL;
    json_t *o = json_object(), *ranks = json_array(), *layers = json_array();
    double total_bytes = 0;
    for (int r = 0; r < size; r++) {
        const double *v = all + (size_t)r * (size_t)per;
        total_bytes += v[R_BYTES];
        json_array_append_new(ranks, json_pack("{s:i,s:s,s:I,s:I,s:I,s:I,s:f,s:f}", "rank", r,
                              "role", r == 0 ? "controller" : "worker",
                              "weight_bytes", (json_int_t)v[R_WEIGHT],
                              "peak_rss_bytes", (json_int_t)v[R_RSS],
                              "bytes_sent", (json_int_t)v[R_BYTES],
                              "messages_sent", (json_int_t)v[R_MSGS],
                              "wait_s", v[R_WAIT], "cpu_s", v[R_CPU]));
    }
    double nt = n_tokens > 0 ? n_tokens : 1;
    for (int l = 0; l < e->L; l++) {
        json_t *lo = json_pack("{s:i}", "layer", l);
        for (int t = 0; t < T_COUNT; t++) {
            /* The slowest rank of a role sets the layer's pace: report the max. */
            double mx = 0;
            for (int r = 1; r < size; r++) {
                double v = all[(size_t)r * (size_t)per + R_COUNT + (size_t)l * T_COUNT + t];
                if (v > mx)
                    mx = v;
            }
            json_object_set_new(lo, timer_names[t], json_real(mx * 1e3 / nt));
        }
        json_array_append_new(layers, lo);
    }
    json_object_set_new(o, "ranks", ranks);
    json_object_set_new(o, "layers", layers);
    json_object_set_new(o, "bytes_total", json_integer((json_int_t)total_bytes));
    json_object_set_new(o, "bytes_per_token", json_real(total_bytes / nt));
    json_object_set_new(o, "hops_per_token", json_integer(dist_hops_per_token(e->plan)));
    free(all);
    return o;
}
