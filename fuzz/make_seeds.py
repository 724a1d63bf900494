#!/usr/bin/env python3
"""make_seeds.py: writes the small, hand-made seed inputs of fuzz/corpus/<target>/.

Run from anywhere: python3 fuzz/make_seeds.py.  Standard library only; every seed is crafted
here (no reference model file is copied).  The structure-aware targets (fuzz_config,
fuzz_tokenizer_h5) read their input byte by byte; the encoders below mirror their order."""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors ---------------------------------------------------------------------------
def safetensors(tensors, meta=None, extra=b"", pad_header=0):
    header, blob = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header, separators=(",", ":")).encode() + b" " * pad_header
    return struct.pack("<Q", len(h)) + h + blob + extra


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


st_ok = safetensors({
    "model.embed_tokens.weight": ("F32", [2, 3], f32(1, 2, 3, 4, 5, 6)),
    "model.norm.weight": ("BF16", [3], b"\x80\x3f\x00\x40\x40\x40"),
    "lm_head.weight": ("F16", [1, 2], b"\x00\x3c\x00\xc0"),
    "scalar": ("F32", [], f32(7)),
    "empty": ("F32", [0, 4], b""),
}, meta={"format": "pt"}, pad_header=5)
put("fuzz_safetensors", "valid.safetensors", st_ok)
put("fuzz_safetensors", "bf16_only.safetensors",
    safetensors({"w": ("BF16", [2, 2], b"\x80\x3f" * 4)}))
put("fuzz_safetensors", "header_too_long.safetensors", struct.pack("<Q", 1 << 40) + b"{}")
put("fuzz_safetensors", "overlap.safetensors",
    struct.pack("<Q", 94) + b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
    b'"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' + b"\0" * 8)
put("fuzz_safetensors", "bad_dtype.safetensors",
    safetensors({"w": ("I64", [1], b"\0" * 8)}))
put("fuzz_safetensors", "index.json", json.dumps(
    {"metadata": {"total_size": 42},
     "weight_map": {"w.a": "a.safetensors", "w.b": "a.safetensors",
                    "w.c": "b.safetensors", "w.d": "b.safetensors"}}))
put("fuzz_safetensors", "index_bad_shard.json", json.dumps(
    {"weight_map": {"w.a": "../a.safetensors", "w.c": "b.safetensors"}}))

# ---- tokenizers ------------------------------------------------------------------------------
MERGED = ["▁t", "he", "▁the", "▁a", "in", "▁w", "er", "an", "on", "▁s", "ed", "is",
          "ll", "▁he", "it", "▁b", "▁wor", "ld", "▁world", "▁H", "▁Hello", "el", "lo"]


def spm_pieces():
    p = [("<unk>", 0.0), ("\n<s>\n", 0.0), ("\n</s>\n", 0.0)]
    p += [("<0x%02X>" % b, 0.0) for b in range(256)]
    p += [(m.replace("▁", " "), -float(i)) for i, m in enumerate(MERGED)]
    p += [(c, -100.0 - i) for i, c in enumerate(" abcdefghijklmnopqrstuvwxyzHW")]
    return p


def llama2c_tokenizer(pieces, max_len=None):
    raw = [(s.encode(), sc) for s, sc in pieces]
    ml = max_len if max_len is not None else max(len(b) for b, _ in raw)
    out = struct.pack("<i", ml)
    for b, sc in raw:
        out += struct.pack("<fi", sc, len(b)) + b
    return out


pieces = spm_pieces()
tb = llama2c_tokenizer(pieces)
put("fuzz_tokenizer_llama2c", "valid", struct.pack("<H", len(pieces) + 8) + tb)
put("fuzz_tokenizer_llama2c", "vocab_mismatch", struct.pack("<H", len(pieces) + 7) + tb)
put("fuzz_tokenizer_llama2c", "truncated", struct.pack("<H", len(pieces) + 8) + tb[:777])
small = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("a", -1.0), ("b", -2.0), ("ab", -0.5)]
put("fuzz_tokenizer_llama2c", "tiny", struct.pack("<H", len(small) + 8) + llama2c_tokenizer(small))


def gpt2_byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = gpt2_byte_chars()


def gpt2_vocab_merges():
    vocab = {B2U[b]: i for i, b in enumerate(range(256))}
    merges = []
    for pair in [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "a"), ("i", "n"), ("Ġ", "w"),
                 ("o", "r"), ("Ġw", "or"), ("l", "d"), ("Ġwor", "ld"), ("e", "l"), ("l", "o"),
                 ("H", "el"), ("Hel", "lo"), ("1", "2"), ("Ġ", "Ġ")]:
        merges.append(pair)
        vocab.setdefault(pair[0] + pair[1], len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, merges


gv, gm = gpt2_vocab_merges()
hf_gpt2 = {
    "version": "1.0", "added_tokens": [{"id": gv["<|endoftext|>"], "content": "<|endoftext|>",
                                        "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                      "use_regex": True},
    "post_processor": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
              "vocab": gv, "merges": [list(m) for m in gm]}}
put("fuzz_tokenizer_hf_json", "gpt2.json", json.dumps(hf_gpt2, ensure_ascii=False))
hf_gpt2_str = json.loads(json.dumps(hf_gpt2))
hf_gpt2_str["model"]["merges"] = [a + " " + b for a, b in gm]
hf_gpt2_str["pre_tokenizer"]["add_prefix_space"] = True
put("fuzz_tokenizer_hf_json", "gpt2_prefix_space.json", json.dumps(hf_gpt2_str))

lv = {}
for s, _ in spm_pieces():
    s = s.replace("\n<s>\n", "<s>").replace("\n</s>\n", "</s>").replace(" ", "▁")
    lv.setdefault(s, len(lv))
lm = [(a, b) for a, b in [("▁", "t"), ("h", "e"), ("▁t", "he"), ("▁", "a"), ("i", "n"),
                          ("e", "l"), ("l", "o"), ("▁", "H"), ("▁H", "el")]]
for a, b in lm:
    lv.setdefault(a + b, len(lv))
hf_llama = {
    "version": "1.0",
    "added_tokens": [{"id": 0, "content": "<unk>", "special": True},
                     {"id": 1, "content": "<s>", "special": True},
                     {"id": 2, "content": "</s>", "special": True}],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}}],
                       "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
              "vocab": lv, "merges": [a + " " + b for a, b in lm]}}
put("fuzz_tokenizer_hf_json", "llama.json", json.dumps(hf_llama, ensure_ascii=False))
hf_meta = json.loads(json.dumps(hf_llama))
hf_meta["normalizer"] = None
hf_meta["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                            "split": False}
put("fuzz_tokenizer_hf_json", "llama_metaspace.json", json.dumps(hf_meta))
# bpe_hf: Llama 3's and Qwen's pipeline shapes (Split with their regex, ByteLevel, NFC, added
# tokens, ignore_merges, TemplateProcessing), and the other pieces HeadSplit implements.
llama3_re = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
             "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
hf_l3 = json.loads(json.dumps(hf_gpt2))
hf_l3["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": llama3_re}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
hf_l3["model"]["ignore_merges"] = True
n3 = len(hf_l3["model"]["vocab"])
hf_l3["added_tokens"] = [
    {"id": n3, "content": "<|begin_of_text|>", "special": True, "normalized": False},
    {"id": n3 + 1, "content": "<|im_start|>", "special": True, "normalized": False},
    {"id": n3 + 2, "content": "<x>", "special": False, "lstrip": True, "rstrip": True,
     "single_word": True, "normalized": True}]
hf_l3["post_processor"] = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    {"type": "TemplateProcessing",
     "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}}],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [n3]}}}]}
put("fuzz_tokenizer_hf_json", "llama3.json", json.dumps(hf_l3, ensure_ascii=False))
hf_qw = json.loads(json.dumps(hf_l3))
hf_qw["normalizer"] = {"type": "NFC"}
hf_qw["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Digits", "individual_digits": True})
hf_qw["model"]["ignore_merges"] = False
hf_qw["post_processor"] = {"type": "ByteLevel"}
put("fuzz_tokenizer_hf_json", "qwen.json", json.dumps(hf_qw, ensure_ascii=False))
hf_pieces = json.loads(json.dumps(hf_llama))
hf_pieces["normalizer"] = {"type": "Sequence", "normalizers": [
    {"type": "NFD"}, {"type": "Strip", "strip_left": True, "strip_right": False},
    {"type": "Replace", "pattern": {"Regex": "[0-9]+"}, "content": "#"},
    {"type": "Prepend", "prepend": "▁"}]}
hf_pieces["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"String": "▁"}, "behavior": b, "invert": i}
    for b, i in [("MergedWithNext", False), ("MergedWithPrevious", True), ("Contiguous", False),
                 ("Removed", True)]] + [
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}]}
put("fuzz_tokenizer_hf_json", "pieces.json", json.dumps(hf_pieces, ensure_ascii=False))
put("fuzz_tokenizer_hf_json", "sparse_ids.json",
    '{"model":{"type":"BPE","vocab":{"a":0,"b":16777215},"merges":[]}}')
put("fuzz_tokenizer_hf_json", "wordpiece.json", '{"model":{"type":"WordPiece","vocab":{}}}')

merges_txt = "#version: 0.2\n" + "".join("%s %s\n" % m for m in gm)
put("fuzz_tokenizer_gpt2", "valid", json.dumps(gv, ensure_ascii=False).encode() + b"\0" +
    merges_txt.encode())
put("fuzz_tokenizer_gpt2", "crlf", json.dumps(gv).encode() + b"\0" +
    merges_txt.replace("\n", "\r\n").encode())
put("fuzz_tokenizer_gpt2", "bad_merge", json.dumps(gv).encode() + b"\0" + b"Q Z\nab\n")

# ---- encoder inputs --------------------------------------------------------------------------
for i, text in enumerate([
        "Once upon a time, there was a little girl named Lily.",
        "Hello world! It's 2024; numbers 1234567 and symbols #@$%^&*()",
        "  leading and trailing spaces  \n\n\ttabs\r\n",
        "caf\u00e9 na\u00efve \u4e2d\u6587 \U0001F600 \u2581meta\u2581space",
        "<s> </s> <unk> <|endoftext|> <0x41>",
        ""]):
    put("fuzz_tokenizer_encode", "text%d" % i, text)
put("fuzz_tokenizer_encode", "invalid_utf8", b"\xff\xfe\x80\xc3(\xe2\x82\xf0\x9f\x98 \xed\xa0\x80\0z")
put("fuzz_tokenizer_encode", "all_bytes", bytes(range(256)))


# ---- structure-aware: fuzz_tokenizer_h5 ------------------------------------------------------
def tok_h5_seed(kind_index, pieces_b, bos=1, eos=2, add_bos=1, dummy=0, fallback=1, merges=(),
                pipeline=None):
    out = bytes([kind_index])
    for v in (bos, eos, add_bos, dummy, fallback):
        out += bytes([1, (v + 1) % 8])           # int64 attribute, value (u8 % 8) - 1
    out += bytes([len(pieces_b), 0])             # vocab, flags
    for p in pieces_b:
        out += bytes([len(p)]) + p
    for i in range(len(pieces_b)):               # scores: a selector byte (not 0xff), -(u8)
        out += bytes([0, i % 200])
    out += bytes([len(merges)])
    for a, b in merges:                          # each id: a selector byte (not 0xff), the id
        out += bytes([0, a, 0, b])
    if pipeline is not None:                     # 1, 2: a built-in pipeline; 3: these bytes
        out += bytes([pipeline if isinstance(pipeline, int) else 3])
        if not isinstance(pipeline, int):
            out += pipeline
    return out


spm_small = [b"<unk>", b"<s>", b"</s>", b"a", b"b", b"ab", b" ", b"<0x41>", b"<0x42>", b"<0x20>"]
put("fuzz_tokenizer_h5", "spm", tok_h5_seed(0, spm_small))
put("fuzz_tokenizer_h5", "spm_merges", tok_h5_seed(1, spm_small, merges=[(3, 4)]))
gpt2_small = [b"a", b"b", b"ab", b" ", b"<|end", b"c"]
put("fuzz_tokenizer_h5", "gpt2", tok_h5_seed(2, gpt2_small, bos=-1, eos=-1, add_bos=0,
                                            fallback=0, merges=[(0, 1)]))
hf_small = [b"a", b"b", b"ab", b"<|x|>", b" ", b"1", b"12"]
put("fuzz_tokenizer_h5", "bpe_hf", tok_h5_seed(6, hf_small, bos=2, eos=-1, add_bos=1,
                                              fallback=0, merges=[(0, 1), (5, 5)], pipeline=1))
spm_hf = [b"<unk>", b"\xe2\x96\x81", b"a", b"b", b"\xe2\x96\x81a", b"ab", b"<0x41>"]
put("fuzz_tokenizer_h5", "bpe_hf_metaspace", tok_h5_seed(6, spm_hf, bos=-1, eos=-1, add_bos=0,
                                                        merges=[(1, 2), (2, 3)], pipeline=2))
put("fuzz_tokenizer_h5", "bpe_hf_raw", tok_h5_seed(6, hf_small, bos=-1, eos=-1, add_bos=0,
                                                  merges=[(0, 1)],
                                                  pipeline=b'{"model":{},"pre_tokenizer":'
                                                           b'{"type":"Digits"}}'))


# ---- structure-aware: fuzz_config -------------------------------------------------------------
def fz_int(v):  # fuzz_int: mode < 192 gives (u8 | (mode & 0x3f) << 8) - (mode & 0x80 ? 8 : 0)
    if 0 <= v < 1 << 14:
        return bytes([v >> 8, v & 0xff])
    return bytes([0xff]) + struct.pack("<i", v)


def cfg_struct(arch, dim, layers, heads, kv, hd, ffn, vocab, ctx, eps, theta, rope, tied, bos,
               eos):
    out = bytes([0, arch])  # even first byte: the struct path
    for v in (dim, layers, heads, kv, hd, ffn, vocab, ctx):
        out += fz_int(v)
    out += struct.pack("<d", eps)
    out += bytes([0]) if theta == 10000.0 else bytes([255]) + struct.pack("<d", theta)
    out += bytes([rope, tied]) + fz_int(bos) + fz_int(eos)
    return out


put("fuzz_config", "struct_stories260k", cfg_struct(0, 64, 5, 8, 4, 8, 172, 512, 512, 1e-5,
                                                     10000.0, 1, 1, 1, 2))
put("fuzz_config", "struct_gpt2", cfg_struct(1, 768, 12, 12, 12, 64, 3072, 2 ** 14 - 1, 1024,
                                             1e-5, 10000.0, 0, 1, 0, 0))
put("fuzz_config", "struct_big", cfg_struct(0, 8192, 80, 64, 8, 128, 28672, 1 << 17, 1 << 20,
                                            1e-6, 500000.0, 2, 0, 1, 2))
put("fuzz_config", "struct_bad_kv", cfg_struct(0, 64, 2, 6, 4, 8, 172, 512, 512, 1e-5,
                                               10000.0, 1, 1, 1, 2))
put("fuzz_config", "file_valid", bytes([1, 0]) + bytes([11, 1, 0]) + bytes([11]) * 10 +
    bytes([11, 11, 1, 0, 11, 11, 11]))
put("fuzz_config", "file_types", bytes([1, 0]) + bytes(range(2, 12)) + bytes(range(12)) * 4)
put("fuzz_config", "file_no_group", bytes([1, 0xff]))

# ---- llama2c checkpoints -------------------------------------------------------------------
def checkpoint(dim, hid, layers, heads, kv, vocab, seq, last_odd=False):
    hs = dim // heads
    kvd = hs * kv
    v = abs(vocab)
    floats = (v * dim + layers * dim + layers * dim * dim + 2 * layers * kvd * dim +
              layers * dim * dim + layers * dim + 3 * layers * hid * dim + dim + seq * hs +
              (0 if vocab > 0 else v * dim))
    data = struct.pack("<7i", dim, hid, layers, heads, kv, vocab, seq)
    data += b"".join(struct.pack("<f", ((i * 7919) % 200 - 100) / 1000.0)
                     for i in range(floats))
    if last_odd:
        data = data[:-1] + b"\x01"
    return data


put("fuzz_llama2c", "tied", checkpoint(8, 16, 1, 2, 1, 300, 4))
put("fuzz_llama2c", "untied", checkpoint(8, 12, 2, 4, 2, -260, 3))
put("fuzz_llama2c", "truncated", checkpoint(8, 16, 1, 2, 1, 300, 4)[:1000])
put("fuzz_llama2c", "header_pad", struct.pack("<7i", 16, 32, 1, 4, 2, 270, 8) + b"\x01")
put("fuzz_llama2c", "magic", b"ak42" + struct.pack("<6i", 1, 8, 16, 1, 2, 1) + b"\0" * 64)
# ---- gguf ------------------------------------------------------------------------------------
def gguf_str(t):
    b = t.encode() if isinstance(t, str) else t
    return struct.pack("<Q", len(b)) + b


def gguf(kvs, tensors, version=3):
    """kvs: (key, type, value) with type 4 u32, 6 f32, 7 bool, 8 string, or ("arr", elem, list);
    tensors: (name, ggml type, [ne...], raw bytes).  Data aligned to 32 as llama.cpp writes."""
    def val(t, v):
        if t == 4:
            return struct.pack("<I", v)
        if t == 5:
            return struct.pack("<i", v)
        if t == 6:
            return struct.pack("<f", v)
        if t == 7:
            return struct.pack("<B", v)
        if t == 8:
            return gguf_str(v)
        raise ValueError(t)
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gguf_str(k)
        if isinstance(t, tuple):
            out += struct.pack("<IIQ", 9, t[1], len(v)) + b"".join(val(t[1], x) for x in v)
        else:
            out += struct.pack("<I", t) + val(t, v)
    blob = b""
    for name, ty, ne, raw in tensors:
        blob += b"\0" * (-len(blob) % 32)
        out += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n)
                                                                       for n in ne)
        out += struct.pack("<IQ", ty, len(blob))
        blob += raw
    return out + b"\0" * (-len(out) % 32) + blob


ARR = lambda elem: ("arr", elem)
spm_tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + MERGED
gguf_llama_kv = [("general.architecture", 8, "llama"), ("llama.block_count", 4, 1),
                 ("tokenizer.ggml.model", 8, "llama"),
                 ("tokenizer.ggml.tokens", ARR(8), spm_tokens),
                 ("tokenizer.ggml.scores", ARR(6), [0.0] * 259 + [-float(i) for i in
                                                              range(len(MERGED))]),
                 ("tokenizer.ggml.token_type", ARR(5), [2, 3, 3] + [6] * 256 + [1] * len(MERGED)),
                 ("tokenizer.ggml.bos_token_id", 4, 1), ("tokenizer.ggml.eos_token_id", 4, 2),
                 ("tokenizer.ggml.add_bos_token", 7, 1)]
gguf_tensors = [("token_embd.weight", 0, [4, 2], f32(*range(8))),
                ("blk.0.attn_q.weight", 8, [32, 2], bytes(range(68))),
                ("blk.0.ffn_down.weight", 12, [256], bytes(144))]
put("fuzz_gguf", "llama", gguf(gguf_llama_kv, gguf_tensors))
put("fuzz_gguf", "v2", gguf(gguf_llama_kv[:2], gguf_tensors[:1], version=2))
put("fuzz_gguf", "truncated", gguf(gguf_llama_kv, gguf_tensors)[:-100])
g2_tokens = [None] * len(gv)
for piece, i in gv.items():
    g2_tokens[i] = piece
put("fuzz_gguf", "gpt2", gguf([("general.architecture", 8, "gpt2"),
                               ("general.alignment", 4, 32),
                               ("tokenizer.ggml.model", 8, "gpt2"),
                               ("tokenizer.ggml.tokens", ARR(8), g2_tokens),
                               ("tokenizer.ggml.merges", ARR(8), [a + " " + b for a, b in gm]),
                               ("tokenizer.ggml.bos_token_id", 4, len(gv) - 1)],
                              [("output_norm.weight", 0, [8], f32(*range(8)))]))
print("seeds written under", ROOT)
