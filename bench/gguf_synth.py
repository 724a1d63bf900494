#!/usr/bin/env python3
"""gguf_synth.py: a TinyLlama-1.1B-shaped llama GGUF file in F32 with pseudo-random weights,
for timing the same file in llama.cpp (llama-bench, llama-quantize) and in HeadSplit
(headsplit-convert --format gguf).  Standard library only.

The weights are one block of N(0, 0.02^2) values (Box-Muller on a fixed seed) read at a
different offset by every tensor: values repeat across rows, which changes nothing for the
memory traffic a decode step makes.  Norm weights are 1.  The vocabulary is llama's SPM
form: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then synthetic pieces.

usage: gguf_synth.py OUT.gguf [--layers N]
"""
import math
import random
import struct
import sys

DIM, FFN, HEADS, KV_HEADS, VOCAB, CTX = 2048, 5632, 32, 4, 32000, 2048
HEAD_DIM = DIM // HEADS
ALIGN = 32
T_U32, T_I32, T_F32, T_STR, T_ARR = 4, 5, 6, 8, 9
GGML_F32 = 0


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == T_U32:
        return out + struct.pack("<I", value)
    if vtype == T_F32:
        return out + struct.pack("<f", value)
    if vtype == T_STR:
        return out + gstr(value)
    raise ValueError(vtype)


def kv_array(key, etype, values):
    out = gstr(key) + struct.pack("<IIQ", T_ARR, etype, len(values))
    if etype == T_STR:
        return out + b"".join(gstr(v) for v in values)
    fmt = {T_F32: "f", T_I32: "i"}[etype]
    return out + struct.pack("<%d%s" % (len(values), fmt), *values)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__.strip().splitlines()[-1])
    out, layers = args[0], 22
    if len(args) == 3 and args[1] == "--layers":
        layers = int(args[2])
    elif len(args) != 1:
        sys.exit("gguf_synth.py: usage: gguf_synth.py OUT.gguf [--layers N]")

    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, byte
    while len(tokens) < VOCAB:
        tokens.append("\u2581t%d" % len(tokens))
        types.append(1)
    scores = [0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(VOCAB - 259)]

    meta = [
        kv("general.architecture", T_STR, "llama"),
        kv("general.name", T_STR, "synthetic-tinyllama-1.1b"),
        kv("general.alignment", T_U32, ALIGN),
        kv("general.file_type", T_U32, 0),
        kv("llama.context_length", T_U32, CTX),
        kv("llama.embedding_length", T_U32, DIM),
        kv("llama.block_count", T_U32, layers),
        kv("llama.feed_forward_length", T_U32, FFN),
        kv("llama.rope.dimension_count", T_U32, HEAD_DIM),
        kv("llama.attention.head_count", T_U32, HEADS),
        kv("llama.attention.head_count_kv", T_U32, KV_HEADS),
        kv("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
        kv("llama.rope.freq_base", T_F32, 10000.0),
        kv("tokenizer.ggml.model", T_STR, "llama"),
        kv_array("tokenizer.ggml.tokens", T_STR, tokens),
        kv_array("tokenizer.ggml.scores", T_F32, scores),
        kv_array("tokenizer.ggml.token_type", T_I32, types),
        kv("tokenizer.ggml.bos_token_id", T_U32, 1),
        kv("tokenizer.ggml.eos_token_id", T_U32, 2),
        kv("tokenizer.ggml.unknown_token_id", T_U32, 0),
    ]

    # (name, ne0 = row length, ne1 = rows or None for a vector, norm?)
    tensors = [("token_embd.weight", DIM, VOCAB, False)]
    for l in range(layers):
        p = "blk.%d." % l
        tensors += [
            (p + "attn_norm.weight", DIM, None, True),
            (p + "attn_q.weight", DIM, DIM, False),
            (p + "attn_k.weight", DIM, KV_HEADS * HEAD_DIM, False),
            (p + "attn_v.weight", DIM, KV_HEADS * HEAD_DIM, False),
            (p + "attn_output.weight", DIM, DIM, False),
            (p + "ffn_norm.weight", DIM, None, True),
            (p + "ffn_gate.weight", DIM, FFN, False),
            (p + "ffn_up.weight", DIM, FFN, False),
            (p + "ffn_down.weight", FFN, DIM, False),
        ]
    tensors += [("output_norm.weight", DIM, None, True), ("output.weight", DIM, VOCAB, False)]

    infos, offset = [], 0
    for name, ne0, ne1, _ in tensors:
        dims = [ne0] if ne1 is None else [ne0, ne1]
        infos.append(gstr(name) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) +
                     struct.pack("<IQ", GGML_F32, offset))
        nbytes = 4 * ne0 * (ne1 or 1)
        offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN

    rng = random.Random(1)
    pool_n = 1 << 20  # 4 MiB of values, read at a rotating offset
    vals = []
    while len(vals) < pool_n:
        u1, u2 = rng.random() or 1e-12, rng.random()
        r = 0.02 * math.sqrt(-2.0 * math.log(u1))
        vals += [r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)]
    pool = struct.pack("<%df" % pool_n, *vals[:pool_n])
    pool2 = pool + pool
    ones = struct.pack("<f", 1.0) * DIM

    with open(out + ".partial", "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
        for m in meta:
            f.write(m)
        for i in infos:
            f.write(i)
        f.write(b"\0" * (-f.tell() % ALIGN))
        rot = 0
        for name, ne0, ne1, norm in tensors:
            if norm:
                data_len = 4 * ne0
                f.write(ones)
            else:
                data_len = 4 * ne0 * ne1
                left = data_len
                while left > 0:
                    start = (rot * 4099 * 4) % len(pool)
                    rot += 1
                    chunk = min(left, len(pool))
                    f.write(pool2[start:start + chunk])
                    left -= chunk
            f.write(b"\0" * (-data_len % ALIGN))
    import os
    os.replace(out + ".partial", out)
    print("gguf_synth.py: wrote %s (%d layers, %d tensors, %.1f MB)" %
          (out, layers, len(tensors), os.path.getsize(out) / 1e6))


if __name__ == "__main__":
    main()
