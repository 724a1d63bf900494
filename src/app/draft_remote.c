/* draft_remote.c: --draft-rank R, the draft model's layers on worker R.  The controller keeps
 * the draft's embedding and LM head (and so its sampling, exactly as with a local draft) and
 * reaches the layers through a LayerBackend whose passes are requests to R's service
 * (dist_set_service): [pos, n | n rows of the draft's width] in, the rows after the draft's
 * layers back.  R runs the same local backend a controller-side draft runs, on the same rows,
 * so the drafted tokens are the same bits; each draft pass costs one round trip to R. */
#include "draft_remote.h"

#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct RemoteDraft {
    DistEngine *e;
    const ModelConfig *c;
    int max_batch;
    LocalModel *local;  /* worker R: the draft's layers */
    LayerBackend lb;    /* worker R: their backend */
    unsigned char *req; /* controller: [2 x int32 | max_batch x dim floats] */
};

typedef struct {
    int32_t pos, n;
} ReqHdr;

static size_t rows_bytes(const RemoteDraft *d, int n)
{
    return (size_t)n * (size_t)d->c->dim * sizeof(float);
}

/* Worker R: one pass of the draft's layers on the request's rows. */
static long serve(void *ctx, const void *req, size_t bytes, void *resp, size_t cap, char *err,
                  size_t errlen)
{
    RemoteDraft *d = ctx;
    ReqHdr h;
    if (bytes < sizeof h)
        return util_err(err, errlen, "draft request of %zu bytes", bytes), -1;
    memcpy(&h, req, sizeof h);
    if (h.n < 1 || h.n > d->max_batch || h.pos < 0 || bytes != sizeof h + rows_bytes(d, h.n) ||
        cap < rows_bytes(d, h.n))
        return util_err(err, errlen, "draft request: %d rows at position %d in %zu bytes", h.n,
                        h.pos, bytes), -1;
    float *x = resp;
    memcpy(x, (const unsigned char *)req + sizeof h, rows_bytes(d, h.n));
    if (h.n == 1)
        d->lb.forward(d->lb.ctx, x, h.pos, 0);
    else
        d->lb.forward_n(d->lb.ctx, x, h.pos, h.n, NULL, 0);
    return (long)rows_bytes(d, h.n);
}

/* Controller: the draft's layers on n rows, at R. */
static void remote_forward_n(void *ctx, float *x, int pos, int n, const int *tokens, int next_n)
{
    RemoteDraft *d = ctx;
    (void)tokens;
    (void)next_n;
    CHECK(n >= 1 && n <= d->max_batch, "draft pass of %d positions (at most %d)", n,
          d->max_batch);
    ReqHdr h = {pos, n};
    memcpy(d->req, &h, sizeof h);
    memcpy(d->req + sizeof h, x, rows_bytes(d, n));
    size_t got = dist_service_call(d->e, d->req, sizeof h + rows_bytes(d, n), x,
                                   rows_bytes(d, n));
    CHECK(got == rows_bytes(d, n), "draft rank: %zu bytes back for %d rows", got, n);
}

static void remote_forward(void *ctx, float *x, int pos, int token)
{
    remote_forward_n(ctx, x, pos, 1, &token, 1);
}

int remote_draft_setup(RemoteDraft **out, DistEngine *e, Transport *tp, int rank,
                       const ModelConfig *dc, hid_t file, const char *path, int kv_cap,
                       int max_batch, char *err, size_t errlen)
{
    RemoteDraft *d = xcalloc(1, sizeof *d);
    d->e = e;
    d->c = dc;
    d->max_batch = max_batch;
    char lerr[512] = "";
    if (tp->rank == rank) {
        transport_exclusive(tp, 1);
        if (local_model_load(&d->local, dc, file, path, kv_cap, lerr, sizeof lerr) == 0)
            local_model_set_max_batch(d->local, max_batch);
        transport_exclusive(tp, 0);
        if (!lerr[0])
            d->lb = local_model_backend(d->local);
        else
            snprintf(err, errlen, "rank %d, --draft %s: %s", rank, path, lerr);
    }
    if (transport_agree_errors(tp, tp->rank == rank ? err : "")) {
        remote_draft_free(d);
        *out = NULL;
        return -1;
    }
    const size_t cap = sizeof(ReqHdr) + rows_bytes(d, max_batch);
    dist_set_service(e, rank, serve, d, cap, cap);
    if (tp->rank == 0)
        d->req = xcalloc(cap, 1);
    *out = d;
    return 0;
}

LayerBackend remote_draft_backend(RemoteDraft *d)
{
    return (LayerBackend){.ctx = d, .forward = remote_forward, .forward_n = remote_forward_n,
                          .max_batch = d->max_batch};
}

void remote_draft_free(RemoteDraft *d)
{
    if (!d)
        return;
    local_model_free(d->local);
    free(d->req);
    free(d);
}
