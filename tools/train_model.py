#!/usr/bin/python3
"""train_model.py: the two model architectures of tools/train.py in PyTorch, and their
export to the HeadSplit HDF5 format (docs/model-format.md).

The forward passes follow the engine (src/model/layer.c, src/kernels/kernels.c):

llama: x = embed[t]; per layer x += Wo attn(rope(Wq n), rope(Wk n), Wv n), n = rmsnorm(x) *
       attn_norm; x += w_down (silu(w_gate m) * (w_up m)), m = rmsnorm(x) * ffn_norm;
       logits = lm_head (rmsnorm(x) * final_norm).  RoPE interleaved (pairs 2i, 2i+1, frequency
       theta^(-2i/hd), llama2.c); GQA: query head h reads KV head h // (n_heads / n_kv_heads).
       No biases.
gpt2:  x = embed[t] + pos_embed[p]; LayerNorm (biased variance) with biases, biases on every
       projection, gelu_tanh; logits = embed (layernorm(x)) (tied).
"""
import math

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, arch, dim, n_layers, n_heads, n_kv_heads, ffn_dim, vocab_size,
                 context_length, norm_eps=1e-5, rope_theta=10000.0, tied=None):
        self.arch = arch
        self.dim = dim
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads if arch == "llama" else n_heads
        self.head_dim = dim // n_heads
        self.ffn_dim = ffn_dim
        self.vocab_size = vocab_size
        self.context_length = context_length
        self.norm_eps = norm_eps
        self.rope_theta = rope_theta
        self.tied = (arch == "gpt2") if tied is None else tied
        assert self.head_dim * n_heads == dim and self.head_dim % 2 == 0
        assert n_heads % self.n_kv_heads == 0

    def describe(self):
        return ("%s dim %d, %d layers, %d query heads, %d KV heads, head_dim %d, ffn %d, "
                "vocab %d, context %d%s" % (self.arch, self.dim, self.n_layers, self.n_heads,
                                           self.n_kv_heads, self.head_dim, self.ffn_dim,
                                           self.vocab_size, self.context_length,
                                           ", tied embeddings" if self.tied else ""))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg, T):
    """cos/sin [T][hd/2] in float32, as kernels_rope computes them."""
    hd = cfg.head_dim
    k = torch.arange(hd // 2, dtype=torch.float32)
    freq = 1.0 / torch.pow(torch.tensor(cfg.rope_theta, dtype=torch.float32),
                           (2.0 * k) / float(hd))
    ang = torch.arange(T, dtype=torch.float32)[:, None] * freq[None, :]
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    """x [B][H][T][hd], interleaved pairs (2i, 2i+1)."""
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack((y0, y1), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.dim, cfg.head_dim
        bias = cfg.arch == "gpt2"
        if cfg.arch == "llama":
            self.attn_norm = RMSNorm(d, cfg.norm_eps)
            self.ffn_norm = RMSNorm(d, cfg.norm_eps)
            self.w_gate = nn.Linear(d, cfg.ffn_dim, bias=False)
        else:
            self.attn_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
            self.ffn_norm = nn.LayerNorm(d, eps=cfg.norm_eps)
        self.wq = nn.Linear(d, cfg.n_heads * hd, bias=bias)
        self.wk = nn.Linear(d, cfg.n_kv_heads * hd, bias=bias)
        self.wv = nn.Linear(d, cfg.n_kv_heads * hd, bias=bias)
        self.wo = nn.Linear(cfg.n_heads * hd, d, bias=bias)
        self.w_up = nn.Linear(d, cfg.ffn_dim, bias=bias)
        self.w_down = nn.Linear(cfg.ffn_dim, d, bias=bias)

    def forward(self, x, rope, mask):
        cfg = self.cfg
        B, T, _ = x.shape
        H, G, hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        n = self.attn_norm(x)
        q = self.wq(n).view(B, T, H, hd).transpose(1, 2)
        k = self.wk(n).view(B, T, G, hd).transpose(1, 2)
        v = self.wv(n).view(B, T, G, hd).transpose(1, 2)
        if rope is not None:
            q = apply_rope(q, *rope)
            k = apply_rope(k, *rope)
        # GQA without copying K/V: the Q query heads of group g are stacked along time.
        Q = H // G
        q = q.reshape(B, G, Q * T, hd) * (1.0 / math.sqrt(hd))
        att = torch.baddbmm(mask[:T, :T].repeat(Q, 1).expand(B * G, Q * T, T),
                            q.reshape(B * G, Q * T, hd),
                            k.reshape(B * G, T, hd).transpose(1, 2))
        att = torch.softmax(att, dim=-1)
        y = torch.bmm(att, v.reshape(B * G, T, hd))  # [B*G][Q*T][hd]
        y = y.view(B, H, T, hd).transpose(1, 2).reshape(B, T, H * hd)
        x = x + self.wo(y)
        m = self.ffn_norm(x)
        if cfg.arch == "llama":
            h = F.silu(self.w_gate(m)) * self.w_up(m)
        else:
            h = F.gelu(self.w_up(m), approximate="tanh")
        return x + self.w_down(h)


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        if cfg.arch == "gpt2":
            self.pos_embed = nn.Embedding(cfg.context_length, cfg.dim)
            self.final_norm = nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
        else:
            self.final_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        if not cfg.tied:
            self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((cfg.context_length,
                                                            cfg.context_length),
                                                           float("-inf")), 1),
                             persistent=False)
        self._rope = None
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name:
                nn.init.ones_(p)
            elif name.endswith("wo.weight") or name.endswith("w_down.weight"):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.cfg.n_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def n_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx):
        B, T = idx.shape
        x = self.embed(idx)
        rope = None
        if self.cfg.arch == "gpt2":
            x = x + self.pos_embed(torch.arange(T))
        else:
            if self._rope is None or self._rope[0].shape[0] < T:
                self._rope = rope_tables(self.cfg, self.cfg.context_length)
            rope = (self._rope[0][:T], self._rope[1][:T])
        for layer in self.layers:
            x = layer(x, rope, self.mask)
        x = self.final_norm(x)
        w = self.embed.weight if self.cfg.tied else self.lm_head.weight
        return x @ w.t()


# ---- HDF5 export ---------------------------------------------------------------------------

def _str_attr(obj, name, value):
    """Fixed-length, NUL-terminated ASCII string attribute (as h5io_attr_write_string)."""
    raw = value.encode("ascii") + b"\0"
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(len(raw))
    tid.set_strpad(h5py.h5t.STR_NULLTERM)
    sid = h5py.h5s.create(h5py.h5s.SCALAR)
    aid = h5py.h5a.create(obj.id, name.encode(), tid, sid)
    aid.write(np.array(raw, dtype="S%d" % len(raw)))


def _int_attr(obj, name, value):
    obj.attrs.create(name, np.int32(value), dtype="<i4")


def _f64_attr(obj, name, value):
    obj.attrs.create(name, np.float64(value), dtype="<f8")


def _ds(g, name, t, shape=None):
    a = t.detach().cpu().numpy().astype("<f4", copy=True)
    if shape is not None:
        a = a.reshape(shape)
    g.create_dataset(name, data=np.ascontiguousarray(a), dtype="<f4")  # contiguous, no filters


def export_h5(model, tok, path, source):
    cfg = model.cfg
    G, H, hd, d = cfg.n_kv_heads, cfg.n_heads, cfg.head_dim, cfg.dim
    Q = H // G
    with h5py.File(path, "w", libver="earliest") as f:
        c = f.create_group("config")
        _int_attr(c, "format_version", 1)
        _str_attr(c, "architecture", cfg.arch)
        for k, v in (("dim", d), ("n_layers", cfg.n_layers), ("n_heads", H),
                     ("n_kv_heads", G), ("head_dim", hd), ("ffn_dim", cfg.ffn_dim),
                     ("vocab_size", cfg.vocab_size), ("context_length", cfg.context_length)):
            _int_attr(c, k, v)
        _f64_attr(c, "norm_eps", cfg.norm_eps)
        _f64_attr(c, "rope_theta", cfg.rope_theta)
        _str_attr(c, "rope_style", "interleaved" if cfg.arch == "llama" else "none")
        _int_attr(c, "tied_embeddings", 1 if cfg.tied else 0)
        _int_attr(c, "bos_id", 1)
        _int_attr(c, "eos_id", 2)
        _str_attr(c, "source", source)

        _ds(f, "embed", model.embed.weight)
        if cfg.arch == "gpt2":
            _ds(f, "pos_embed", model.pos_embed.weight)
            _ds(f, "final_norm", model.final_norm.weight)
            _ds(f, "final_norm_bias", model.final_norm.bias)
        else:
            _ds(f, "final_norm", model.final_norm.weight)
        if not cfg.tied:
            _ds(f, "lm_head", model.lm_head.weight)
        lg = f.create_group("layers")
        for l, b in enumerate(model.layers):
            g = lg.create_group(str(l))
            _ds(g, "attn_norm", b.attn_norm.weight)
            _ds(g, "wq", b.wq.weight, (G, Q * hd, d))
            _ds(g, "wk", b.wk.weight, (G, hd, d))
            _ds(g, "wv", b.wv.weight, (G, hd, d))
            _ds(g, "wo", b.wo.weight)
            _ds(g, "ffn_norm", b.ffn_norm.weight)
            _ds(g, "w_up", b.w_up.weight)
            _ds(g, "w_down", b.w_down.weight)
            if cfg.arch == "llama":
                _ds(g, "w_gate", b.w_gate.weight)
            else:
                _ds(g, "attn_norm_bias", b.attn_norm.bias)
                _ds(g, "bq", b.wq.bias, (G, Q * hd))
                _ds(g, "bk", b.wk.bias, (G, hd))
                _ds(g, "bv", b.wv.bias, (G, hd))
                _ds(g, "bo", b.wo.bias)
                _ds(g, "ffn_norm_bias", b.ffn_norm.bias)
                _ds(g, "b_up", b.w_up.bias)
                _ds(g, "b_down", b.w_down.bias)

        t = f.create_group("tokenizer")
        _str_attr(t, "kind", "spm")
        _int_attr(t, "bos_id", 1)
        _int_attr(t, "eos_id", 2)
        _int_attr(t, "add_bos", 1)
        _int_attr(t, "add_dummy_prefix", 0)
        _int_attr(t, "byte_fallback", 1)
        data, offs, scores = tok.h5_arrays()
        t.create_dataset("piece_bytes", data=data, dtype="<u1")
        t.create_dataset("piece_offsets", data=offs, dtype="<u8")
        t.create_dataset("scores", data=scores, dtype="<f4")


def load_h5(path):
    """Rebuilds (model, tokenizer) from a file written by export_h5."""
    import train_tok
    with h5py.File(path, "r") as f:
        c = f["config"].attrs

        def s(v):
            return v.decode() if isinstance(v, bytes) else str(v)
        arch = s(c["architecture"])
        cfg = Config(arch, int(c["dim"]), int(c["n_layers"]), int(c["n_heads"]),
                     int(c["n_kv_heads"]), int(c["ffn_dim"]), int(c["vocab_size"]),
                     int(c["context_length"]), float(c["norm_eps"]), float(c["rope_theta"]),
                     tied=bool(int(c["tied_embeddings"])))
        m = Model(cfg)
        sd = {}

        def T(x):
            return torch.from_numpy(np.array(x, dtype=np.float32))
        d, H, G, hd = cfg.dim, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        sd["embed.weight"] = T(f["embed"])
        sd["final_norm.weight"] = T(f["final_norm"])
        if arch == "gpt2":
            sd["pos_embed.weight"] = T(f["pos_embed"])
            sd["final_norm.bias"] = T(f["final_norm_bias"])
        if not cfg.tied:
            sd["lm_head.weight"] = T(f["lm_head"])
        for l in range(cfg.n_layers):
            g = f["layers/%d" % l]
            p = "layers.%d." % l
            sd[p + "attn_norm.weight"] = T(g["attn_norm"])
            sd[p + "ffn_norm.weight"] = T(g["ffn_norm"])
            sd[p + "wq.weight"] = T(g["wq"]).reshape(H * hd, d)
            sd[p + "wk.weight"] = T(g["wk"]).reshape(G * hd, d)
            sd[p + "wv.weight"] = T(g["wv"]).reshape(G * hd, d)
            sd[p + "wo.weight"] = T(g["wo"])
            sd[p + "w_up.weight"] = T(g["w_up"])
            sd[p + "w_down.weight"] = T(g["w_down"])
            if arch == "llama":
                sd[p + "w_gate.weight"] = T(g["w_gate"])
            else:
                sd[p + "attn_norm.bias"] = T(g["attn_norm_bias"])
                sd[p + "ffn_norm.bias"] = T(g["ffn_norm_bias"])
                sd[p + "wq.bias"] = T(g["bq"]).reshape(-1)
                sd[p + "wk.bias"] = T(g["bk"]).reshape(-1)
                sd[p + "wv.bias"] = T(g["bv"]).reshape(-1)
                sd[p + "wo.bias"] = T(g["bo"])
                sd[p + "w_up.bias"] = T(g["b_up"])
                sd[p + "w_down.bias"] = T(g["b_down"])
        m.load_state_dict(sd, strict=True)
        t = f["tokenizer"]
        data = np.array(t["piece_bytes"]).tobytes()
        offs = np.array(t["piece_offsets"])
        pieces = [data[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
        tok = train_tok.Tokenizer(pieces, np.array(t["scores"]))
    return m, tok
