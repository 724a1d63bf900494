#!/usr/bin/env python3
"""random_gguf.py: an F32 GGUF of a Llama model's shape with random weights, for speed
comparisons against llama.cpp (bench/prompt.sh): llama-quantize turns it into Q8_0, Q4_0 or
Q4_K_M, headsplit-convert --format gguf reads the quantized file, so both engines run the
same bytes.  Speed does not depend on the weights' values.

--type q8_0|q4_0 writes the 2-D tensors as those blocks directly (random quants, fp16 scales
near 0.02/127 and 0.02/7), without llama-quantize: how a 7-8B-class GGUF is made here in a
few minutes (an F32 one would be 27 GB).  Norms stay F32.

Python standard library only.  Weights: one table of N(0, 0.02^2) floats (seeded) repeated
with a shifting offset; norms 1.0.  Tokenizer: a SentencePiece-style vocabulary whose first
259 entries are <unk>, <s>, </s> and the 256 byte tokens (what llama.cpp's loader looks up),
the rest pieces named tok0, tok1, ... (score 0: speed tests only need a valid vocabulary).

usage: random_gguf.py OUT.gguf [--dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4
                                --vocab 32000 --ctx 2048 --seed 1 --type f32]
(the defaults are TinyLlama-1.1B's shape)"""
import argparse
import array
import random
import struct
import sys

ALIGN = 32
T_UINT32, T_INT32, T_FLOAT32, T_STRING, T_ARRAY = 4, 5, 6, 8, 9


def gstr(s):
    b = s.encode()
    return struct.pack('<Q', len(b)) + b


def kv(key, typ, val):
    out = gstr(key) + struct.pack('<I', typ)
    if typ == T_UINT32:
        return out + struct.pack('<I', val)
    if typ == T_FLOAT32:
        return out + struct.pack('<f', val)
    if typ == T_STRING:
        return out + gstr(val)
    raise ValueError(typ)


def kv_array(key, typ, vals):
    out = gstr(key) + struct.pack('<IIQ', T_ARRAY, typ, len(vals))
    if typ == T_STRING:
        return out + b''.join(gstr(v) for v in vals)
    fmt = {T_INT32: '<i', T_FLOAT32: '<f'}[typ]
    return out + b''.join(struct.pack(fmt, v) for v in vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out')
    for k, v in (('dim', 2048), ('ffn', 5632), ('layers', 22), ('heads', 32), ('kv-heads', 4),
                 ('vocab', 32000), ('ctx', 2048), ('seed', 1)):
        ap.add_argument('--' + k, type=int, default=v)
    ap.add_argument('--type', choices=('f32', 'q8_0', 'q4_0'), default='f32')
    a = ap.parse_args()
    # ggml type id, bytes per block of 32 values (f32: per value), general.file_type
    gtype, bsize, ftype = {'f32': (0, 4, 0), 'q8_0': (8, 34, 7), 'q4_0': (2, 18, 2)}[a.type]
    per = 1 if a.type == 'f32' else 32
    if per > 1 and (a.dim % 32 or a.ffn % 32):
        sys.exit('random_gguf.py: --type %s needs dim and ffn multiples of 32' % a.type)
    if a.vocab < 259 or a.dim % a.heads or a.heads % a.kv_heads:
        sys.exit('random_gguf.py: vocab below 259 or heads not dividing dim / kv-heads')
    hd = a.dim // a.heads
    kvd = hd * a.kv_heads
    # (name, ne0 = columns, ne1 = rows or None for a vector)
    tensors = [('token_embd.weight', a.dim, a.vocab)]
    for i in range(a.layers):
        p = 'blk.%d.' % i
        tensors += [(p + 'attn_norm.weight', a.dim, None), (p + 'attn_q.weight', a.dim, a.dim),
                    (p + 'attn_k.weight', a.dim, kvd), (p + 'attn_v.weight', a.dim, kvd),
                    (p + 'attn_output.weight', a.dim, a.dim),
                    (p + 'ffn_norm.weight', a.dim, None),
                    (p + 'ffn_gate.weight', a.dim, a.ffn), (p + 'ffn_up.weight', a.dim, a.ffn),
                    (p + 'ffn_down.weight', a.ffn, a.dim)]
    tensors += [('output_norm.weight', a.dim, None), ('output.weight', a.dim, a.vocab)]

    toks = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)]
    toks += ['tok%d' % i for i in range(a.vocab - len(toks))]
    types = [2, 3, 3] + [6] * 256 + [1] * (a.vocab - 259)
    meta = [kv('general.architecture', T_STRING, 'llama'),
            kv('general.name', T_STRING, 'random-llama'),
            kv('general.alignment', T_UINT32, ALIGN),
            kv('llama.context_length', T_UINT32, a.ctx),
            kv('llama.embedding_length', T_UINT32, a.dim),
            kv('llama.block_count', T_UINT32, a.layers),
            kv('llama.feed_forward_length', T_UINT32, a.ffn),
            kv('llama.rope.dimension_count', T_UINT32, hd),
            kv('llama.attention.head_count', T_UINT32, a.heads),
            kv('llama.attention.head_count_kv', T_UINT32, a.kv_heads),
            kv('llama.attention.layer_norm_rms_epsilon', T_FLOAT32, 1e-5),
            kv('llama.rope.freq_base', T_FLOAT32, 10000.0),
            kv('general.file_type', T_UINT32, ftype),
            kv('tokenizer.ggml.model', T_STRING, 'llama'),
            kv_array('tokenizer.ggml.tokens', T_STRING, toks),
            kv_array('tokenizer.ggml.scores', T_FLOAT32, [0.0] * a.vocab),
            kv_array('tokenizer.ggml.token_type', T_INT32, types),
            kv('tokenizer.ggml.bos_token_id', T_UINT32, 1),
            kv('tokenizer.ggml.eos_token_id', T_UINT32, 2),
            kv('tokenizer.ggml.unknown_token_id', T_UINT32, 0)]

    def tbytes(ne0, ne1):
        return 4 * ne0 if ne1 is None else ne0 * ne1 // per * bsize

    infos, off = [], 0
    for name, ne0, ne1 in tensors:
        dims = [ne0] if ne1 is None else [ne0, ne1]
        infos.append(gstr(name) + struct.pack('<I', len(dims)) +
                     b''.join(struct.pack('<Q', d) for d in dims) +
                     struct.pack('<IQ', 0 if ne1 is None else gtype, off))
        off += (tbytes(ne0, ne1) + ALIGN - 1) // ALIGN * ALIGN

    rng = random.Random(a.seed)
    if a.type == 'f32':
        tb = array.array('f', (rng.gauss(0.0, 0.02) for _ in range(1 << 20))).tobytes()
    else:  # 2^15 random blocks: an fp16 scale, then 32 int8 or 16 bytes of nibbles
        amax = 127 if a.type == 'q8_0' else 7
        tb = b''.join(struct.pack('<e', 0.02 * (0.5 + rng.random()) / amax) +
                      bytes(rng.getrandbits(8) for _ in range(bsize - 2))
                      for _ in range(1 << 15))
    ones = array.array('f', [1.0]).tobytes()
    with open(a.out, 'wb') as f:
        f.write(b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(meta)))
        f.write(b''.join(meta) + b''.join(infos))
        f.write(b'\0' * (-f.tell() % ALIGN))
        shift = 0
        for name, ne0, ne1 in tensors:
            nbytes = tbytes(ne0, ne1)
            if ne1 is None:
                f.write(ones * ne0)
            else:
                left = nbytes
                while left:
                    shift = (shift + (4 if a.type == 'f32' else bsize) * 4099) % len(tb)
                    chunk = (tb[shift:] + tb[:shift])[:left]
                    f.write(chunk)
                    left -= len(chunk)
            f.write(b'\0' * (-nbytes % ALIGN))


if __name__ == '__main__':
    main()
