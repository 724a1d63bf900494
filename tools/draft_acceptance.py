#!/usr/bin/python3
"""draft_acceptance.py: offline acceptance statistics of a target/draft pair for speculative
decoding, from the PyTorch models of tools/train_model.py rebuilt from two HeadSplit files.

    /usr/bin/python3 tools/draft_acceptance.py --target weights/austen-llama-9m.h5 \\
        --draft weights/austen-llama.h5 [--text weights/heldout.txt] [--json OUT]

The two files must hold identical /tokenizer groups (same pieces, scores and attributes),
otherwise the tool stops with an error naming the first difference.

1. Held-out text, teacher forced (non-overlapping windows of BOS + context-1 tokens, as the
   held-out loss of tools/train.py): at every position, whether the draft's argmax equals the
   target's (the acceptance of one drafted token at temperature 0), and sum_x min(p(x), q(x))
   for the target's p and the draft's q at temperature 1 (the probability that the standard
   sampling rule accepts one drafted token).
2. The target's greedy path: --prompts prompts of --prompt-len held-out tokens (BOS first,
   spread evenly over the text), each continued --gen tokens greedily by the target (with a KV
   cache; checked against one full forward).  The draft then reads prompt + path teacher
   forced.  At temperature 0 the target accepts drafted token j from position i exactly when
   the draft's greedy tokens agree with the path at i..i+j-1, and while they agree the draft's
   context *is* the path, so one teacher-forced pass gives every proposal: a_i(K) = min(K,
   number of consecutive agreements from i).  Reported for K = 1..--max-k:
   * E[accepted]: the mean of a_i(K) over every position i of the path (i <= gen - max_k);
   * P(all K): the share of those positions where all K drafted tokens are accepted;
   * tokens/pass: the decoding walk of speculative decoding over each path (a pass at i
     yields a_i(K) + 1 tokens, the next pass starts at i + a_i(K) + 1; passes start at
     i <= gen - max_k, where no run is cut short by the end of the path): tokens / passes,
     the speed-up bound with a free draft and a pass cost independent of K;
   * sampling: (1 - a^(K+1)) / (1 - a) tokens per pass with a = the mean of sum_x min(p, q)
     of part 1 (the i.i.d. approximation of Leviathan et al., 2023).
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import train_model  # noqa: E402
import train_tok  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tokenizer_difference(path_a, path_b):
    """None when the /tokenizer groups of the two files are identical, else a description."""
    with h5py.File(path_a, "r") as fa, h5py.File(path_b, "r") as fb:
        if "tokenizer" not in fa or "tokenizer" not in fb:
            return "a file has no /tokenizer group"
        ta, tb = fa["tokenizer"], fb["tokenizer"]
        if sorted(ta.attrs.keys()) != sorted(tb.attrs.keys()):
            return "attribute names differ: %s vs %s" % (sorted(ta.attrs.keys()),
                                                         sorted(tb.attrs.keys()))
        for k in ta.attrs.keys():
            if not np.array_equal(np.asarray(ta.attrs[k]), np.asarray(tb.attrs[k])):
                return "attribute %s differs: %r vs %r" % (k, ta.attrs[k], tb.attrs[k])
        if sorted(ta.keys()) != sorted(tb.keys()):
            return "datasets differ: %s vs %s" % (sorted(ta.keys()), sorted(tb.keys()))
        for k in ta.keys():
            a, b = np.asarray(ta[k]), np.asarray(tb[k])
            if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
                return "dataset %s differs (%s %s vs %s %s)" % (k, a.dtype, a.shape, b.dtype,
                                                                b.shape)
    return None


@torch.no_grad()
def cached_forward(model, idx, cache, pos):
    """Logits [B][t][V] of tokens idx [B][t] at positions pos..pos+t-1, appending their keys
    and values to cache (a list of per-layer [k, v], [B][G][P][hd]); the same arithmetic as
    train_model.Model.forward, one position range at a time."""
    cfg = model.cfg
    B, t = idx.shape
    H, G, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    Q = H // G
    x = model.embed(idx)
    rope = None
    if cfg.arch == "gpt2":
        x = x + model.pos_embed(torch.arange(pos, pos + t))
    else:
        cos, sin = train_model.rope_tables(cfg, cfg.context_length)
        rope = (cos[pos:pos + t], sin[pos:pos + t])
    P = pos + t
    mask = torch.zeros(t, P)
    mask[:, pos:] = torch.triu(torch.full((t, t), float("-inf")), 1)
    while len(cache) < cfg.n_layers:
        cache.append([None, None])
    for l, b in enumerate(model.layers):
        n = b.attn_norm(x)
        q = b.wq(n).view(B, t, H, hd).transpose(1, 2)
        k = b.wk(n).view(B, t, G, hd).transpose(1, 2)
        v = b.wv(n).view(B, t, G, hd).transpose(1, 2)
        if rope is not None:
            q = train_model.apply_rope(q, *rope)
            k = train_model.apply_rope(k, *rope)
        if cache[l][0] is not None:
            k = torch.cat((cache[l][0], k), dim=2)
            v = torch.cat((cache[l][1], v), dim=2)
        cache[l] = [k, v]
        kk = k.repeat_interleave(Q, dim=1)  # query head h reads KV head h // Q
        vv = v.repeat_interleave(Q, dim=1)
        att = (q * (1.0 / math.sqrt(hd))) @ kk.transpose(2, 3) + mask
        y = torch.softmax(att, dim=-1) @ vv
        y = y.transpose(1, 2).reshape(B, t, H * hd)
        x = x + b.wo(y)
        m = b.ffn_norm(x)
        if cfg.arch == "llama":
            h = F.silu(b.w_gate(m)) * b.w_up(m)
        else:
            h = F.gelu(b.w_up(m), approximate="tanh")
        x = x + b.w_down(h)
    x = model.final_norm(x)
    w = model.embed.weight if cfg.tied else model.lm_head.weight
    return x @ w.t()


@torch.no_grad()
def greedy_paths(model, prompts, gen):
    """Greedy continuations [B][gen] of equal-length prompts [B][P] (KV cache), and the
    largest |cached - full forward| logit difference over prompt + path."""
    cache = []
    logits = cached_forward(model, prompts, cache, 0)[:, -1]
    out = []
    pos = prompts.shape[1]
    for _ in range(gen):
        nxt = logits.argmax(dim=-1, keepdim=True)
        out.append(nxt)
        if len(out) == gen:
            break
        logits = cached_forward(model, nxt, cache, pos)[:, -1]
        pos += 1
    path = torch.cat(out, dim=1)
    # Check: the full forward over prompt + path picks the same tokens.
    full = model(torch.cat((prompts, path), dim=1))
    P = prompts.shape[1]
    full_pick = full[:, P - 1:P - 1 + gen].argmax(dim=-1)
    return path, int((full_pick != path).sum())


@torch.no_grad()
def heldout_stats(target, draft, ids, T, max_windows, B=8):
    agree, overlap, n, nats_t, nats_d = 0, 0.0, 0, 0.0, 0.0
    wins = []
    for s in range(0, len(ids), T - 1):
        chunk = ids[s:s + T - 1]
        wins.append(([train_tok.BOS] + list(chunk[:-1]), list(chunk)))
    if max_windows:
        wins = wins[:max_windows]
    batches = []
    for i in range(0, len(wins), B):
        group = wins[i:i + B]
        if all(len(w[0]) == len(group[0][0]) for w in group):
            batches.append(group)
        else:  # the last, shorter window runs alone
            batches.extend([w] for w in group)
    for g in batches:
        x = torch.tensor([w[0] for w in g])
        y = torch.tensor([w[1] for w in g])
        lt = target(x)
        ld = draft(x)
        agree += int((lt.argmax(-1) == ld.argmax(-1)).sum())
        p = torch.softmax(lt.double(), -1)
        q = torch.softmax(ld.double(), -1)
        overlap += float(torch.minimum(p, q).sum())
        nats_t += float(F.cross_entropy(lt.reshape(-1, lt.shape[-1]), y.reshape(-1),
                                        reduction="sum"))
        nats_d += float(F.cross_entropy(ld.reshape(-1, ld.shape[-1]), y.reshape(-1),
                                        reduction="sum"))
        n += y.numel()
    return dict(positions=n, windows=len(wins), greedy_agreement=agree / n,
                min_pq=overlap / n, target_nats=nats_t / n, draft_nats=nats_d / n)


def runs_from(match):
    """run[i] = number of consecutive True from i."""
    run = np.zeros(len(match) + 1, dtype=np.int64)
    for i in range(len(match) - 1, -1, -1):
        run[i] = run[i + 1] + 1 if match[i] else 0
    return run[:-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, help="target model file (.h5)")
    ap.add_argument("--draft", required=True, help="draft model file (.h5)")
    ap.add_argument("--text", default=os.path.join(ROOT, "weights", "heldout.txt"))
    ap.add_argument("--max-windows", type=int, default=0,
                    help="held-out windows for part 1 (0: all)")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=64, help="prompt tokens, BOS included")
    ap.add_argument("--gen", type=int, default=128, help="greedy tokens per prompt")
    ap.add_argument("--max-k", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the numbers here")
    a = ap.parse_args()
    a.text = os.path.relpath(a.text)
    for f in (a.target, a.draft, a.text):
        if not os.path.isfile(f):
            sys.exit("draft_acceptance: %s: no such file" % f)
    if a.prompts < 1 or a.prompt_len < 1 or a.max_k < 1 or a.gen <= a.max_k:
        sys.exit("draft_acceptance: need --prompts >= 1, --prompt-len >= 1, --max-k >= 1 "
                 "and --gen > --max-k")
    torch.set_num_threads(a.threads)
    t0 = time.time()
    diff = tokenizer_difference(a.target, a.draft)
    if diff:
        sys.exit("draft_acceptance: %s and %s do not share a tokenizer: %s" % (
            a.target, a.draft, diff))
    target, tok = train_model.load_h5(a.target)
    draft, _ = train_model.load_h5(a.draft)
    target.eval()
    draft.eval()
    ctx = min(target.cfg.context_length, draft.cfg.context_length)
    if a.prompt_len + a.gen > ctx:
        sys.exit("draft_acceptance: --prompt-len + --gen = %d exceeds the context length %d"
                 % (a.prompt_len + a.gen, ctx))
    with open(a.text, encoding="utf-8") as f:
        ids = tok.encode(f.read())
    print("target %s: %s, %d parameters" % (a.target, target.cfg.describe(), target.n_params()))
    print("draft  %s: %s, %d parameters" % (a.draft, draft.cfg.describe(), draft.n_params()))
    print("tokenizer groups identical; %s: %d tokens" % (a.text, len(ids)))

    h = heldout_stats(target, draft, ids, ctx, a.max_windows)
    print("\n1. held-out text, teacher forced (%d positions in %d windows):" % (
        h["positions"], h["windows"]))
    print("   loss: target %.4f, draft %.4f nats/token" % (h["target_nats"], h["draft_nats"]))
    print("   temperature 0, draft argmax = target argmax: %.4f" % h["greedy_agreement"])
    print("   temperature 1, sum_x min(p(x), q(x)):        %.4f" % h["min_pq"])

    need = a.prompt_len - 1
    span = len(ids) - need
    if span < a.prompts:
        sys.exit("draft_acceptance: %s is too short for %d prompts of %d tokens" % (
            a.text, a.prompts, a.prompt_len))
    starts = [i * span // a.prompts for i in range(a.prompts)]
    prompts = torch.tensor([[train_tok.BOS] + ids[s:s + need] for s in starts])
    paths, mismatch = greedy_paths(target, prompts, a.gen)
    with torch.no_grad():
        ld = draft(torch.cat((prompts, paths), dim=1))
    P = a.prompt_len
    dpick = ld[:, P - 1:P - 1 + a.gen].argmax(dim=-1)
    match = (dpick == paths).numpy()
    n_pos = a.gen - a.max_k + 1
    rows = []
    for K in range(1, a.max_k + 1):
        acc, full, passes, made = 0, 0, 0, 0
        for b in range(a.prompts):
            run = runs_from(match[b])
            acc += int(np.minimum(run[:n_pos], K).sum())
            full += int((run[:n_pos] >= K).sum())
            i = 0
            while i < n_pos:  # where run[i] is not cut short by the end of the path
                step = min(K, int(run[i])) + 1
                i += step
                made += step
                passes += 1
        alpha = h["min_pq"]
        rows.append(dict(K=K, mean_accepted=acc / (a.prompts * n_pos),
                         all_accepted=full / (a.prompts * n_pos), passes=passes,
                         tokens_per_pass=made / passes,
                         sampling_tokens_per_pass=(1 - alpha ** (K + 1)) / (1 - alpha)
                         if alpha < 1 else K + 1.0))
    g = dict(prompts=a.prompts, prompt_len=a.prompt_len, gen=a.gen,
             greedy_agreement=float(match.mean()), full_forward_mismatches=mismatch,
             rows=rows)
    print("\n2. the target's greedy path (%d prompts of %d tokens, %d generated each; "
          "positions where one full forward picks another token than the cached one: %d):" % (
              a.prompts, a.prompt_len, a.gen, mismatch))
    print("   temperature 0, draft argmax = path token: %.4f" % g["greedy_agreement"])
    print("\n   K | E[accepted] | P(all K) | tokens/pass (walk) | passes | "
          "sampling tokens/pass (i.i.d.)")
    for r in rows:
        print("  %2d | %11.3f | %8.3f | %18.3f | %6d | %10.3f" % (
            r["K"], r["mean_accepted"], r["all_accepted"], r["tokens_per_pass"], r["passes"],
            r["sampling_tokens_per_pass"]))
    print("\n(%.1f s)" % (time.time() - t0))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(target=a.target, draft=a.draft, text=a.text, heldout=h,
                           greedy_path=g), f, indent=1)


if __name__ == "__main__":
    main()
