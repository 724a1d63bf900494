/* metrics.c: per-rank and per-layer statistics as a struct (DistMetrics), gathered from every
 * rank, then as the JSON record the controller prints. */
#include "engine_internal.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

_Static_assert((int)T_COUNT == (int)DIST_TIMERS, "one timer name per engine timer");

static const char *timer_names[T_COUNT] = {"attention_ms", "gather_ms", "projection_ms",
                                            "ffn_ms", "broadcast_ms", "z_transfer_ms"};

enum { N_COUNTERS = sizeof(DistRankCounters) / sizeof(double) };

/* Doubles one rank contributes: counters, timers, links (misses, retries, max wait), spec. */
static size_t row_len(int size, int L)
{
    return N_COUNTERS + (size_t)L * T_COUNT + 3 * (size_t)size + 4 * (size_t)L;
}

void dist_metrics_gather(DistEngine *e, DistMetrics *m)
{
    const int size = e->tp->size, L = e->L;
    const size_t per = row_len(size, L);
    double *row = xcalloc(per, sizeof(double));
    DistRankCounters mine = {(double)e->stats.weight_bytes, (double)util_peak_rss(),
                             (double)e->tp->bytes_sent, (double)e->tp->msgs_sent,
                             e->tp->wait_s, time_cpu(), time_now(), e->tp->slowdown,
                             e->tp->dilated_s, e->tp->board_s, e->tp->host_over_s,
                             e->tp->late_s};
    memcpy(row, &mine, sizeof mine);
    memcpy(row + N_COUNTERS, e->stats.timers, (size_t)L * T_COUNT * sizeof(double));
    double *ls = row + N_COUNTERS + (size_t)L * T_COUNT, *sp = ls + 3 * (size_t)size;
    for (int p = 0; p < size; p++) {
        ls[3 * p] = (double)e->tp->links[p].misses;
        ls[3 * p + 1] = (double)e->tp->links[p].retries;
        ls[3 * p + 2] = e->tp->links[p].max_wait_s;
    }
    for (int l = 0; l < L; l++) {
        sp[4 * l] = (double)e->sp.tried[l];
        sp[4 * l + 1] = (double)e->sp.kept[l];
        sp[4 * l + 2] = e->sp.attn_s[l];
        sp[4 * l + 3] = e->sp.ffn_s[l];
    }
    double *all = xmalloc(per * (size_t)size * sizeof(double));
    transport_allgather(e->tp, row, per * sizeof(double), all);
    free(row);
    memset(m, 0, sizeof *m);
    m->size = size;
    m->n_layers = L;
    m->hops_per_token = e->sched.hops_per_token;
    m->rank = xcalloc((size_t)size, sizeof(DistRankCounters));
    m->timers = xcalloc((size_t)size * (size_t)L * T_COUNT, sizeof(double));
    m->links = xcalloc((size_t)size * (size_t)size, sizeof(LinkStats));
    m->spec = xcalloc((size_t)size * (size_t)L * 4, sizeof(double));
    for (int r = 0; r < size; r++) {
        const double *v = all + (size_t)r * per;
        memcpy(&m->rank[r], v, sizeof(DistRankCounters));
        memcpy(m->timers + (size_t)r * (size_t)L * T_COUNT, v + N_COUNTERS,
               (size_t)L * T_COUNT * sizeof(double));
        const double *lv = v + N_COUNTERS + (size_t)L * T_COUNT;
        for (int p = 0; p < size; p++)
            m->links[(size_t)r * (size_t)size + (size_t)p] =
                (LinkStats){(uint64_t)lv[3 * p], (uint64_t)lv[3 * p + 1], lv[3 * p + 2]};
        memcpy(m->spec + (size_t)r * (size_t)L * 4, lv + 3 * (size_t)size,
               (size_t)L * 4 * sizeof(double));
    }
    free(all);
}

void dist_metrics_free(DistMetrics *m)
{
    if (!m)
        return;
    free(m->rank);
    free(m->timers);
    free(m->links);
    free(m->spec);
    memset(m, 0, sizeof *m);
}

static const double *spec_of(const DistMetrics *m, int r, int l)
{
    return m->spec + ((size_t)r * (size_t)m->n_layers + (size_t)l) * 4;
}

/* Layer l's entry: speculation out of it and the slowest worker of each timer. */
static json_t *layer_json(const DistMetrics *m, int l, double nt, long *tried_all,
                          long *kept_all)
{
    const int size = m->size, L = m->n_layers;
    json_t *lo = json_pack("{s:i}", "layer", l);
    double tried = 0, kept = 0, sffn = 0;
    for (int r = 1; r < size; r++) {
        tried += spec_of(m, r, l)[0];
        kept += spec_of(m, r, l)[1];
        sffn += spec_of(m, r, l)[3];
    }
    /* Transition l -> l+1 is decided at layer l's FFN rank; its hidden work is layer l+1's
     * speculative attention, measured on that layer's head ranks. */
    double next_attn = 0;
    if (l + 1 < L)
        for (int r = 1; r < size; r++)
            next_attn = spec_of(m, r, l + 1)[2] > next_attn ? spec_of(m, r, l + 1)[2]
                                                            : next_attn;
    *tried_all += (long)tried;
    *kept_all += (long)kept;
    json_object_set_new(lo, "spec_tried", json_integer((json_int_t)tried));
    json_object_set_new(lo, "spec_kept", json_integer((json_int_t)kept));
    json_object_set_new(lo, "spec_reexecuted", json_integer((json_int_t)(tried - kept)));
    json_object_set_new(lo, "spec_overlap",
                        json_real(sffn > 0 ? (next_attn < sffn ? next_attn : sffn) / sffn : 0));
    for (int t = 0; t < T_COUNT; t++) {
        /* The slowest rank of a role sets the layer's pace: report the max. */
        double mx = 0;
        for (int r = 1; r < size; r++) {
            double v = m->timers[((size_t)r * (size_t)L + (size_t)l) * T_COUNT + (size_t)t];
            mx = v > mx ? v : mx;
        }
        json_object_set_new(lo, timer_names[t], json_real(mx * 1e3 / nt));
    }
    return lo;
}

json_t *dist_metrics_json(const DistMetrics *m, int n_tokens)
{
    const int size = m->size;
    json_t *o = json_object(), *ranks = json_array(), *layers = json_array();
    json_t *links = json_array();
    double total_bytes = 0;
    uint64_t misses = 0, retries = 0;
    for (int r = 0; r < size; r++) {
        const DistRankCounters *v = &m->rank[r];
        total_bytes += v->bytes_sent;
        json_array_append_new(ranks, json_pack("{s:i,s:s,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,"
                                               "s:f,s:f,s:f}",
                              "rank", r,
                              "role", r == 0 ? "controller" : "worker",
                              "weight_bytes", (json_int_t)v->weight_bytes,
                              "peak_rss_bytes", (json_int_t)v->peak_rss_bytes,
                              "bytes_sent", (json_int_t)v->bytes_sent,
                              "messages_sent", (json_int_t)v->messages_sent,
                              "wait_s", v->wait_s, "cpu_s", v->cpu_s,
                              "slowdown", v->slowdown, "dilated_s", v->dilated_s,
                              "board_s", v->board_s, "host_over_s", v->host_over_s,
                              "late_s", v->late_s));
        for (int p = 0; p < size; p++) {
            const LinkStats *ls = &m->links[(size_t)r * (size_t)size + (size_t)p];
            if (ls->misses > 0 || ls->retries > 0) {
                misses += ls->misses;
                retries += ls->retries;
                json_array_append_new(links, json_pack("{s:i,s:i,s:I,s:I,s:f}", "from", p,
                                      "to", r, "deadline_misses", (json_int_t)ls->misses,
                                      "retries", (json_int_t)ls->retries,
                                      "max_wait_ms", ls->max_wait_s * 1e3));
            }
        }
    }
    /* Emulated boards (dilation): the share by which the host's own time for a rank's work
     * exceeded the board's, worst rank; above 0 the host, not the boards, set those times. */
    double over = 0;
    int over_rank = -1;
    for (int r = 0; r < size; r++)
        if (m->rank[r].board_s > 0 && m->rank[r].host_over_s / m->rank[r].board_s > over) {
            over = m->rank[r].host_over_s / m->rank[r].board_s;
            over_rank = r;
        }
    json_object_set_new(o, "emulation_host_over", json_real(over));
    double late = 0;
    for (int r = 0; r < size; r++)
        late = m->rank[r].late_s > late ? m->rank[r].late_s : late;
    json_object_set_new(o, "emulation_late_ms_per_token",
                        json_real(late * 1e3 / (n_tokens > 0 ? n_tokens : 1)));
    json_object_set_new(o, "emulation_host_over_rank", json_integer(over_rank));
    double nt = n_tokens > 0 ? n_tokens : 1;
    long tried_all = 0, kept_all = 0;
    for (int l = 0; l < m->n_layers; l++)
        json_array_append_new(layers, layer_json(m, l, nt, &tried_all, &kept_all));
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
    json_object_set_new(o, "hops_per_token", json_integer(m->hops_per_token));
    return o;
}

json_t *dist_collect_metrics(DistEngine *e, int n_tokens)
{
    DistMetrics m;
    dist_metrics_gather(e, &m);
    json_t *o = e->tp->rank == 0 ? dist_metrics_json(&m, n_tokens) : NULL;
    if (o) {
        json_object_set_new(o, "ubatch", e->ubatch == DIST_UBATCH_AUTO ? json_string("auto")
                                                                   : json_integer(e->ubatch));
        json_object_set_new(o, "pipeline_depth", json_integer(engine_pipeline_depth(e)));
        json_object_set_new(o, "wire_passes", json_integer((json_int_t)e->stats.wire_passes));
    }
    dist_metrics_free(&m);
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

long dist_passes(const DistEngine *e) { return e->stats.wire_passes; }
