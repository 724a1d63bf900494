#!/usr/bin/python3
"""train.py: train one of HeadSplit's two small shipped models and write it as a HeadSplit
HDF5 model file (docs/model-format.md).

Corpus: Jane Austen's six novels from the Debian package r-cran-janeaustenr (MIT; the texts
are public domain, Project Gutenberg transcriptions), read by tools/train_corpus.py.  The
last 5% of the corpus (cut at a paragraph break; the end of "Persuasion") is held out for
validation and written to --heldout-out.  Tokenizer: a 1024-piece byte-pair encoding learned
by tools/train_tok.py on the training part, stored as an `spm` tokenizer with byte fallback;
or, with --vocab 259, plain bytes.  Architectures: tools/train_model.py.

Needs only Debian packages: apt-get install python3-torch python3-numpy python3-h5py
r-cran-janeaustenr (or unpack that .deb with dpkg-deb -x, see train_corpus.py).  Run with
/usr/bin/python3.  Deterministic for a given --seed, thread count and PyTorch build.

    /usr/bin/python3 tools/train.py --arch llama --out weights/austen-llama.h5
    /usr/bin/python3 tools/train.py --arch gpt2  --out weights/austen-gpt2.h5

Distillation (--distill-from TEACHER.h5): a teacher model of the same tokenizer runs in eval
mode, without gradients, on every training batch, and the loss becomes
    A * T^2 * KL(teacher_T || student_T) + (1 - A) * cross-entropy(student, corpus tokens)
with A = --distill-alpha, T = --distill-temp and p_T = softmax(logits / T), averaged over the
batch's positions.  With --distill-paths N (sequence-level distillation) the teacher first
continues N prompts of the training text greedily to the full window, and --distill-mix of
every batch's windows are drawn from these paths (there the cross-entropy's tokens are the
teacher's own).  With --init-from the draft model of speculative decoding is fine-tuned
towards its target (weights/README.md, "The distilled draft", has the shipped two stages):

    /usr/bin/python3 tools/train.py --arch llama --init-from weights/austen-llama.h5 \
        --distill-from weights/austen-llama-9m.h5 --out weights/austen-llama-draft.h5
"""
import argparse
import json
import signal
import math
import os
import sys
import time
import warnings

# Large temporaries in glibc's heap (not fresh mmaps) on transparent huge pages, and OpenMP
# threads that sleep instead of spinning: on a small shared VM page faults and spinning
# otherwise cost several times the arithmetic.  Set before the process starts, so re-exec.
_TUNABLES = ("glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:"
             "glibc.malloc.trim_threshold=100000000000:glibc.malloc.top_pad=1073741824")
if os.environ.get("HEADSPLIT_TRAIN_REEXEC") != "1":
    env = dict(os.environ, HEADSPLIT_TRAIN_REEXEC="1", GLIBC_TUNABLES=_TUNABLES,
               OMP_WAIT_POLICY="PASSIVE")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import train_corpus  # noqa: E402
import train_model  # noqa: E402
import train_tok  # noqa: E402

HELDOUT_FRACTION = 0.05

# Default shapes: small enough to ship (a few MB) and to train on 2 cores in ~20 minutes.
DEFAULTS = {
    "llama": dict(dim=128, layers=6, heads=8, kv_heads=2, ffn=384),
    "gpt2": dict(dim=128, layers=6, heads=8, kv_heads=8, ffn=512),
}


def split_corpus(docs):
    """Training documents and held-out text: the last HELDOUT_FRACTION of the corpus's
    characters, moved forward to the next paragraph break."""
    total = sum(len(t) for _, t in docs)
    cut = int(total * (1.0 - HELDOUT_FRACTION))
    train, seen = [], 0
    for name, text in docs:
        if seen + len(text) <= cut:
            train.append((name, text))
            seen += len(text)
            continue
        at = text.find("\n\n", cut - seen)
        at = len(text) if at < 0 else at + 2
        if at > 0:
            train.append((name, text[:at]))
        heldout = text[at:]
        return train, heldout
    return train, ""


def token_stream(tok, docs):
    """BOS doc EOS BOS doc EOS ... as one int64 array."""
    out = []
    for _, text in docs:
        out.append(train_tok.BOS)
        out.extend(tok.encode(text))
        out.append(train_tok.EOS)
    return np.array(out, dtype=np.int64)


def batches_from(stream, T, B, gen):
    """B windows: input BOS + stream[s:s+T-1], target stream[s:s+T] (BOS starts every
    window, as the engine starts every prompt with BOS)."""
    starts = torch.randint(0, len(stream) - T, (B,), generator=gen)
    x = torch.empty(B, T, dtype=torch.long)
    y = torch.empty(B, T, dtype=torch.long)
    st = torch.from_numpy(stream)
    for i, s in enumerate(starts.tolist()):
        x[i, 0] = train_tok.BOS
        x[i, 1:] = st[s:s + T - 1]
        y[i] = st[s:s + T]
    return x, y


def heldout_windows(ids, T):
    """Non-overlapping windows: BOS + T-1 tokens predicting those T-1 tokens."""
    wins = []
    for s in range(0, len(ids), T - 1):
        chunk = ids[s:s + T - 1]
        wins.append(([train_tok.BOS] + list(chunk[:-1]), list(chunk)))
    return wins


@torch.no_grad()
def evaluate(model, wins, B=8, teacher=None):
    """Held-out nats and positions; with a teacher also the number of positions where the
    model's argmax is the teacher's (returned as a third value)."""
    model.eval()
    nats, n, agree = 0.0, 0, 0
    for i in range(0, len(wins), B):
        group = wins[i:i + B]
        L = max(len(x) for x, _ in group)
        x = torch.zeros(len(group), L, dtype=torch.long)
        y = torch.full((len(group), L), -100, dtype=torch.long)
        for j, (xi, yi) in enumerate(group):
            x[j, :len(xi)] = torch.tensor(xi)
            y[j, :len(yi)] = torch.tensor(yi)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1),
                               ignore_index=-100, reduction="sum")
        nats += loss.item()
        n += int((y != -100).sum())
        if teacher is not None:
            same = teacher(x).argmax(-1) == logits.argmax(-1)
            agree += int((same & (y != -100)).sum())
    model.train()
    if teacher is not None:
        return nats, n, agree
    return nats, n


def distill_loss(logits, teacher_logits, y, temp, alpha):
    """alpha * temp^2 * KL(softmax(t / temp) || softmax(s / temp)) + (1 - alpha) * CE(s, y),
    both means over the positions; also returns the two terms (floats) for the log."""
    V = logits.shape[-1]
    s = logits.view(-1, V)
    t = teacher_logits.view(-1, V)
    log_q = F.log_softmax(s / temp, dim=-1)
    log_p = F.log_softmax(t / temp, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1).mean() * (temp * temp)
    ce = F.cross_entropy(s, y.view(-1))
    if alpha >= 1.0:
        loss = kl
    elif alpha <= 0.0:
        loss = ce
    else:
        loss = alpha * kl + (1.0 - alpha) * ce
    return loss, kl.item(), ce.item()


def load_teacher(path, init_from, tok, cfg):
    """The teacher of --distill-from: same /tokenizer group as the student (the --init-from
    file's, and the one this run built), same vocabulary, a context at least the student's."""
    import draft_acceptance
    if not os.path.isfile(path):
        sys.exit("train.py: --distill-from %s: no such file" % path)
    if init_from:
        diff = draft_acceptance.tokenizer_difference(path, init_from)
        if diff:
            sys.exit("train.py: --distill-from %s and --init-from %s do not share a tokenizer: "
                     "%s" % (path, init_from, diff))
    teacher, t_tok = train_model.load_h5(path)
    if [np.asarray(x).tolist() for x in t_tok.h5_arrays()] != \
            [np.asarray(x).tolist() for x in tok.h5_arrays()]:
        sys.exit("train.py: --distill-from %s: its tokenizer differs from this run's" % path)
    if teacher.cfg.vocab_size != cfg.vocab_size or \
            teacher.cfg.context_length < cfg.context_length:
        sys.exit("train.py: --distill-from %s: vocabulary %d, context %d; the student has %d, %d"
                 % (path, teacher.cfg.vocab_size, teacher.cfg.context_length, cfg.vocab_size,
                    cfg.context_length))
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


@torch.no_grad()
def teacher_paths(teacher, stream, T, n, prompt_len, temp, gen, log):
    """n windows of T + 1 tokens for sequence-level distillation: BOS, prompt_len - 1 tokens
    of the training stream from a random start, then the teacher's own continuation
    (greedy at temp 0, else sampled at temp) up to T + 1 tokens.  Int64 [n][T + 1]."""
    import draft_acceptance
    st = torch.from_numpy(stream)
    out = []
    B = 64
    t0 = time.time()
    for i in range(0, n, B):
        b = min(B, n - i)
        starts = torch.randint(0, len(stream) - prompt_len, (b,), generator=gen).tolist()
        seq = torch.empty(b, prompt_len, dtype=torch.long)
        seq[:, 0] = train_tok.BOS
        for j, s0 in enumerate(starts):
            seq[j, 1:] = st[s0:s0 + prompt_len - 1]
        cache = []
        logits = draft_acceptance.cached_forward(teacher, seq, cache, 0)[:, -1]
        toks = [seq]
        pos = prompt_len
        while pos < T + 1:
            if temp > 0:
                nxt = torch.multinomial(torch.softmax(logits.double() / temp, -1), 1,
                                        generator=gen)
            else:
                nxt = logits.argmax(-1, keepdim=True)
            toks.append(nxt)
            pos += 1
            if pos < T + 1:
                logits = draft_acceptance.cached_forward(teacher, nxt, cache, pos - 1)[:, -1]
        out.append(torch.cat(toks, dim=1))
        log("teacher paths: %d of %d (%.0f s)" % (i + b, n, time.time() - t0))
    return torch.cat(out, dim=0)


def decay_start(steps, decay_frac):
    """First step of the final linear decay of the wsd schedule."""
    return steps - int(decay_frac * steps)


def lr_at(step, steps, lr, warmup, min_ratio=0.1, schedule="cosine", decay_frac=0.2):
    """cosine: linear warm-up, then cosine from lr to min_ratio * lr at the last step.
    wsd (warm-up, stable, decay): linear warm-up, constant lr, then over the last
    decay_frac of the steps linear decay to min_ratio * lr.  The stable phase does not depend
    on --steps, so a run shortened while in it (SIGUSR2) equals a run given the shorter
    --steps from the start."""
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "wsd":
        d0 = decay_start(steps, decay_frac)
        if step < d0:
            return lr
        p = (step - d0 + 1) / max(1, steps - d0)
        return lr * (1 - (1 - min_ratio) * p)
    p = (step - warmup) / max(1, steps - warmup)
    return lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


def shortest_steps(step, decay_frac):
    """The smallest total whose wsd decay starts at `step` or later."""
    n = step + 1
    while decay_start(n, decay_frac) < step:
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=("llama", "gpt2"), required=True)
    ap.add_argument("--out", required=True, help="model file to write (.h5)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=8, help="windows per step")
    ap.add_argument("--context", type=int, default=256, help="window = context_length")
    ap.add_argument("--vocab", type=int, default=1024, help="BPE pieces (259: bytes only)")
    ap.add_argument("--dim", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--schedule", choices=("cosine", "wsd"), default="cosine",
                    help="learning-rate schedule (see lr_at); wsd: SIGUSR2 starts the final "
                    "decay at the next step, and the file records the --steps that "
                    "reproduce the run")
    ap.add_argument("--decay-frac", type=float, default=0.2,
                    help="wsd: fraction of --steps in the final linear decay")
    ap.add_argument("--decay-file", default=None,
                    help="wsd: start the final decay once this file exists (checked every "
                    "step), as SIGUSR2 does; with it SIGUSR2 is ignored (a shared machine may "
                    "deliver stray signals)")
    ap.add_argument("--min-lr-ratio", type=float, default=0.1,
                    help="final learning rate / --lr")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--stop-at", type=int, default=None,
                    help="end training after this many steps of the --steps schedule "
                    "(SIGUSR1 does the same at the next step; the file records where)")
    ap.add_argument("--init-from", default=None,
                    help="start from the weights of this model file (written by this script "
                    "with the same shape and tokenizer) instead of the random initialization; "
                    "the optimizer starts afresh (use --warmup), the batches follow --seed")
    ap.add_argument("--distill-from", default=None,
                    help="teacher model file (.h5, same tokenizer): train the student on "
                    "the teacher's distributions (see the module docstring)")
    ap.add_argument("--distill-temp", type=float, default=1.0,
                    help="distillation temperature T (the KL term is scaled by T^2)")
    ap.add_argument("--distill-alpha", type=float, default=1.0,
                    help="weight of the KL term; 1 - alpha weighs the cross-entropy on the "
                    "corpus tokens")
    ap.add_argument("--distill-paths", type=int, default=0,
                    help="sequence-level distillation: before training, the teacher "
                    "continues this many prompts of the training text to the full window "
                    "(see teacher_paths); --distill-mix of each batch's windows come from them")
    ap.add_argument("--distill-mix", type=float, default=0.5,
                    help="share of each batch's windows taken from the teacher's paths")
    ap.add_argument("--distill-prompt", type=int, default=64,
                    help="prompt tokens (BOS included) of each teacher path")
    ap.add_argument("--distill-path-temp", type=float, default=0.0,
                    help="temperature of the teacher's paths (0: greedy)")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pkg-dir", default=None, help="janeaustenr package directory")
    ap.add_argument("--heldout-out", default=None, help="write the held-out text here")
    ap.add_argument("--summary", default=None, help="write a JSON summary here")
    a = ap.parse_args()
    for k, v in DEFAULTS[a.arch].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if not a.distill_temp > 0 or not 0.0 <= a.distill_alpha <= 1.0:
        sys.exit("train.py: --distill-temp must be > 0 and --distill-alpha in [0, 1]")
    if a.distill_paths and (not a.distill_from or not 0.0 < a.distill_mix <= 1.0 or
                            not 1 <= a.distill_prompt < a.context or
                            a.distill_path_temp < 0):
        sys.exit("train.py: --distill-paths needs --distill-from, --distill-mix in (0, 1], "
                 "1 <= --distill-prompt < --context and --distill-path-temp >= 0")

    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)  # denormal gradients make softmax backward crawl
    warnings.filterwarnings("ignore", message="The value of the smallest subnormal")
    torch.manual_seed(a.seed)
    t_start = time.time()

    def log(msg):
        print("[%7.1fs] %s" % (time.time() - t_start, msg), flush=True)

    docs = train_corpus.load_corpus(a.pkg_dir)
    train_docs, heldout = split_corpus(docs)
    train_text = "".join(t for _, t in train_docs)
    log("corpus: %d bytes; training %d bytes, held out %d bytes (end of %s)" % (
        sum(len(t.encode()) for _, t in docs), len(train_text.encode()),
        len(heldout.encode()), docs[-1][0]))
    if a.heldout_out:
        with open(a.heldout_out, "w", encoding="utf-8") as f:
            f.write(heldout)
    if a.vocab == 259:
        tok = train_tok.byte_tokenizer()
    else:
        tok = train_tok.train_bpe(train_text, a.vocab, log=log)
    stream = token_stream(tok, train_docs)
    held_ids = tok.encode(heldout)
    held_bytes = len(heldout.encode())
    log("tokens: training %d (%.3f bytes/token), held out %d" % (
        len(stream), len(train_text.encode()) / len(stream), len(held_ids)))
    wins = heldout_windows(held_ids, a.context)
    quick = wins[:: max(1, len(wins) // 40)]

    cfg = train_model.Config(a.arch, a.dim, a.layers, a.heads, a.kv_heads, a.ffn,
                             tok.vocab_size, a.context)
    model = train_model.Model(cfg)
    if a.init_from:
        start, start_tok = train_model.load_h5(a.init_from)
        if vars(start.cfg) != vars(cfg):
            sys.exit("train.py: --init-from %s: its shape (%s) differs from this run's (%s)" % (
                a.init_from, start.cfg.describe(), cfg.describe()))
        if [np.asarray(x).tolist() for x in start_tok.h5_arrays()] != \
                [np.asarray(x).tolist() for x in tok.h5_arrays()]:
            sys.exit("train.py: --init-from %s: its tokenizer differs from this run's" %
                     a.init_from)
        model.load_state_dict(start.state_dict())
        log("initialized from %s" % a.init_from)
    teacher = None
    if a.distill_from:
        teacher = load_teacher(a.distill_from, a.init_from, tok, cfg)
        log("distilling from %s (%s; %d parameters), temperature %g, alpha %g" % (
            a.distill_from, teacher.cfg.describe(), teacher.n_params(), a.distill_temp,
            a.distill_alpha))
    n_params = model.n_params()
    log("model: %s; %d parameters (%.2f MB fp32)" % (cfg.describe(), n_params,
                                                     n_params * 4 / 1e6))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(a.seed)
    paths, n_mix = None, 0
    if a.distill_paths:
        pgen = torch.Generator().manual_seed(a.seed + 1000)
        paths = teacher_paths(teacher, stream, a.context, a.distill_paths, a.distill_prompt,
                              a.distill_path_temp, pgen, log)
        n_mix = max(1, int(round(a.distill_mix * a.batch)))
        log("%d teacher paths (%s), %d of each batch's %d windows" % (
            len(paths), "greedy" if a.distill_path_temp == 0 else
            "temperature %g" % a.distill_path_temp, n_mix, a.batch))
    t_train = time.time()
    ema = None
    kl_ema = ce_ema = None
    history = []
    stop = {"flag": False}
    signal.signal(signal.SIGUSR1, lambda *_: stop.update(flag=True))
    if a.decay_file:
        signal.signal(signal.SIGUSR2, lambda *_: log("SIGUSR2 ignored (--decay-file)"))
    else:
        signal.signal(signal.SIGUSR2, lambda *_: stop.update(decay=True))
    steps_run = a.steps
    step = 0
    while step < a.steps:
        if stop["flag"] or (a.stop_at is not None and step >= a.stop_at):
            steps_run = step
            log("stopping after %d of %d steps" % (step, a.steps))
            break
        if a.decay_file and os.path.exists(a.decay_file) and not stop.get("decay_done"):
            stop.update(decay=True, decay_done=True)
        if stop.pop("decay", False):
            if a.schedule != "wsd":
                log("SIGUSR2 ignored: only the wsd schedule can start its decay early")
            elif step < decay_start(a.steps, a.decay_frac):
                a.steps = steps_run = shortest_steps(max(step, a.warmup), a.decay_frac)
                log("final decay from step %d, ending after step %d (--steps %d)" % (
                    decay_start(a.steps, a.decay_frac), a.steps - 1, a.steps))
            else:
                log("SIGUSR2 ignored: the decay has already started")
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a.steps, a.lr, a.warmup, a.min_lr_ratio, a.schedule,
                            a.decay_frac)
        x, y = batches_from(stream, a.context, a.batch - n_mix, gen)
        if n_mix:
            pick = torch.randint(0, len(paths), (n_mix,), generator=gen)
            x = torch.cat((x, paths[pick, :-1]), dim=0)
            y = torch.cat((y, paths[pick, 1:]), dim=0)
        logits = model(x)
        if teacher is not None:
            with torch.no_grad():
                t_logits = teacher(x)
            loss, kl, ce = distill_loss(logits, t_logits, y, a.distill_temp, a.distill_alpha)
            kl_ema = kl if kl_ema is None else 0.95 * kl_ema + 0.05 * kl
            ce_ema = ce if ce_ema is None else 0.95 * ce_ema + 0.05 * ce
        else:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0 or step == a.steps - 1:
            el = time.time() - t_train
            log("step %5d/%d  loss %.4f (avg %.4f)  lr %.2e  %.0f tokens/s" % (
                step, a.steps, loss.item(), ema, opt.param_groups[0]["lr"],
                (step + 1) * a.batch * a.context / max(el, 1e-9)))
            if teacher is not None:
                log("            KL %.4f (avg %.4f)  cross-entropy %.4f (avg %.4f)" % (
                    kl, kl_ema, ce, ce_ema))
        if (step + 1) % a.eval_every == 0 and step + 1 < a.steps:
            if teacher is not None:
                nats, n, agree = evaluate(model, quick, teacher=teacher)
                log("step %5d  held-out sample loss %.4f nats/token, argmax = teacher's %.4f"
                    % (step + 1, nats / n, agree / n))
                history.append((step + 1, nats / n, agree / n))
            else:
                nats, n = evaluate(model, quick)
                log("step %5d  held-out sample loss %.4f nats/token" % (step + 1, nats / n))
                history.append((step + 1, nats / n))
        step += 1
    train_s = time.time() - t_train
    agreement = None
    if teacher is not None:
        nats, n, agree = evaluate(model, wins, teacher=teacher)
        agreement = agree / n
    else:
        nats, n = evaluate(model, wins)
    val_loss = nats / n
    bpb = nats / math.log(2) / held_bytes
    log("trained %d steps (%d tokens) in %.1f s; held-out loss %.4f nats/token, %.4f "
        "bits/byte (%d tokens, %d bytes)" % (steps_run, steps_run * a.batch * a.context, train_s,
                                             val_loss, bpb, n, held_bytes))
    if teacher is not None:
        log("held-out argmax = teacher's at %.4f of the positions" % agreement)
    sched = ""
    if (a.schedule, a.warmup, a.min_lr_ratio) != ("cosine", 50, 0.1):
        # Only runs off the original recipe name these, so the shipped files' strings stay.
        sched = " --warmup %d --schedule %s --min-lr-ratio %g" % (a.warmup, a.schedule,
                                                                  a.min_lr_ratio)
        if a.schedule == "wsd":
            sched += " --decay-frac %g" % a.decay_frac
    init = " --init-from %s" % os.path.basename(a.init_from) if a.init_from else ""
    if a.distill_from:
        init += " --distill-from %s --distill-temp %g --distill-alpha %g" % (
            os.path.basename(a.distill_from), a.distill_temp, a.distill_alpha)
        if a.distill_paths:
            init += (" --distill-paths %d --distill-mix %g --distill-prompt %d "
                     "--distill-path-temp %g" % (a.distill_paths, a.distill_mix,
                                                 a.distill_prompt, a.distill_path_temp))
    source = ("tools/train.py --arch %s --seed %d --steps %d --batch %d --context %d "
              "--vocab %d --dim %d --layers %d --heads %d --kv-heads %d --ffn %d%s --lr %g%s%s; "
              "corpus: Jane Austen's novels (Debian r-cran-janeaustenr)" % (
                  a.arch, a.seed, a.steps, a.batch, a.context, a.vocab, a.dim, a.layers,
                  a.heads, a.kv_heads, a.ffn, init, a.lr, sched,
                  " --stop-at %d" % steps_run if steps_run < a.steps else ""))
    train_model.export_h5(model, tok, a.out, source)
    log("wrote %s (%d bytes)" % (a.out, os.path.getsize(a.out)))
    if a.summary:
        with open(a.summary, "w") as f:
            summary = {"arch": a.arch, "out": a.out, "config": vars(a), "params": n_params,
                       "steps_run": steps_run, "train_seconds": train_s, "total_seconds": time.time() - t_start,
                       "train_tokens": int(len(stream)), "heldout_tokens": n,
                       "heldout_bytes": held_bytes, "val_nats_per_token": val_loss,
                       "val_bits_per_byte": bpb, "history": history,
                       "final_train_loss_avg": ema, "torch": torch.__version__}
            if teacher is not None:
                summary.update(distill_from=a.distill_from, final_kl_avg=kl_ema,
                               final_ce_avg=ce_ema, heldout_teacher_agreement=agreement)
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
