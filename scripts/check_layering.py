#!/usr/bin/env python3
"""check_layering.py: enforces the layering of docs/architecture.md on the C sources.

    scripts/check-layering.sh [--root DIR]     check the tree (default: this repository)
    scripts/check-layering.sh --self-test      plant each kind of violation in a copy of the
                                               tree and check that every one is caught

Rules, each reported as FILE:LINE: [rule] message:
  mpi      no MPI outside the transport layer: only src/transport/ and the headers of the
           transport layer may include <mpi.h> or name an MPI_ symbol (comments and string
           literals do not count)
  include  no wrong-direction include: util -> kernels -> model -> plan -> transport ->
           engine -> app; convert and sim sit on plan and include neither transport nor
           engine (nor each other); tools/, tests/, fuzz/ and bench/ may include anything
  table    every header in include/ and every header a file includes by name is in LAYER
           below (a new header has to be given a layer here)
  hdf5     the planner and simulator headers (PURE_HEADERS and what they include) do not pull
           <hdf5.h>
Exit status: 0 clean, 1 violations, 2 usage or set-up error.  Standard library only.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = ["util", "kernels", "model", "plan", "transport", "engine", "app", "convert", "sim"]

# What a file of each layer may include.  The main line is a chain; convert and sim branch off
# at plan; app sits on everything.
MAY_INCLUDE = {
    "util": {"util"},
    "kernels": {"util", "kernels"},
    "model": {"util", "kernels", "model"},
    "plan": {"util", "kernels", "model", "plan"},
    "transport": {"util", "kernels", "model", "plan", "transport"},
    "engine": {"util", "kernels", "model", "plan", "transport", "engine"},
    "app": set(LAYERS),
    "convert": {"util", "kernels", "model", "plan", "convert"},
    "sim": {"util", "kernels", "model", "plan", "sim"},
}

# Every public header and its layer: the one table.  Headers a branch is about to add are
# listed too (a listed header that does not exist yet is fine; an unlisted one is an error).
LAYER = {
    # util: no project includes
    "util.h": "util",
    "energy.h": "util",         # src/util/energy.c
    # kernels
    "kernels.h": "kernels",
    "quant.h": "kernels",       # quantized block types, src/kernels/quant*.c
    # model: config, weights, forward pass, tokenizers, HDF5 I/O
    "config.h": "model",
    "config_io.h": "model",     # config_read/config_write (HDF5), so config.h is HDF5-free
    "h5io.h": "model",
    "model.h": "model",
    "generate.h": "model",
    "chat.h": "model",
    "sampler.h": "model",
    "speculative.h": "model",  # src/model/speculative.c: the draft acceptance rule
    "tokenizer.h": "model",
    "profile.h": "model",
    "gguf.h": "model",          # src/model/gguf.c (read by src/convert/gguf.c as well)
    # plan: pure placement, cluster description, schedule, and the wire format both the engine
    # and the simulator count bytes with
    "plan.h": "plan",
    "cluster.h": "plan",
    "netmodel.h": "plan",       # the network model (airtime, shared channel), header only
    "schedule.h": "plan",
    "steps.h": "plan",          # the token's step program (computes and messages)
    "inputs.h": "plan",         # ClusterInputs and their pure stabilisation (no MPI)
    "cost.h": "plan",           # the cost model interface (token and layer costs)
    "solver.h": "plan",         # the layer DP and the exact solver over a cost model
    "wire.h": "plan",
    # transport: every MPI call
    "transport.h": "transport",
    "transport_mpi.h": "transport",
    # engine (and the start-up's collectives, made through the transport)
    "dist.h": "engine",
    "startup.h": "engine",
    # side layers on plan
    "convert.h": "convert",
    "safetensors.h": "convert",
    "sim.h": "sim",
}

# src/ folders and their layer.
FOLDER_LAYER = {
    "util": "util", "kernels": "kernels", "model": "model", "plan": "plan",
    "transport": "transport", "engine": "engine", "app": "app",
    "convert": "convert", "sim": "sim",
}

# Folders whose files may include any header (still checked for MPI and for unknown headers).
FREE_DIRS = ("tools", "tests", "fuzz", "bench")

# Headers that must stay free of HDF5, with everything they include.
PURE_HEADERS = ["plan.h", "sim.h", "solver.h", "cluster.h", "schedule.h", "steps.h", "netmodel.h"]

# PENDING: violations that exist today and that branches in flight remove (issue 16: the
# transport branch moves every MPI call into src/transport/, the start-up branch empties
# src/app/headsplit.c of MPI and moves config_read/config_write to config_io.h).  Each entry
# exempts exactly one (rule, path pattern); delete entries as their branches land.  An entry
# that no longer matches anything is reported as a note, not an error.
PENDING = [
]

C_EXT = (".c", ".h")
SCAN_DIRS = ("src", "include") + FREE_DIRS
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
MPI_RE = re.compile(r"\b(P?MPI_[A-Za-z0-9_]+)")


TOKEN_RE = re.compile(r"""//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?""",
                      re.S)


def strip_comments(text, keep_strings):
    """The text with comments (and, unless keep_strings, the insides of string and char
    literals) blanked, newlines kept so that line numbers stay right."""
    def blank(m):
        t = m.group(0)
        if t[0] in "\"'":
            if keep_strings:
                return t
            return t[0] + re.sub(r"[^\n]", " ", t[1:-1]) + t[-1] if len(t) > 1 else t
        return re.sub(r"[^\n]", " ", t)
    return TOKEN_RE.sub(blank, text)


def pattern_match(pattern, rel):
    """Shell-style match of a path pattern in which * does not cross '/'."""
    rx = "^" + re.escape(pattern).replace(r"\*", "[^/]*") + "$"
    return re.match(rx, rel) is not None


class Checker:
    def __init__(self, root):
        self.root = root
        self.errors = []
        self.used_pending = set()
        self.includes = {}  # rel path -> [(line, kind, name)]

    def pending(self, rule, rel):
        for entry in PENDING:
            if entry[0] == rule and pattern_match(entry[1], rel):
                self.used_pending.add(entry)
                return True
        return False

    def error(self, rel, line, rule, msg):
        text = f"{rel}:{line}: [{rule}] {msg}"
        if not self.pending(rule, rel) and text not in self.errors:
            self.errors.append(text)

    def files(self):
        for top in SCAN_DIRS:
            base = os.path.join(self.root, top)
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for f in sorted(filenames):
                    if f.endswith(C_EXT):
                        full = os.path.join(dirpath, f)
                        yield os.path.relpath(full, self.root).replace(os.sep, "/")

    def layer_of_file(self, rel):
        """The layer of a source file, "free" for tools/tests/fuzz/bench, None if unknown."""
        parts = rel.split("/")
        if parts[0] in FREE_DIRS:
            return "free"
        if parts[0] == "include" and len(parts) == 2:
            return LAYER.get(parts[1])
        if parts[0] == "src" and len(parts) >= 3:
            return FOLDER_LAYER.get(parts[1])
        return None

    def resolve(self, rel, name):
        """The layer of a quoted include: a header next to the includer (or reached by a
        relative path) takes the layer of its folder; otherwise the table decides."""
        here = os.path.dirname(rel)
        local = os.path.normpath(os.path.join(here, name)).replace(os.sep, "/")
        if os.path.isfile(os.path.join(self.root, local)) and not local.startswith("include/"):
            return self.layer_of_file(local), local
        base = os.path.basename(name)
        if base in LAYER and (name == base or local.startswith("include/")):
            return LAYER[base], "include/" + base
        return None, None

    def check_file(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        code = strip_comments(text, keep_strings=True)
        bare = strip_comments(text, keep_strings=False)
        layer = self.layer_of_file(rel)
        mpi_ok = rel.startswith("src/transport/") or layer == "transport"
        incs = []
        for no, (line, bare_line) in enumerate(zip(code.split("\n"), bare.split("\n")), 1):
            m = INCLUDE_RE.match(line)
            if m:
                kind, name = m.group(1), m.group(2)
                incs.append((no, kind, name))
                if os.path.basename(name) == "mpi.h" and not mpi_ok:
                    close = ">" if kind == "<" else '"'
                    self.error(rel, no, "mpi", f"includes {kind}{name}{close}: MPI belongs in "
                               "src/transport/ (transport layer) only")
                continue
            if not mpi_ok:
                for sym in sorted(set(MPI_RE.findall(bare_line))):
                    self.error(rel, no, "mpi", f"names {sym}: MPI belongs in src/transport/ "
                               "(transport layer) only")
        self.includes[rel] = incs
        if rel.startswith("include/") and rel.count("/") == 1 and layer is None:
            self.error(rel, 1, "table", f"header {os.path.basename(rel)} has no layer: add it "
                       "to LAYER in scripts/check_layering.py")
        if rel.startswith("src/") and layer is None:
            self.error(rel, 1, "table", f"folder src/{rel.split('/')[1]} has no layer: add it to "
                       "FOLDER_LAYER in scripts/check_layering.py")
        for no, kind, name in incs:
            if kind != '"':
                continue
            target_layer, _ = self.resolve(rel, name)
            if target_layer is None:
                self.error(rel, no, "table", f'includes "{name}", a header with no layer: add it '
                           "to LAYER in scripts/check_layering.py")
                continue
            if layer in (None, "free") or target_layer == "free":
                continue
            if target_layer not in MAY_INCLUDE[layer]:
                allowed = ", ".join(l for l in LAYERS if l in MAY_INCLUDE[layer])
                self.error(rel, no, "include", f'includes "{name}" ({target_layer} layer) from '
                           f"the {layer} layer, which may include only {allowed}")

    def check_pure_headers(self):
        """Follows the quoted includes of each planner/simulator header to <hdf5.h>."""
        reported = set()  # (file, line): once, with the first chain that reaches it
        for top in PURE_HEADERS:
            start = "include/" + top
            if start not in self.includes:
                continue
            seen, stack = set(), [(start, [start])]
            while stack:
                rel, chain = stack.pop()
                if rel in seen:
                    continue
                seen.add(rel)
                for no, kind, name in self.includes.get(rel, []):
                    if kind == "<" and name == "hdf5.h" and (rel, no) not in reported:
                        reported.add((rel, no))
                        via = " -> ".join(chain)
                        self.error(rel, no, "hdf5", f"includes <hdf5.h>, which {top} pulls in "
                                   f"({via}): planner and simulator headers stay HDF5-free")
                    elif kind == '"':
                        _, target = self.resolve(rel, name)
                        if target and target in self.includes:
                            stack.append((target, chain + [target]))

    def run(self):
        for rel in self.files():
            self.check_file(rel)
        self.check_pure_headers()
        return self.errors


def check(root, quiet=False):
    c = Checker(root)
    errors = c.run()
    if not quiet:
        for e in errors:
            print(e, file=sys.stderr)
        for entry in PENDING:
            if entry not in c.used_pending:
                print(f"check-layering: note: PENDING entry {entry} exempts nothing now: "
                      "delete it", file=sys.stderr)
        print(f"check-layering: {len(c.includes)} files, {len(errors)} violation(s), "
              f"{len(c.used_pending)} PENDING exemption(s) in use", file=sys.stderr)
    return errors


# Planted violations for --self-test: (what, file to create or append to, text, the file and
# rule of the one error expected).  Each is planted alone in a fresh copy of the tree.
PLANTS = [
    ("MPI call in the planner", "src/plan/zz_plant.c",
     '#include "plan.h"\nvoid zz(void) { MPI_Barrier(0); }\n', ("src/plan/zz_plant.c:2", "mpi")),
    ("<mpi.h> in the model", "src/model/zz_plant.c",
     "/* MPI_Send in a comment is fine */\n#include <mpi.h>\n", ("src/model/zz_plant.c:2", "mpi")),
    ("MPI type in a kernels header", "include/kernels.h",
     "\ntypedef MPI_Comm ZzComm;\n", ("include/kernels.h", "mpi")),
    ("kernels including the planner", "src/kernels/zz_plant.c",
     '#include "kernels.h"\n#include "plan.h"\n', ("src/kernels/zz_plant.c:2", "include")),
    ("planner (a solver) including the simulator", "src/plan/zz_plant.c",
     '#include "solver.h"\n#include "sim.h"\n', ("src/plan/zz_plant.c:2", "include")),
    ("simulator including the engine", "src/sim/zz_plant.c",
     '#include "sim.h"\n#include "dist.h"\n', ("src/sim/zz_plant.c:2", "include")),
    ("convert including the transport", "src/convert/zz_plant.c",
     '#include "transport.h"\n', ("src/convert/zz_plant.c:1", "include")),
    ("planner header including the transport", "include/plan.h",
     '\n#include "transport.h"\n', ("include/plan.h", "include")),
    ("header without a layer", "include/zz_unlisted.h",
     "#include <stddef.h>\n", ("include/zz_unlisted.h:1", "table")),
    ("include of an unknown header", "src/util/zz_plant.c",
     '#include "zz_nowhere.h"\n', ("src/util/zz_plant.c:1", "table")),
    ("HDF5 pulled into a planner header", "include/cluster.h",
     '\n#include "h5io.h"\n', ("include/h5io.h", "hdf5")),
]


def self_test():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="check-layering.") as tmp:
        base = os.path.join(tmp, "base")
        for top in SCAN_DIRS:
            src = os.path.join(repo, top)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(base, top),
                                ignore=lambda d, names: [n for n in names if
                                                         os.path.isfile(os.path.join(d, n)) and
                                                         not n.endswith(C_EXT)])
        clean = check(base, quiet=True)
        if clean:
            print("self-test: FAIL: the unmodified tree is not clean:", file=sys.stderr)
            failures += 1
        else:
            print("self-test: ok: the unmodified tree passes", file=sys.stderr)
        for i, (what, rel, text, expect) in enumerate(PLANTS):
            tree = os.path.join(tmp, f"t{i}")
            shutil.copytree(base, tree)
            path = os.path.join(tree, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
            errors = check(tree, quiet=True)
            where, rule = expect
            hit = [e for e in errors if e.startswith(where + ":") and f": [{rule}] " in e]
            if len(hit) == 1 and len(errors) == 1:
                print(f"self-test: ok: {what}: {hit[0]}", file=sys.stderr)
            else:
                print(f"self-test: FAIL: {what}: expected one [{rule}] error in {where}, got "
                      f"{errors!r}", file=sys.stderr)
                failures += 1
        # The command-line entry point fails on a violation as well.
        tree = os.path.join(tmp, "t0")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", tree],
                           capture_output=True, text=True)
        if r.returncode != 1 or "[mpi]" not in r.stderr:
            print(f"self-test: FAIL: --root on a bad tree exited {r.returncode}", file=sys.stderr)
            failures += 1
    print(f"self-test: {len(PLANTS) + 2 - failures} of {len(PLANTS) + 2} checks passed",
          file=sys.stderr)
    return 1 if failures else 0


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = argv[1:]
    if args in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if args == ["--self-test"]:
        return self_test()
    if len(args) == 2 and args[0] == "--root":
        root = args[1]
    elif args:
        print("usage: check-layering.sh [--root DIR | --self-test]", file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"check-layering: {root}: no src/ folder", file=sys.stderr)
        return 2
    return 1 if check(root) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
