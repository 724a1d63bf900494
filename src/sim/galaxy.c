/* galaxy.c: the Galaxy-style hybrid as a plan: the engine's SLICE layers over every device,
 * attention parts and FFN columns in proportion to device speed within the memory budgets.
 * That is the planner's SLICE water-fill (plan_build with PLACEMENT_WATERFILL, src/plan/
 * waterfill.c), which the engine runs as --placement waterfill; here it gets the simulated
 * devices.  Speculation does not apply to SLICE layers (the engine's rule). */
#include "sim_internal.h"

#include "util.h"

#include <stdlib.h>

int galaxy_build_plan(Plan *p, const ModelConfig *c, const Cluster *cl, int kv_positions,
                      char *err, size_t errlen)
{
    /* The water-fill reads the devices' speeds and budgets, not the links. */
    PlanRequest req = {.partition = PARTITION_SLICE, .placement = PLACEMENT_WATERFILL,
                       .kv_positions = kv_positions};
    char perr[256];
    int rc = plan_build_cluster(p, c, &req, cl, 1.0, 0, perr, sizeof perr);
    if (rc < 0)
        util_err(err, errlen, "galaxy: %s", perr);
    return rc;
}
