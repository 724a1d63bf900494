#!/usr/bin/python3
"""train_corpus.py: extract the training corpus for tools/train.py.

The corpus is the complete text of Jane Austen's six finished novels as shipped by the
Debian package r-cran-janeaustenr (package licence MIT; the texts themselves are public
domain, transcribed by Project Gutenberg).  The package keeps them as R "lazy-load" data
(data/Rdata.rdx + data/Rdata.rdb): a gzip'd serialized index of (offset, length) pairs and
zlib-compressed serialized R objects.  This module reads that format directly (a minimal
XDR unserializer), so neither R nor the package's R dependencies need to be installed: the
.deb can simply be unpacked with `dpkg-deb -x`.

Each novel is a character vector, one element per line of the Gutenberg transcription
(blank strings between paragraphs).  We rebuild the text of each novel by joining the lines
with "\n" (paragraphs separated by one blank line), and the corpus is the six novels in a
fixed order.

    /usr/bin/python3 tools/train_corpus.py --out /tmp/austen.txt     # writes the corpus
"""
import argparse
import glob
import gzip
import os
import struct
import zlib

PKG_DIR_DEFAULT = "/usr/lib/R/site-library/janeaustenr"

# Order of the novels in the corpus (publication order).  The last novel contributes the
# held-out validation text (see tools/train.py).
NOVELS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma",
          "northangerabbey", "persuasion"]


class _Reader:
    """Minimal reader for R's XDR serialization format (versions 2 and 3)."""

    def __init__(self, data):
        self.d = data
        self.p = 0
        self.refs = []

    def i32(self):
        v = struct.unpack_from(">i", self.d, self.p)[0]
        self.p += 4
        return v

    def f64s(self, n):
        v = struct.unpack_from(">%dd" % n, self.d, self.p)
        self.p += 8 * n
        return list(v)

    def i32s(self, n):
        v = struct.unpack_from(">%di" % n, self.d, self.p)
        self.p += 4 * n
        return list(v)

    def length(self):
        n = self.i32()
        if n == -1:
            hi, lo = self.i32(), self.i32()
            n = (hi << 32) + lo
        return n

    def header(self):
        fmt = self.d[self.p:self.p + 2]
        if fmt != b"X\n":
            raise ValueError("not an XDR R serialization (%r)" % fmt)
        self.p += 2
        version = self.i32()
        self.i32()  # writer R version
        self.i32()  # minimal reader R version
        if version == 3:
            n = self.i32()
            self.p += n  # native encoding name
        elif version != 2:
            raise ValueError("unsupported serialization version %d" % version)

    def item(self):
        flags = self.i32()
        t = flags & 0xFF
        has_attr = bool(flags & (1 << 9))
        has_tag = bool(flags & (1 << 10))
        if t == 254:  # NILVALUE_SXP
            return None
        if t in (253, 252, 251, 250, 242, 241):  # global/unbound/missing/base/empty env
            return None
        if t == 255:  # REFSXP
            idx = flags >> 8
            if idx == 0:
                idx = self.i32()
            return self.refs[idx - 1]
        if t in (247, 249, 248):  # PERSISTSXP, NAMESPACESXP, PACKAGESXP
            self.i32()  # always 0
            n = self.length()
            info = [self.item() for _ in range(n)]
            self.refs.append(("ns", info))
            return self.refs[-1]
        if t == 1:  # SYMSXP
            name = self.item()
            sym = ("sym", name)
            self.refs.append(sym)
            return sym
        if t == 9:  # CHARSXP
            n = self.i32()
            if n == -1:
                return None
            s = self.d[self.p:self.p + n]
            self.p += n
            return s
        if t in (2, 6, 3, 5, 17, 240, 239):  # pairlist-like
            attr = self.item() if has_attr else None
            tag = self.item() if has_tag else None
            car = self.item()
            cdr = self.item()
            out = [(tag[1] if tag else None, car)]
            if isinstance(cdr, PairList):
                out.extend(cdr.items)
            res = PairList(out)
            res.attr = attr
            return res
        if t == 4:  # ENVSXP
            env = {}
            self.refs.append(env)
            self.i32()  # locked
            env["enclos"] = self.item()
            env["frame"] = self.item()
            env["hashtab"] = self.item()
            env["attr"] = self.item()
            return env
        if t == 16:  # STRSXP
            n = self.length()
            val = [self.item() for _ in range(n)]
        elif t in (10, 13):  # LGLSXP, INTSXP
            n = self.length()
            val = self.i32s(n)
        elif t == 14:  # REALSXP
            n = self.length()
            val = self.f64s(n)
        elif t in (19, 20):  # VECSXP, EXPRSXP
            n = self.length()
            val = [self.item() for _ in range(n)]
        elif t == 24:  # RAWSXP
            n = self.length()
            val = self.d[self.p:self.p + n]
            self.p += n
        else:
            raise ValueError("unsupported R SEXP type %d" % t)
        attr = self.item() if has_attr else None
        return RVector(t, val, attr)


class PairList:
    def __init__(self, items):
        self.items = items
        self.attr = None

    def get(self, name):
        for tag, val in self.items:
            if tag == name:
                return val
        return None


class RVector:
    def __init__(self, sexp_type, values, attr):
        self.type = sexp_type
        self.values = values
        self.attr = attr

    def names(self):
        if isinstance(self.attr, PairList):
            nm = self.attr.get(b"names")
            if nm is not None:
                return [s.decode() for s in nm.values]
        return None


def _unserialize(data):
    r = _Reader(data)
    r.header()
    return r.item()


def _lazyload_entry(rdb, offset, length):
    blob = rdb[offset:offset + length]
    ulen = struct.unpack_from(">I", blob, 0)[0]
    raw = zlib.decompress(blob[4:])
    if len(raw) != ulen:
        raise ValueError("lazy-load entry has %d bytes, header says %d" % (len(raw), ulen))
    return _unserialize(raw)


def load_novels(pkg_dir=PKG_DIR_DEFAULT):
    """Returns {name: text} for the six novels in the janeaustenr data directory."""
    data_dir = os.path.join(pkg_dir, "data")
    with gzip.open(os.path.join(data_dir, "Rdata.rdx"), "rb") as f:
        index = _unserialize(f.read())
    names = index.names()
    variables = index.values[names.index("variables")]
    with open(os.path.join(data_dir, "Rdata.rdb"), "rb") as f:
        rdb = f.read()
    out = {}
    for name, loc in zip(variables.names(), variables.values):
        off, ln = int(loc.values[0]), int(loc.values[1])
        vec = _lazyload_entry(rdb, off, ln)
        if vec.type != 16:
            continue
        lines = [(s or b"").decode("utf-8") for s in vec.values]
        out[name] = "\n".join(lines).strip("\n") + "\n"
    return out


def find_pkg_dir():
    """The installed package, or an unpacked .deb under /tmp (dpkg-deb -x)."""
    cands = [PKG_DIR_DEFAULT] + sorted(glob.glob("/tmp/*/x" + PKG_DIR_DEFAULT)) + \
        sorted(glob.glob("/tmp/janeaustenr-deb" + PKG_DIR_DEFAULT))
    for c in cands:
        if os.path.exists(os.path.join(c, "data", "Rdata.rdb")):
            return c
    raise SystemExit("janeaustenr data not found: apt-get install r-cran-janeaustenr, or "
                     "apt-get download r-cran-janeaustenr && dpkg-deb -x "
                     "r-cran-janeaustenr_*.deb /tmp/janeaustenr-deb")


def load_corpus(pkg_dir=None):
    """Returns the list of (name, text) documents in corpus order."""
    novels = load_novels(pkg_dir or find_pkg_dir())
    missing = [n for n in NOVELS if n not in novels]
    if missing:
        raise SystemExit("janeaustenr data lacks %s" % ", ".join(missing))
    return [(n, novels[n]) for n in NOVELS]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pkg-dir", default=None, help="janeaustenr package directory")
    ap.add_argument("--out", required=True, help="write the corpus (UTF-8) here")
    a = ap.parse_args()
    docs = load_corpus(a.pkg_dir)
    with open(a.out, "w", encoding="utf-8") as f:
        for name, text in docs:
            f.write(text)
    for name, text in docs:
        print("%-18s %9d chars %9d bytes" % (name, len(text), len(text.encode())))


if __name__ == "__main__":
    main()
