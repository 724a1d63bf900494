/* draft_remote.h: --draft-rank R, the draft model's layers on a worker (draft_remote.c). */
#ifndef HEADSPLIT_DRAFT_REMOTE_H
#define HEADSPLIT_DRAFT_REMOTE_H

#include "dist.h"
#include "generate.h"
#include "transport.h"

#include <hdf5.h>

typedef struct RemoteDraft RemoteDraft;

/* Collective (every rank, after dist_setup): worker `rank` loads the draft's layers from
 * file (config dc, KV caches of kv_cap positions, passes of up to max_batch rows) and serves
 * them between the target's passes.  Returns 0, or -1 on every rank with err (the failing
 * rank's message, at rank 0) when the draft cannot be loaded. */
int remote_draft_setup(RemoteDraft **out, DistEngine *e, Transport *tp, int rank,
                       const ModelConfig *dc, hid_t file, const char *path, int kv_cap,
                       int max_batch, char *err, size_t errlen);
/* Controller: the draft's layers as a backend (each pass a round trip to the worker). */
LayerBackend remote_draft_backend(RemoteDraft *d);
void remote_draft_free(RemoteDraft *d);

#endif
