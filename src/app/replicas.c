/* replicas.c: --replicas K on the headsplit program's side.  The plan is K copies of the
 * layers, each on its own group of workers (src/plan/replicas.c); every rank sets up every
 * copy's engine in the same order (their groups are collective over all ranks), a worker
 * loading only its own copy's slices and running only its engine; the controller drives all
 * of them through one backend (src/engine/replicas.c) that sends each slot's rows to its
 * copy.  --partition auto picks the copies when serving several slots (one line saying
 * why); a single stream keeps the latency objective.  The metrics say which workers hold
 * each copy and the passes each ran. */
#include "headsplit.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>

/* Sequence slots copy k holds of the run's (slot s on copy s % K; at least one). */
static int copy_slots(const Run *run, int k)
{
    const int mine = (run->slots - k + run->n_copies - 1) / run->n_copies;
    return mine > 0 ? mine : 1;
}

int replicas_plan(Run *run, int slots, char *err, size_t errlen)
{
    Options *o = &run->o;
    run->n_copies = o->replicas > 0 ? o->replicas : 1;
    if (o->partition_auto && o->serve && slots > 1 && run->req.n_workers > 1 &&
        o->placement != PLACEMENT_DP && o->placement != PLACEMENT_EXACT) {
        char why[1024];
        int k = 1;
        if (plan_choose_replicas(&run->cfg, &run->req, slots, run->kv_cap, &k, why,
                                 sizeof why) == 0) {
            if (run->cm.rank == 0)
                LOG_INFO("headsplit: %s", why);
            run->n_copies = k;
            if (k > 1)
                run->auto_replicas = 1;
        }
    }
    if (run->n_copies == 1)
        return 0; /* one copy: the plan as before */
    PlanRequest req = run->req;
    if (!o->partition_set || o->partition_auto)
        req.partition = PARTITION_LAYER;
    if (!o->placement_set || o->partition_auto)
        req.placement = PLACEMENT_LAYER;
    if (plan_replicas_check(&req, run->n_copies, err, errlen) < 0)
        return -1;
    /* every copy's budgets hold its share of the slots' KV caches */
    req.kv_positions = run->kv_cap * ((slots + run->n_copies - 1) / run->n_copies);
    run->cplans = xcalloc((size_t)run->n_copies, sizeof *run->cplans);
    if (plan_build_replicas(run->cplans, &run->cfg, &req, run->n_copies, err, errlen) < 0) {
        free(run->cplans);
        run->cplans = NULL;
        return -1;
    }
    req.kv_positions = run->req.kv_positions;
    run->req = req;
    plan_copy(&run->plan, &run->cplans[0]);
    return 1;
}

/* Copy k's engine, set up as load_dist sets up the one engine of a plan; the control group
 * is the controller and the copy's workers.  0, or 1 after an error every rank agrees on. */
static int load_copy(Run *run, int k, int max_batch, unsigned char *mask, char *err,
                     size_t errlen)
{
    const Options *o = &run->o;
    Transport *cm = &run->cm;
    if (dist_setup(&run->copies[k], cm, &run->cfg, &run->cplans[k], run->file, o->model,
                   run->kv_cap) < 0)
        return 1;
    DistEngine *e = run->copies[k];
    int first;
    const int n = plan_copy_workers(cm->size - 1, run->n_copies, k, &first);
    int *members = xcalloc((size_t)n + 1, sizeof *members);
    for (int i = 0; i < n; i++)
        members[i + 1] = first + i;
    dist_set_control(e, members, n + 1);
    free(members);
    if (cm->rank >= first && cm->rank < first + n)
        run->dist = e; /* a worker runs its own copy's engine */
    dist_set_wire(e, o->wire);
    dist_set_max_batch(e, max_batch);
    dist_set_ubatch(e, o->ubatch);
    dist_set_speculation(e, mask, o->tolerance, o->min_acceptance, 0);
    /* no re-placement: it would gather every rank while the other copies decode; the
     * budgets were checked for every slot's caches at the full positions */
    dist_set_memory(e, &run->req, run->kv_cap, o->replace_threshold, 1);
    dist_set_slots(e, copy_slots(run, k));
    if (!err[0])
        dist_check_slots_memory(e, err, errlen);
    return 0;
}

int replicas_load(Run *run, int max_batch)
{
    Transport *cm = &run->cm;
    char err[600] = "";
    run->copies = xcalloc((size_t)run->n_copies, sizeof *run->copies);
    unsigned char *mask = xcalloc((size_t)run->cfg.n_layers, 1); /* no speculation */
    int bad = 0;
    for (int k = 0; k < run->n_copies && !bad; k++)
        bad = load_copy(run, k, max_batch, mask, err, sizeof err);
    free(mask);
    if (cm->rank == 0)
        run->dist = run->copies[0];
    if (!bad && err[0]) {
        if (cm->rank == 0)
            fprintf(stderr, "headsplit: error: --replicas %d: %s\n", run->n_copies, err);
        bad = 1;
    }
    if (!bad && cm->rank == 0 && !run->o.quiet)
        for (int k = 0; k < run->n_copies; k++)
            dist_print_memory_prediction(run->copies[k], stderr);
    return bad;
}

void replicas_stop(Run *run)
{
    for (int k = 0; k < run->n_copies; k++)
        dist_controller_stop(run->copies[k]);
}

json_t *replicas_json(const Run *run)
{
    json_t *j = json_object();
    json_object_set_new(j, "copies", json_integer(run->n_copies));
    json_object_set_new(j, "chosen_by", json_string(run->auto_replicas ? "auto"
                                                    : run->n_copies > 1 ? "--replicas"
                                                                        : "default"));
    json_t *arr = json_array();
    for (int k = 0; k < run->n_copies; k++) {
        json_t *c = json_object();
        int first;
        const int n = plan_copy_workers(run->cm.size - 1, run->n_copies, k, &first);
        json_t *w = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(w, json_integer(first + i));
        json_object_set_new(c, "workers", w);
        const DistEngine *e = run->copies ? run->copies[k] : run->dist;
        json_object_set_new(c, "passes", json_integer(e ? dist_passes(e) : 0));
        json_object_set_new(c, "slots", json_integer(copy_slots(run, k)));
        json_array_append_new(arr, c);
    }
    json_object_set_new(j, "replicas", arr);
    return j;
}

void replicas_free(Run *run)
{
    if (run->copies) /* every rank frees every copy's groups, in the same order */
        run->dist = NULL;
    for (int k = 0; run->copies && k < run->n_copies; k++)
        dist_free(run->copies[k]);
    free(run->copies);
    run->copies = NULL;
    for (int k = 0; run->cplans && k < run->n_copies; k++)
        plan_free(&run->cplans[k]);
    free(run->cplans);
    run->cplans = NULL;
}
