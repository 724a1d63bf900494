/* speculation.c: inter-layer speculation: the decision at an FFN rank and the per-transition
 * state (which transitions may speculate comes from the schedule). */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* Decides a speculation at the FFN rank of layer l (r = ||FFN(Z)|| / ||Z||); returns the
 * header flags for X'.  Logged at debug level. */
int engine_spec_decide(DistEngine *e, int l, float ratio, int s_out)
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
