/* cost.c: the simulator's cost model and names.  Decoding one token streams every weight
 * once, so a compute op costs (weight bytes + KV-cache bytes read) / device speed plus a fixed
 * per-op overhead; weight sizes come from the same accounting as placement
 * (config_attn_unit_floats, config_proj_floats, config_ffn_floats, config_kv_bytes).  A message
 * costs latency + bytes / bandwidth (jitter and contention are the event core's). */
#include "sim.h"

#include "h5io.h"
#include "util.h"
#include "wire.h"

#include <string.h>

static const SimDevice *dev_of(const SimCluster *cl, int rank) { return &cl->dev[rank]; }

static double on_device(const SimCluster *cl, int rank, double bytes)
{
    const SimDevice *d = dev_of(cl, rank);
    return bytes / d->speed + d->op_overhead;
}

double sim_cost_attn(const ModelConfig *c, const SimCluster *cl, int rank, int n_q, int pos)
{
    /* The part's weights, and K and V of its KV group for positions 0..pos. */
    double bytes = (double)config_attn_unit_floats(c, n_q) * sizeof(float) +
                   (double)config_kv_bytes(c, pos + 1);
    return on_device(cl, rank, bytes);
}

double sim_cost_proj(const ModelConfig *c, const SimCluster *cl, int rank)
{
    return on_device(cl, rank, (double)config_proj_floats(c) * sizeof(float));
}

double sim_cost_ffn(const ModelConfig *c, const SimCluster *cl, int rank)
{
    return on_device(cl, rank, (double)config_ffn_floats(c, c->ffn_dim) * sizeof(float));
}

double sim_cost_controller(const ModelConfig *c, const SimCluster *cl, int embed)
{
    /* Embedding: one row.  Head: final norm and the LM head over the vocabulary. */
    double bytes = embed ? (double)c->dim * sizeof(float)
                         : ((double)c->vocab_size + 1.0) * c->dim * sizeof(float);
    return on_device(cl, 0, bytes);
}

double sim_cost_msg(const SimCluster *cl, int a, int b, double bytes)
{
    if (a == b)
        return 0;
    const SimLink *lk = &cl->link[(size_t)a * (size_t)(cl->n_workers + 1) + (size_t)b];
    return lk->latency + bytes / lk->bandwidth;
}

/* Every engine message starts with the wire header (include/wire.h, MPI-free). */
double sim_msg_bytes(const ModelConfig *c)
{
    return (double)sizeof(WireHdr) + (double)c->dim * sizeof(float);
}

typedef struct {
    const char *name;
    ModelConfig c;
} SimShape;

/* The shapes of headsplit-convert --synthetic (src/convert/synthetic.c). */
static const SimShape shapes[] = {
    {"tinyllama-1.1b",
     {.arch = ARCH_LLAMA, .dim = 2048, .n_layers = 22, .n_heads = 32, .n_kv_heads = 4,
      .head_dim = 64, .ffn_dim = 5632, .vocab_size = 32000, .context_length = 2048,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_HALF,
      .tied_embeddings = 0, .bos_id = 1, .eos_id = 2}},
    {"gpt2-small",
     {.arch = ARCH_GPT2, .dim = 768, .n_layers = 12, .n_heads = 12, .n_kv_heads = 12,
      .head_dim = 64, .ffn_dim = 3072, .vocab_size = 50257, .context_length = 1024,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_NONE,
      .tied_embeddings = 1, .bos_id = 50256, .eos_id = 50256}},
    {"stories260k",
     {.arch = ARCH_LLAMA, .dim = 64, .n_layers = 5, .n_heads = 8, .n_kv_heads = 4,
      .head_dim = 8, .ffn_dim = 172, .vocab_size = 512, .context_length = 512,
      .norm_eps = 1e-5f, .rope_theta = 10000.0f, .rope_style = ROPE_INTERLEAVED,
      .tied_embeddings = 1, .bos_id = 1, .eos_id = 2}},
};

int sim_model_preset(ModelConfig *c, const char *name, int layers, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(name, shapes[i].name) == 0) {
            *c = shapes[i].c;
            if (layers > 0)
                c->n_layers = layers;
            return config_validate(c, err, errlen);
        }
    return util_err(err, errlen, "--shape: unknown model '%s' (tinyllama-1.1b, gpt2-small, "
                    "stories260k)", name);
}

int sim_model_read(ModelConfig *c, const char *path, char *err, size_t errlen)
{
    h5io_quiet();
    hid_t f = h5io_open_read(path, err, errlen);
    if (f < 0)
        return -1;
    int rc = config_read(c, f, path, err, errlen);
    H5Fclose(f);
    return rc;
}

static const char *policy_names[SIM_POLICY_COUNT] = {"layer-dp", "galaxy", "greedy", "dynamic",
                                                     "plan"};

const char *sim_policy_name(SimPolicy p)
{
    return (unsigned)p < SIM_POLICY_COUNT ? policy_names[p] : "?";
}

int sim_parse_policy(const char *s, SimPolicy *out)
{
    for (int p = 0; p < SIM_POLICY_COUNT; p++)
        if (strcmp(s, policy_names[p]) == 0) {
            *out = (SimPolicy)p;
            return 0;
        }
    return -1;
}

const char *sim_tag_name(SimTag t)
{
    static const char *names[SIM_TAG_COUNT] = {
        "embed", "head", "attn", "spec_attn", "reexec", "proj", "ffn", "bcast", "spec_bcast",
        "gather", "z", "out", "exchange", "kv_move", "reload", "join"};
    return (unsigned)t < SIM_TAG_COUNT ? names[t] : "?";
}
