#!/usr/bin/env python3
"""hf_tokenizer_gguf.py TOKENIZER_JSON OUT.gguf PRE ADD_BOS BOS EOS

Writes a small GGUF model (llama architecture, 1 layer of width 32, zero weights) whose
tokenizer is a Hugging Face byte-level BPE tokenizer.json in the form llama.cpp's
convert_hf_to_gguf.py gives it: tokenizer.ggml.model "gpt2", the pieces by id (added tokens
at their ids, "[PAD<id>]" in holes), token types (added tokens that are special or look
special, "<|...|>": CONTROL 3; other added tokens: USER_DEFINED 4; the rest NORMAL 1), the
merges as "left right", tokenizer.ggml.pre = PRE, BOS/EOS ids and add_bos_token.  For
tokenizers_hf.sh: the GGUF import must tokenize as tokenizer.json does.  Standard library
only."""
import json
import struct
import sys


def main():
    src, out, pre, add_bos, bos, eos = sys.argv[1:7]
    with open(src, encoding="utf-8") as f:
        tj = json.load(f)
    vocab = tj["model"]["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added.keys())) + 1
    tokens = [None] * n
    types = [1] * n
    for piece, i in vocab.items():
        tokens[i] = piece
    for i, a in added.items():
        c = a["content"]
        tokens[i] = c
        look = c.startswith("<|") and c.endswith("|>")
        types[i] = 3 if a.get("special") or look else 4
    for i in range(n):
        if tokens[i] is None:
            tokens[i] = "[PAD%d]" % i
            types[i] = 5  # UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]

    kv = bytearray()
    n_kv = 0

    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def key(k, t):
        nonlocal n_kv
        n_kv += 1
        kv.extend(s(k) + struct.pack("<I", t))

    def u32(k, v):
        key(k, 4)
        kv.extend(struct.pack("<I", v))

    def f32(k, v):
        key(k, 6)
        kv.extend(struct.pack("<f", v))

    def string(k, v):
        key(k, 8)
        kv.extend(s(v))

    def boolean(k, v):
        key(k, 7)
        kv.extend(struct.pack("<B", 1 if v else 0))

    def arr_str(k, vals):
        key(k, 9)
        kv.extend(struct.pack("<IQ", 8, len(vals)))
        for v in vals:
            kv.extend(s(v))

    def arr_i32(k, vals):
        key(k, 9)
        kv.extend(struct.pack("<IQ", 5, len(vals)))
        kv.extend(struct.pack("<%di" % len(vals), *vals))

    dim, ffn = 32, 32
    string("general.architecture", "llama")
    u32("llama.block_count", 1)
    u32("llama.context_length", 64)
    u32("llama.embedding_length", dim)
    u32("llama.feed_forward_length", ffn)
    u32("llama.attention.head_count", 1)
    u32("llama.attention.head_count_kv", 1)
    f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    f32("llama.rope.freq_base", 10000.0)
    string("tokenizer.ggml.model", "gpt2")
    string("tokenizer.ggml.pre", pre)
    arr_str("tokenizer.ggml.tokens", tokens)
    arr_i32("tokenizer.ggml.token_type", types)
    arr_str("tokenizer.ggml.merges", merges)
    u32("tokenizer.ggml.bos_token_id", int(bos))
    u32("tokenizer.ggml.eos_token_id", int(eos))
    boolean("tokenizer.ggml.add_bos_token", add_bos == "1")

    # tensors: (name, dims ne0.., type) with zero data; F16 (1) matrices, F32 (0) norms
    tensors = [("token_embd.weight", [dim, n], 1), ("output_norm.weight", [dim], 0),
               ("output.weight", [dim, n], 1), ("blk.0.attn_norm.weight", [dim], 0),
               ("blk.0.attn_q.weight", [dim, dim], 1), ("blk.0.attn_k.weight", [dim, dim], 1),
               ("blk.0.attn_v.weight", [dim, dim], 1),
               ("blk.0.attn_output.weight", [dim, dim], 1),
               ("blk.0.ffn_norm.weight", [dim], 0), ("blk.0.ffn_gate.weight", [dim, ffn], 1),
               ("blk.0.ffn_up.weight", [dim, ffn], 1), ("blk.0.ffn_down.weight", [ffn, dim], 1)]
    info = bytearray()
    off = 0
    sizes = []
    for name, dims, ty in tensors:
        count = 1
        for d in dims:
            count *= d
        size = count * (2 if ty == 1 else 4)
        info.extend(s(name) + struct.pack("<I", len(dims)))
        for d in dims:
            info.extend(struct.pack("<Q", d))
        info.extend(struct.pack("<IQ", ty, off))
        sizes.append(size)
        off += (size + 31) // 32 * 32
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + bytes(kv) + bytes(info)
    with open(out, "wb") as f:
        f.write(head)
        f.write(b"\0" * ((32 - len(head) % 32) % 32))
        f.write(b"\0" * off)


main()
