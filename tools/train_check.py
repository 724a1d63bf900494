#!/usr/bin/python3
"""train_check.py: check a model written by tools/train.py against the real engine.

1. Tokenizer: tools/train_tok.py's encoding of a text (default: weights/heldout.txt) must
   equal `headsplit-tokenize --model M -` token for token (BOS first).
2. Logits: runs `mpirun -np N headsplit --model M --prompt P --steps S --temperature 0
   --metrics ... --logits-out ...`, feeds the same tokens through the PyTorch model of
   tools/train_model.py rebuilt from the file, and requires every logit of every position to
   agree within --tol (absolute), and the greedy continuation to be PyTorch's argmax.

    /usr/bin/python3 tools/train_check.py --model weights/austen-llama.h5 \\
        --engine build/headsplit --tokenizer-bin build/headsplit-tokenize

Exit status 0 when everything agrees.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import train_model  # noqa: E402
import train_tok  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mpirun(np_, args):
    cmd = ". %s/scripts/mpi-env.sh; mpirun $MPI_FLAGS -np %d %s" % (
        ROOT, np_, " ".join("'%s'" % a.replace("'", "'\\''") for a in args))
    subprocess.run(["bash", "-c", cmd], check=True, stdout=subprocess.DEVNULL)


def check_tokenizer(tok, tokenizer_bin, model_path, text):
    r = subprocess.run([tokenizer_bin, "--model", model_path, "-"], input=text.encode(),
                       stdout=subprocess.PIPE, check=True)
    engine = json.loads(r.stdout.decode().splitlines()[0])
    mine = [train_tok.BOS] + tok.encode(text)
    if engine != mine:
        k = next((i for i, (p, q) in enumerate(zip(engine, mine)) if p != q),
                 min(len(engine), len(mine)))
        print("tokenizer MISMATCH at token %d: engine %s, train_tok %s (lengths %d, %d)" % (
            k, engine[k:k + 8], mine[k:k + 8], len(engine), len(mine)))
        return False
    print("tokenizer: %d tokens of %d bytes identical to headsplit-tokenize" % (
        len(mine), len(text.encode())))
    return True


def check_logits(model, engine, model_path, prompt, steps, np_, tol, extra):
    V = model.cfg.vocab_size
    with tempfile.TemporaryDirectory() as d:
        mj, lb = os.path.join(d, "m.json"), os.path.join(d, "l.bin")
        mpirun(np_, [engine, "--model", model_path, "--prompt", prompt, "--steps", str(steps),
                     "--temperature", "0", "--quiet", "--metrics", mj, "--logits-out", lb]
               + extra)
        with open(mj) as f:
            met = json.load(f)
        eng = np.fromfile(lb, dtype="<f4")
    tokens = met["tokens"]
    n_fwd = met["n_forward"]
    eng = eng.reshape(-1, V)
    assert eng.shape[0] == n_fwd, (eng.shape, n_fwd)
    with torch.no_grad():
        ref = model(torch.tensor([tokens[:n_fwd]]))[0].numpy()
    diff = np.abs(ref - eng)
    worst = float(diff.max())
    pos = int(diff.max(axis=1).argmax())
    ok = worst <= tol
    # Greedy continuation: each generated token is PyTorch's argmax (lowest id on ties).
    n_prompt = met["n_prompt_tokens"]
    greedy_ok = all(int(np.argmax(ref[i])) == tokens[i + 1]
                    for i in range(n_prompt - 1, n_fwd))
    print("logits (-np %d%s): %d positions x %d, max |torch - engine| = %.3g at position %d "
          "(tol %g) %s; greedy tokens %s" % (
              np_, (" " + " ".join(extra)) if extra else "", n_fwd, V, worst, pos, tol,
              "OK" if ok else "FAIL", "match" if greedy_ok else "DIFFER"))
    return ok and greedy_ok, tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--engine", default=os.path.join(ROOT, "build", "headsplit"))
    ap.add_argument("--tokenizer-bin", default=None,
                    help="headsplit-tokenize (default: next to --engine)")
    ap.add_argument("--prompt", default="It is a truth universally acknowledged, that")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--text", default=os.path.join(ROOT, "weights", "heldout.txt"),
                    help="text for the tokenizer check")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--distributed", type=int, default=5,
                    help="also run -np N --partition head --placement greedy (0: skip)")
    a = ap.parse_args()
    torch.set_num_threads(2)
    tokenizer_bin = a.tokenizer_bin or os.path.join(os.path.dirname(a.engine),
                                                    "headsplit-tokenize")
    model, tok = train_model.load_h5(a.model)
    model.eval()
    ok = True
    if a.text and os.path.exists(a.text):
        with open(a.text, encoding="utf-8") as f:
            ok &= check_tokenizer(tok, tokenizer_bin, a.model, f.read())
    good, t1 = check_logits(model, a.engine, a.model, a.prompt, a.steps, 1, a.tol, [])
    ok &= good
    if a.distributed:
        good, tn = check_logits(model, a.engine, a.model, a.prompt, a.steps, a.distributed,
                                a.tol, ["--partition", "head", "--placement", "greedy"])
        ok &= good
        same = t1 == tn
        print("tokens -np 1 vs -np %d: %s" % (a.distributed, "identical" if same else "DIFFER"))
        ok &= same
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
