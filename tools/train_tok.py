#!/usr/bin/python3
"""train_tok.py: the tokenizers of tools/train.py, encoded exactly as the engine encodes.

Two kinds, both stored as a HeadSplit `spm` tokenizer (src/model/tokenizer.c):

* byte: 259 pieces, the layout of tokenizer_build_synthetic: <unk>, "\\n<s>\\n" (BOS 1),
  "\\n</s>\\n" (EOS 2), then the byte pieces <0x00>..<0xFF>.  Every byte is its own token.

* bpe: the same 259 pieces, then one piece per character of the training text (so that the
  engine finds a piece for each code point before falling back to bytes), then pieces
  learned by byte-pair merging over pre-tokenized words, score = -(merge rank).  The engine
  encodes SentencePiece-style (llama2.c run.c): split the text into code points, then
  repeatedly merge the adjacent pair whose concatenation is a piece of highest score
  (leftmost first on ties).  It does no pre-tokenization, but every learned piece lies
  inside one pre-token of the pattern below: a single leading space at most, then letters,
  or digits, or other non-space characters, never a mix of classes.  A pair that straddles
  two pre-tokens therefore always concatenates to a string that is not a piece (it has a
  space after its first character, ends with whitespace, starts with a newline, or mixes
  classes), so encoding pre-token by pre-token gives exactly the engine's tokens; this
  module does that, with a cache, and tools/train_check.py compares it with
  headsplit-tokenize on the held-out text.
"""
import collections
import re

import numpy as np

BOS, EOS, UNK = 1, 2, 0
N_SPECIAL = 3
BYTE0 = N_SPECIAL  # id of <0x00>

# One leading space at most, then a run of one character class; whitespace one by one.
PRETOKEN = re.compile(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s")


def _base_pieces():
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"]
    pieces += [("<0x%02X>" % b).encode() for b in range(256)]
    return pieces


class Tokenizer:
    def __init__(self, pieces, scores):
        self.pieces = pieces  # list of bytes
        self.scores = np.asarray(scores, dtype=np.float32)
        self.vocab_size = len(pieces)
        self.index = {}
        for i, p in enumerate(pieces):
            self.index.setdefault(p, i)  # the lowest id keeps a duplicated piece
        self.byte_level = self.vocab_size == 256 + N_SPECIAL
        self._cache = {}

    # -- encoding ---------------------------------------------------------------------------
    def _encode_word(self, w):
        """SentencePiece-style score merging of one pre-token (a str)."""
        syms = []
        for ch in w:
            b = ch.encode("utf-8")
            pid = self.index.get(b)
            if pid is not None:
                syms.append((pid, b))
            else:  # byte fallback: these pieces never merge (their text is "<0xNN>")
                syms.extend((BYTE0 + x, None) for x in b)
        while len(syms) > 1:
            best, best_i, best_id = None, -1, -1
            for i in range(len(syms) - 1):
                a, b = syms[i][1], syms[i + 1][1]
                if a is None or b is None:
                    continue
                pid = self.index.get(a + b)
                if pid is None or not self.scores[pid] > -1e10:
                    continue
                s = self.scores[pid]
                if best is None or s > best:
                    best, best_i, best_id = s, i, pid
            if best is None:
                break
            merged = syms[best_i][1] + syms[best_i + 1][1]
            syms[best_i:best_i + 2] = [(best_id, merged)]
        return [s[0] for s in syms]

    def encode(self, text):
        """Token ids of text (no BOS/EOS)."""
        if self.byte_level:
            return [BYTE0 + b for b in text.encode("utf-8")]
        out = []
        cache = self._cache
        for m in PRETOKEN.finditer(text):
            w = m.group(0)
            ids = cache.get(w)
            if ids is None:
                ids = self._encode_word(w)
                cache[w] = ids
            out.extend(ids)
        return out

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i in (UNK, BOS, EOS):
                continue
            if BYTE0 <= i < BYTE0 + 256:
                out.append(i - BYTE0)
            else:
                out += self.pieces[i]
        return out.decode("utf-8", errors="replace")

    # -- file ------------------------------------------------------------------------------
    def h5_arrays(self):
        offs = np.zeros(self.vocab_size + 1, dtype=np.uint64)
        offs[1:] = np.cumsum([len(p) for p in self.pieces])
        data = np.frombuffer(b"".join(self.pieces), dtype=np.uint8)
        return data, offs, self.scores


def byte_tokenizer():
    pieces = _base_pieces()
    return Tokenizer(pieces, np.zeros(len(pieces), dtype=np.float32))


def train_bpe(text, vocab_size, log=print):
    """Byte-pair merges over the pre-tokens of text, most frequent pair first (ties: the
    lexicographically smallest pair of piece strings), until vocab_size pieces."""
    pieces = _base_pieces()
    scores = [0.0] * len(pieces)
    chars = sorted(set(text))
    for ch in chars:
        pieces.append(ch.encode("utf-8"))
        scores.append(0.0)
    words = collections.Counter(m.group(0) for m in PRETOKEN.finditer(text))
    # Each word as a list of piece strings (bytes); counts.
    wlist = [[c.encode("utf-8") for c in w] for w in words]
    wcount = list(words.values())
    pair_count = collections.Counter()
    pair_words = collections.defaultdict(set)
    for wi, syms in enumerate(wlist):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += wcount[wi]
            pair_words[(a, b)].add(wi)
    known = set(pieces)
    r = 0
    while len(pieces) < vocab_size:
        if not pair_count:
            break
        # Most frequent, then smallest (a, b) for determinism.
        best = max(pair_count.items(), key=lambda kv: (kv[1], _neg(kv[0])))[0]
        if pair_count[best] < 2:
            break
        a, b = best
        new = a + b
        if new not in known:  # a string reached by an earlier merge is not added twice
            r += 1
            known.add(new)
            pieces.append(new)
            scores.append(-float(r))
        for wi in sorted(pair_words.pop(best, ())):
            syms = wlist[wi]
            c = wcount[wi]
            for x, y in zip(syms, syms[1:]):
                pair_count[(x, y)] -= c
                if pair_count[(x, y)] <= 0:
                    del pair_count[(x, y)]
            out = []
            i = 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            wlist[wi] = out
            for x, y in zip(out, out[1:]):
                pair_count[(x, y)] += c
                pair_words[(x, y)].add(wi)
        pair_count.pop(best, None)
    log("bpe: %d pieces (%d characters, %d merges)" % (len(pieces), len(chars),
                                                       len(pieces) - 259 - len(chars)))
    return Tokenizer(pieces, np.array(scores, dtype=np.float32))


class _neg:
    """Orders pairs so that max() picks the lexicographically smallest one."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __lt__(self, o):
        return self.k > o.k

    def __gt__(self, o):
        return self.k < o.k

    def __eq__(self, o):
        return self.k == o.k
