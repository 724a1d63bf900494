/* interp.c: the engine's one interpreter of the token's step program (steps.h).  A worker
 * builds the program of the plan in force (again after a re-placement, --wire or a change of
 * the speculation on) and runs a pass by walking its own steps in program order (the
 * computes on it and the messages it is a member of), each by the handler of its (op, what,
 * kind of layer) in the table below.  The controller runs its own steps of a pass the same
 * way: those of the way in when it sends the pass, those of the way out when it takes the
 * pass's result (several passes may be in flight between the two, loop.c).
 *
 * A message step that the handler posts (the gather of head outputs, the speculative Z's
 * send, the receive of X' after a speculative Z) is completed in posting order when a later
 * step of this rank depends on it (the program's deps), before another message on the same
 * group, before a step of a branch of its layer, or once the walk is past its layer; the
 * rest complete where they run.  The steps of a layer's ACCEPT or REJECT branch run as the
 * decision in X''s header says, read at the layer's first branch step.  A pass that carries
 * a command (STOP, REPLAN) runs only the steps that carry it to the next ranks. */
#include "engine_internal.h"

#include "util.h"
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* The kinds of layer a handler serves on a worker (K_ANY: every kind), and the controller's
 * two: the way in (the embedding and layer 0's input) and the way out (layer L). */
enum { K_ANY, K_PIPE, K_SLICE, K_EXACT, K_IN, K_OUT };

static const struct {
    StepOp op;
    StepWhat what;
    int kind;
    StepRun run;
    StepDone done;  /* posted steps: their completion */
    int carries;    /* carries a command through the pipeline */
} handlers[] = {
    {STEP_BCAST, STEP_MSG_INPUT, K_ANY, engine_input_run, engine_input_done, 1},
    {STEP_BCAST, STEP_MSG_SPEC_Z, K_PIPE, engine_spec_z_run, engine_spec_z_done, 1},
    {STEP_SEND, STEP_MSG_Z, K_PIPE, engine_z_run, NULL, 1},
    {STEP_COMPUTE, STEP_WORK_ATTN, K_PIPE, engine_pipe_attn, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_SPEC_ATTN, K_PIPE, engine_pipe_spec_attn, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_REEXEC, K_PIPE, engine_pipe_attn, NULL, 0},
    {STEP_GATHER, STEP_MSG_HEADS, K_PIPE, engine_heads_post, engine_heads_done, 0},
    {STEP_COMPUTE, STEP_WORK_PROJ, K_PIPE, engine_pipe_proj, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_FFN, K_PIPE, engine_pipe_ffn, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_ATTN, K_SLICE, engine_slice_attn, NULL, 0},
    {STEP_ALLGATHER, STEP_MSG_PARTIAL, K_SLICE, engine_xchg_all, NULL, 0},
    {STEP_REDUCE, STEP_MSG_PARTIAL, K_SLICE, engine_xchg_reduce, NULL, 0},
    {STEP_BCAST, STEP_MSG_SUM, K_SLICE, engine_xchg_sum_bcast, NULL, 0},
    {STEP_SCATTER, STEP_MSG_PARTIAL, K_SLICE, engine_xchg_scatter, NULL, 0},
    {STEP_ALLGATHER, STEP_MSG_SUM, K_SLICE, engine_xchg_sum_allgather, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_FFN, K_SLICE, engine_slice_ffn, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_ATTN, K_EXACT, engine_exact_attn, NULL, 0},
    {STEP_ALLGATHER, STEP_MSG_HEADS, K_EXACT, engine_exact_round, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_PROJ, K_EXACT, engine_exact_proj, NULL, 0},
    {STEP_ALLGATHER, STEP_MSG_ROWS, K_EXACT, engine_exact_round, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_FFN, K_EXACT, engine_exact_ffn, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_FFN_DOWN, K_EXACT, engine_exact_down, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_HEAD, K_ANY, engine_head_rows, NULL, 0},
    {STEP_GATHER, STEP_MSG_LOGITS, K_ANY, engine_logits_send, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_EMBED, K_IN, engine_caller_step, NULL, 0},
    {STEP_BCAST, STEP_MSG_INPUT, K_IN, engine_input_run, NULL, 0},
    {STEP_BCAST, STEP_MSG_INPUT, K_OUT, engine_output_take, NULL, 0},
    {STEP_GATHER, STEP_MSG_LOGITS, K_OUT, engine_logits_take, NULL, 0},
    {STEP_COMPUTE, STEP_WORK_HEAD, K_OUT, engine_caller_step, NULL, 0},
};
#define N_HANDLERS ((int)(sizeof handlers / sizeof handlers[0]))

static int kind_of(const DistEngine *e, int l)
{
    if (e->tp->rank == 0)
        return l < e->L ? K_IN : K_OUT;
    if (l < 0 || l >= e->L)
        return K_ANY;
    if (e->plan->layers[l].mode == LAYER_PIPE)
        return K_PIPE;
    return e->plan->exchange == EXCHANGE_EXACT ? K_EXACT : K_SLICE;
}

static int handler_of(const DistEngine *e, const Step *st)
{
    const int kind = kind_of(e, st->layer), ctrl = kind == K_IN || kind == K_OUT;
    for (int i = 0; i < N_HANDLERS; i++)
        if (handlers[i].op == st->op && handlers[i].what == st->what &&
            (handlers[i].kind == kind || (!ctrl && handlers[i].kind == K_ANY)))
            return i;
    return -1;
}

void engine_program_free(DistEngine *e)
{
    EngineProgram *g = &e->prog;
    steps_free(&g->prog);
    free(g->mine);
    free(g->handler);
    free(g->spec);
    memset(g, 0, sizeof *g);
}

/* This rank's steps of the program and their handlers. */
static void program_mine(DistEngine *e)
{
    EngineProgram *g = &e->prog;
    const int me = e->tp->rank, n = g->prog.n_steps;
    g->mine = xmalloc((size_t)(n ? n : 1) * sizeof(int));
    g->handler = xmalloc((size_t)(n ? n : 1) * sizeof(int));
    g->n_mine = 0;
    for (int k = 0; k < n; k++) {
        const Step *st = &g->prog.steps[k];
        g->handler[k] = -1;
        if (st->op == STEP_COMPUTE ? st->rank != me : engine_member(e, st) < 0)
            continue;
        g->handler[k] = handler_of(e, st);
        CHECK(g->handler[k] >= 0, "rank %d: no handler for step %d (%s %s, layer %d)", me, k,
              steps_op_name(st->op), steps_what_name(st->what), st->layer);
        g->mine[g->n_mine++] = k;
    }
}

/* Builds the program when the plan, the wire form or the speculation on changed. */
static void program_refresh(DistEngine *e)
{
    EngineProgram *g = &e->prog;
    int same = g->built && g->wire == e->wire;
    for (int l = 1; same && l < e->L; l++)
        same = g->spec[l] == e->sp.on[l - 1];
    if (same)
        return;
    engine_program_free(e);
    g->spec = xcalloc((size_t)e->L + 1, 1);
    for (int l = 1; l < e->L; l++)
        g->spec[l] = e->sp.on[l - 1];
    g->wire = e->wire;
    const StepOptions o = {e->wire, g->spec};
    steps_build(&g->prog, e->plan, &e->sched, e->c, &o);
    program_mine(e);
    g->built = 1;
}

/* Completes posted step slot i. */
static void complete(DistEngine *e, EngineWalk *w, int i)
{
    const int k = w->pend[i].step;
    handlers[e->prog.handler[k]].done(e, w, &e->prog.prog.steps[k], &w->pend[i].req);
    w->pend[i].step = -1;
}

static int depends(const StepProgram *p, const Step *st, int k)
{
    const int *d = steps_deps(p, st);
    for (int i = 0; i < st->n_deps; i++)
        if (d[i] == k)
            return 1;
    return 0;
}

static int same_group(const StepProgram *p, const Step *a, const Step *b)
{
    return a->n_members == b->n_members &&
           !memcmp(steps_members(p, a), steps_members(p, b), (size_t)a->n_members * sizeof(int));
}

/* Whether posted step p must complete before step st (NULL: the walk's end) runs. */
static int due(const StepProgram *prog, const Step *p, int k, const Step *st)
{
    if (!st || p->layer < st->layer || depends(prog, st, k))
        return 1;
    return st->op != STEP_COMPUTE && same_group(prog, p, st);
}

/* Completes, in posting order, the posted steps that must complete before st; with layer
 * >= 0, instead, those of that layer (its input's receive first). */
static void settle(DistEngine *e, EngineWalk *w, const Step *st, int layer)
{
    const StepProgram *prog = &e->prog.prog;
    for (;;) {
        int best = -1;
        for (int i = 0; i < WALK_MAX_PENDING; i++) {
            const int k = w->pend[i].step;
            if (k < 0)
                continue;
            const Step *p = &prog->steps[k];
            const int need = layer >= 0 ? p->layer == layer : due(prog, p, k, st);
            const int first = layer >= 0 && p->what == STEP_MSG_INPUT;
            if (need && (best < 0 || first || w->pend[i].seq < w->pend[best].seq))
                best = i;
            if (need && first)
                break;
        }
        if (best < 0)
            return;
        complete(e, w, best);
    }
}

/* Before a step of a branch of layer l: the layer's posted steps complete (X' first: the
 * round on the speculative Z is over), and the decision on speculation into l, taken once:
 * X' (received, or sent by this rank) says whether the work on the speculative Z was kept. */
static void decide(DistEngine *e, EngineWalk *w, int l)
{
    settle(e, w, NULL, l);
    if (w->decided == l)
        return;
    const WireHdr xh = engine_read_hdr(e->buf.xmsg, l);
    w->accept = (xh.flags & WIRE_FLAG_ACCEPT) != 0;
    w->decided = l;
}

/* A walk with nothing known, decided or posted yet. */
static void walk_init(EngineWalk *w, const EnginePass *p)
{
    memset(w, 0, sizeof *w);
    w->pass = p;
    w->known = w->decided = -2;
    for (int i = 0; i < WALK_MAX_PENDING; i++)
        w->pend[i].step = -1;
}

int engine_run_pass(DistEngine *e, WireHdr *h)
{
    program_refresh(e);
    EngineProgram *g = &e->prog;
    EngineWalk w;
    walk_init(&w, NULL);
    for (int i = 0; i < g->n_mine; i++) {
        const int k = g->mine[i];
        const Step *st = &g->prog.steps[k];
        const int hx = g->handler[k];
        if (w.stop && (!handlers[hx].carries || st->branch != STEP_ALWAYS))
            continue;
        settle(e, &w, st, -1);
        if (st->branch != STEP_ALWAYS) {
            decide(e, &w, st->layer);
            if (!steps_taken(st, w.accept))
                continue;
        }
        handlers[hx].run(e, &w, st);
    }
    settle(e, &w, NULL, -1);
    engine_control_out(e, &w);
    *h = w.h;
    return w.h.cmd;
}

/* The controller's steps of layers below `below` and at least `from` (it posts nothing). */
static void controller_steps(DistEngine *e, EngineWalk *w, int from, int below)
{
    program_refresh(e);
    const EngineProgram *g = &e->prog;
    for (int i = 0; i < g->n_mine; i++) {
        const Step *st = &g->prog.steps[g->mine[i]];
        if (st->layer >= from && st->layer < below)
            handlers[g->handler[g->mine[i]]].run(e, w, st);
    }
}

void engine_controller_in(DistEngine *e, const WireHdr *h)
{
    EngineWalk w;
    walk_init(&w, NULL);
    w.h = *h;
    controller_steps(e, &w, -1, e->L);
}

void engine_controller_out(DistEngine *e, const EnginePass *p)
{
    EngineWalk w;
    walk_init(&w, p);
    controller_steps(e, &w, e->L, e->L + 1);
}
