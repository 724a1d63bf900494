/* headsplit.h: the pieces of the headsplit program (src/app/headsplit.c runs them): its
 * options and the state of one run, phase by phase.  No MPI here: the collectives are in
 * startup.h and dist.h. */
#ifndef HEADSPLIT_APP_H
#define HEADSPLIT_APP_H

#include "dist.h"
#include "energy.h"
#include "generate.h"
#include "inputs.h"
#include "kernels.h"
#include "plan.h"
#include "startup.h"
#include "tokenizer.h"

#include <jansson.h>
#include <stdio.h>

typedef struct {
    const char *model;
    const char *prompt;
    int steps;
    float temperature, top_p;
    uint64_t seed;
    const char *metrics;
    const char *logits_out;
    const char *transcript;
    Partition partition;
    PlacementKind placement;
    int partition_set, placement_set;
    int partition_auto;
    int solver;         /* --placement dp|exact: 1 the layer DP, 2 the exact head-level
                         * search (the simulator's solvers, solver.h), else 0 */
    int show_placement;
    WaitMode wait_mode;
    MatvecImpl matvec;
    int quiet;
    StartupOptions su;     /* what the measuring phase takes (links, budgets, test aids) */
    const char *speculate; /* auto | all | none */
    float tolerance, min_acceptance;
    int adaptive;
    const char *profile;
    int verbose;
    const char *resume;
    int wire16;             /* --wire: 0 f32, 1 f16, 2 q8 */
    SliceExchange exchange; /* --exchange (EXCHANGE_AUTO: the cost model's choice) */
    int head_on_controller; /* --lm-head controller */
    int static_plan;
    double replace_threshold;
} Options;

/* Parses argv; returns 0, 1 for --help, or -1 with err naming the option. */
int options_parse(Options *o, int argc, char **argv, char *err, size_t errlen);
void options_usage(FILE *out);
/* The "config" object of the metrics. */
json_t *options_json(const Options *o, int n_ranks);

/* One run, filled phase by phase; run_free releases whatever was made. */
typedef struct {
    Options o;
    Transport cm;
    int distributed;        /* more than one rank */
    double t_start;         /* after option parsing */
    ModelConfig cfg;
    hid_t file;             /* the model file until the engine has loaded (-1: closed) */
    int kv_cap;             /* KV-cache positions */
    Tokenizer *tok;         /* controller */
    HeadW head;             /* controller: embeddings, final norm, LM head */
    ClusterInputs ci;       /* distributed: the measured cluster */
    PlanRequest req;        /* distributed: what the plan was built from */
    Plan plan;
    double predicted_ms;
    LocalModel *local;      /* single process */
    DistEngine *dist;       /* distributed */
    double load_s, gen_s;
    GenResult res;
    EnergyMeter meter;
    int have_energy;
    double *all_j;          /* [size] every rank's joules at rank 0 (-1: not measured) */
} Run;

/* The report phase: prints the summary and the per-layer times and, where the generation
 * succeeded (rc 0), writes --metrics (rank 0).  Returns rc, or 1 when the metrics could not
 * be written.  Collective in distributed runs. */
int report_write(Run *run, int rc);

#endif
