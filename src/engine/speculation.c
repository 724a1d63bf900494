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
    int flags = 0, ok = ratio < e->sp.tolerance;
    if (s_out) {
        e->sp.tried[l]++;
        if (ok) {
            e->sp.kept[l]++;
            flags |= WIRE_FLAG_ACCEPT;
        }
        LOG_DEBUG("speculation layer %d->%d: r = %.5f, tolerance %.4f: %s", l, l + 1,
                  (double)ratio, (double)e->sp.tolerance, ok ? "kept" : "re-executed");
    }
    if (e->sp.adaptive && e->sp.eligible[l]) {
        /* Moving average with hysteresis around --min-acceptance. */
        e->sp.acc_ewma[l] = 0.9 * e->sp.acc_ewma[l] + 0.1 * ok;
        int next = e->sp.on[l];
        if (next && e->sp.acc_ewma[l] < e->sp.min_acceptance - 0.05)
            next = 0;
        else if (!next && e->sp.acc_ewma[l] >= e->sp.min_acceptance + 0.05)
            next = 1;
        e->sp.pending[l] = (unsigned char)next;
        flags |= WIRE_FLAG_SPEC_ON | (next ? WIRE_FLAG_SPEC_NEXT : 0);
    }
    return flags;
}

int dist_set_speculation(DistEngine *e, const unsigned char *mask, float tolerance,
                         float min_acceptance, int adaptive)
{
    int n = 0;
    for (int l = 0; l < e->L; l++) {
        e->sp.on[l] = e->sp.pending[l] = mask && mask[l] && e->sp.eligible[l];
        e->sp.acc_ewma[l] = e->sp.on[l] ? 1.0 : 0.0;
        n += e->sp.on[l];
    }
    e->prog.built = 0; /* the program's branches change */
    e->sp.tolerance = tolerance;
    e->sp.min_acceptance = min_acceptance;
    e->sp.adaptive = adaptive;
    return n;
}

const unsigned char *dist_spec_eligible(const DistEngine *e) { return e->sp.eligible; }
