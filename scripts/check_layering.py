#!/usr/bin/env python3
"""check_layering.py: enforces the layering of docs/architecture.md on the C sources.

    scripts/check-layering.sh [--root DIR]     check the tree (default: this repository)
    scripts/check-layering.sh --self-test [--cc CC] [--flags-LAYER "-I... -I..."]...
                                               plant each kind of violation in a copy of the
                                               tree and check that every one is caught; with
                                               --flags-LAYER (the include flags the build
                                               gives that layer's library, from CMake), the
                                               planted wrong-way includes must also fail to
                                               compile and their right-way twins compile

A header's layer is its folder: include/LAYER/NAME.h.  A source file's layer is its folder
under src/ (src/transport/mpi.c is the transport_mpi layer); a header beside its code
(src/LAYER/x_internal.h) is of that layer.  Rules, each reported as FILE:LINE: [rule] message:
  mpi      <mpi.h> is included by src/transport/mpi.c alone and no other file reaches it, not
           even through other headers; no other file names an MPI_ symbol (comments and
           string literals do not count)
  include  no wrong-direction include, quoted or in angle brackets: MAY_INCLUDE below
           (util -> kernels -> format -> model -> plan -> engine -> app; format -> tokenizer;
           model + tokenizer -> generate -> engine; proto under plan and the transport,
           util/proto -> transport -> engine; convert on model and tokenizer, sim on plan);
           tools/, tests/, fuzz/ and bench/ may include anything
  call     no call of a function defined in a layer the caller may not include, whether its
           prototype comes from a header or is written out locally
  table    every header in include/ sits in a layer folder, one header per name across the
           folders, and every quoted include names a header of the project
  hdf5     the planner and protocol layers (their sources and headers) and the simulator's
           headers do not reach <hdf5.h>, directly or through other headers
Exit status: 0 clean, 1 violations, 2 usage or set-up error.  Standard library only.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = ["util", "proto", "kernels", "format", "tokenizer", "model", "generate", "plan",
          "transport", "transport_mpi", "engine", "convert", "sim", "app"]

# What a file of each layer may include (and call).  The same graph as the libraries'
# target_link_libraries in CMakeLists.txt: each library's include folder reaches only the
# libraries above it.
MAY_INCLUDE = {
    "util": {"util"},
    "proto": {"util", "proto"},
    "kernels": {"util", "kernels"},
    "format": {"util", "kernels", "format"},
    "tokenizer": {"util", "kernels", "format", "tokenizer"},
    "model": {"util", "kernels", "format", "model"},
    "generate": {"util", "kernels", "format", "tokenizer", "model", "generate"},
    "plan": {"util", "proto", "kernels", "format", "model", "plan"},
    "transport": {"util", "proto", "transport"},
    "transport_mpi": {"util", "proto", "transport", "transport_mpi"},
    "engine": {"util", "proto", "kernels", "format", "tokenizer", "model", "generate", "plan",
               "transport", "engine"},
    "convert": {"util", "kernels", "format", "tokenizer", "model", "convert"},
    "sim": {"util", "proto", "kernels", "format", "model", "plan", "sim"},
    "app": set(LAYERS),
}

# Folders whose files may include and call anything (still checked for MPI and for unknown
# headers).
FREE_DIRS = ("tools", "tests", "fuzz", "bench")

# Files that must not reach <hdf5.h>: by layer (sources and headers), and headers by layer.
HDF5_FREE_LAYERS = {"plan", "proto"}
HDF5_FREE_HEADER_LAYERS = {"sim"}

# Headers the build generates (not in the tree): scripts/gitrev.cmake's.
GENERATED_HEADERS = {"gitrev.h"}

# The one file that includes <mpi.h>.
MPI_FILE = "src/transport/mpi.c"

C_EXT = (".c", ".h")
SCAN_DIRS = ("src", "include") + FREE_DIRS
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
MPI_RE = re.compile(r"\b(P?MPI_[A-Za-z0-9_]+)")
# A function definition at file scope in this code's style: the name and its parameters at
# the start of a line or after the return type, then the body's brace.
DEF_RE = re.compile(r"^([A-Za-z_][\w \t\*]*?[\s\*])([A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^)]*\)"
                    r"[^;{}()]*)*)\)\s*\{", re.M)
CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# What stands before a name in a declaration or definition (types and stars), not a call.
DECL_PREFIX_RE = re.compile(r"^\s*(?!(?:return|else|case|goto|do|sizeof)\b)"
                            r"(?:[A-Za-z_]\w*[\s\*]+)+$")

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


def strip_preprocessor(text):
    """Blanks preprocessor lines (with their continuations), keeping newlines."""
    out, cont = [], False
    for line in text.split("\n"):
        directive = cont or line.lstrip().startswith("#")
        cont = directive and line.endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


class Checker:
    def __init__(self, root):
        self.root = root
        self.errors = []
        self.includes = {}   # rel path -> [(line, kind, name)]
        self.headers = {}    # basename -> [rel path of a public header]
        self.defined = {}    # function name -> (rel path of its definition, layer)
        self.bare = {}       # rel path -> code without comments, strings, preprocessor lines

    def error(self, rel, line, rule, msg):
        text = f"{rel}:{line}: [{rule}] {msg}"
        if text not in self.errors:
            self.errors.append(text)

    def files(self):
        for top in SCAN_DIRS:
            base = os.path.join(self.root, top)
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames
                                     if not d.startswith(".") and d != "node_modules")
                for f in sorted(filenames):
                    if f.endswith(C_EXT):
                        full = os.path.join(dirpath, f)
                        yield os.path.relpath(full, self.root).replace(os.sep, "/")

    def layer_of_file(self, rel):
        """The layer of a file, "free" for tools/tests/fuzz/bench, None if it has none."""
        parts = rel.split("/")
        if parts[0] in FREE_DIRS:
            return "free"
        if rel == MPI_FILE:
            return "transport_mpi"
        if parts[0] in ("include", "src") and len(parts) == 3 and parts[1] in MAY_INCLUDE:
            return parts[1]
        return None

    def resolve(self, rel, kind, name):
        """The project file a #include names, or None: a file beside the includer (or
        reached by a relative path from it), else a public header by its name."""
        here = os.path.dirname(rel)
        local = os.path.normpath(os.path.join(here, name)).replace(os.sep, "/")
        if kind == '"' and os.path.isfile(os.path.join(self.root, local)):
            return local
        found = self.headers.get(os.path.basename(name), [])
        if len(found) == 1 and ("/" not in name or found[0].endswith("/" + name)):
            return found[0]
        return None

    def index_headers(self, files):
        for rel in files:
            parts = rel.split("/")
            if parts[0] != "include":
                continue
            if len(parts) != 3 or parts[1] not in MAY_INCLUDE:
                self.error(rel, 1, "table", "a public header belongs in a layer folder, "
                           "include/LAYER/ with LAYER one of " + ", ".join(LAYERS))
                continue
            self.headers.setdefault(parts[2], []).append(rel)
        for name, paths in sorted(self.headers.items()):
            if len(paths) > 1:
                for p in paths:
                    self.error(p, 1, "table", f"{name} is the name of {len(paths)} headers "
                               f"({', '.join(paths)}): one name per header")

    def read(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        code = strip_comments(text, keep_strings=True)
        bare = strip_comments(text, keep_strings=False)
        incs = []
        for no, line in enumerate(code.split("\n"), 1):
            m = INCLUDE_RE.match(line)
            if m:
                incs.append((no, m.group(1), m.group(2)))
        self.includes[rel] = incs
        self.bare[rel] = bare
        layer = self.layer_of_file(rel)
        if rel.endswith(".c") and layer not in (None, "free"):
            for m in DEF_RE.finditer(strip_preprocessor(bare)):
                prefix, name = m.group(1), m.group(2)
                if re.search(r"\bstatic\b", prefix) or name in ("if", "for", "while",
                                                                  "switch", "return"):
                    continue
                self.defined.setdefault(name, (rel, layer))

    def check_file(self, rel):
        layer = self.layer_of_file(rel)
        if rel.startswith("src/") and layer is None:
            self.error(rel, 1, "table", f"folder src/{rel.split('/')[1]} has no layer: add it "
                       "to MAY_INCLUDE in scripts/check_layering.py")
        bare = self.bare[rel]
        if rel != MPI_FILE:
            for no, line in enumerate(bare.split("\n"), 1):
                if INCLUDE_RE.match(line):
                    continue
                for sym in sorted(set(MPI_RE.findall(line))):
                    self.error(rel, no, "mpi", f"names {sym}: MPI belongs in {MPI_FILE} only")
        for no, kind, name in self.includes[rel]:
            if os.path.basename(name) == "mpi.h" and rel != MPI_FILE:
                close = ">" if kind == "<" else '"'
                self.error(rel, no, "mpi", f"includes {kind}{name}{close}: <mpi.h> belongs in "
                           f"{MPI_FILE} only")
                continue
            target = self.resolve(rel, kind, name)
            if target is None:
                if kind == '"' and name not in GENERATED_HEADERS:
                    self.error(rel, no, "table", f'includes "{name}", which is not a header of '
                               "the project (public headers live in include/LAYER/)")
                continue
            target_layer = self.layer_of_file(target)
            if layer in (None, "free") or target_layer in (None, "free"):
                continue
            if target_layer not in MAY_INCLUDE[layer]:
                allowed = ", ".join(l for l in LAYERS if l in MAY_INCLUDE[layer])
                self.error(rel, no, "include", f"includes {kind}{name}{'>' if kind == '<' else ''}"
                           f"{'' if kind == '<' else chr(34)} ({target_layer} layer) from the "
                           f"{layer} layer, which may include only {allowed}")
        if layer not in (None, "free") and layer != "app":
            code = strip_preprocessor(bare)
            for no, line in enumerate(code.split("\n"), 1):
                for m in CALL_RE.finditer(line):
                    name = m.group(1)
                    if DECL_PREFIX_RE.match(line[:m.start()]):
                        continue  # a declaration or definition, not a call
                    d = self.defined.get(name)
                    if d and d[1] not in MAY_INCLUDE[layer] and d[0] != rel:
                        self.error(rel, no, "call", f"calls {name} (defined in {d[0]}, "
                                   f"{d[1]} layer) from the {layer} layer")

    def reaches(self, start, system_header):
        """The chain of includes from start to <system_header>, or None."""
        seen, stack = set(), [(start, [start])]
        while stack:
            rel, chain = stack.pop()
            if rel in seen:
                continue
            seen.add(rel)
            for no, kind, name in self.includes.get(rel, []):
                if kind == "<" and name == system_header:
                    return chain, no
                target = self.resolve(rel, kind, name)
                if target and target in self.includes:
                    stack.append((target, chain + [target]))
        return None

    def direct(self, rel, system_header):
        return any(k == "<" and n == system_header for _, k, n in self.includes.get(rel, []))

    def reach_fault(self, rel, system_header, subject):
        """Where rel is the file to blame for reaching <system_header>: it includes it
        itself, or includes a header that does and is not itself subject to the rule, or
        one that is subject and includes it directly (a file further out, which reaches it
        only through such a header, is not blamed again).  Returns (line, chain) or None."""
        for no, kind, name in self.includes.get(rel, []):
            if kind == "<" and name == system_header:
                return no, [rel]
        for no, kind, name in self.includes.get(rel, []):
            target = self.resolve(rel, kind, name)
            if not target or target not in self.includes:
                continue
            hit = self.reaches(target, system_header)
            if hit and (not subject(target) or self.direct(target, system_header)):
                return no, [rel] + hit[0]
        return None

    def check_reach(self, rel):
        def mpi_subject(f):
            return f != MPI_FILE

        def hdf5_subject(f):
            layer = self.layer_of_file(f)
            return layer in HDF5_FREE_LAYERS or (f.endswith(".h") and
                                                  layer in HDF5_FREE_HEADER_LAYERS)
        if mpi_subject(rel):
            hit = self.reach_fault(rel, "mpi.h", mpi_subject)
            if hit and len(hit[1]) > 1:
                no, chain = hit
                self.error(rel, no, "mpi", "reaches <mpi.h> through " + " -> ".join(chain[1:]) +
                           f": <mpi.h> belongs in {MPI_FILE} only")
        if hdf5_subject(rel):
            hit = self.reach_fault(rel, "hdf5.h", hdf5_subject)
            if hit:
                no, chain = hit
                via = " through " + " -> ".join(chain[1:]) if len(chain) > 1 else ""
                self.error(rel, no, "hdf5", f"reaches <hdf5.h>{via}: the "
                           f"{self.layer_of_file(rel)} layer stays HDF5-free")

    def run(self):
        files = list(self.files())
        self.index_headers(files)
        for rel in files:
            self.read(rel)
        for rel in files:
            self.check_file(rel)
            self.check_reach(rel)
        return self.errors


def check(root, quiet=False):
    c = Checker(root)
    errors = c.run()
    if not quiet:
        for e in errors:
            print(e, file=sys.stderr)
        print(f"check-layering: {len(c.includes)} files, {len(c.defined)} functions, "
              f"{len(errors)} violation(s)", file=sys.stderr)
    return errors


# Planted violations for --self-test: (what, file to create or append to, text, the file and
# rule of the one error expected, the layer whose build must refuse it or None).  Each is
# planted alone in a fresh copy of the tree.  The first five are the ones a check that
# skipped angle brackets, followed no includes and read no .c file let through.
PLANTS = [
    ("angle-bracket include of a higher layer", "src/kernels/zz_plant.c",
     '#include "kernels.h"\n#include <plan.h>\n', ("src/kernels/zz_plant.c:2", "include"),
     "kernels"),
    ("<mpi.h> reached through a header", "include/transport/transport.h",
     '\n#include "zz_mpi.h"\n', ("include/transport/transport.h", "mpi"), None),
    ("<hdf5.h> in a planner source", "src/plan/zz_plant.c",
     '#include "plan.h"\n#include <hdf5.h>\n', ("src/plan/zz_plant.c:2", "hdf5"), None),
    ("a call through a local prototype", "src/kernels/zz_plant.c",
     'void transport_barrier(void *t);\nvoid zz(void);\nvoid zz(void) '
     '{ transport_barrier(0); }\n', ("src/kernels/zz_plant.c:3", "call"), None),
    ("the engine including the MPI base", "src/engine/zz_plant.c",
     '#include "dist.h"\n#include "transport_mpi.h"\n', ("src/engine/zz_plant.c:2", "include"),
     "engine"),
    ("MPI call in the planner", "src/plan/zz_plant.c",
     '#include "plan.h"\nvoid zz(void) { MPI_Barrier(0); }\n', ("src/plan/zz_plant.c:2", "mpi"),
     None),
    ("<mpi.h> in the model", "src/model/zz_plant.c",
     "/* MPI_Send in a comment is fine */\n#include <mpi.h>\n", ("src/model/zz_plant.c:2", "mpi"),
     "model"),
    ("MPI type in a kernels header", "include/kernels/kernels.h",
     "\ntypedef MPI_Comm ZzComm;\n", ("include/kernels/kernels.h", "mpi"), None),
    ("kernels including the planner", "src/kernels/zz_plant.c",
     '#include "kernels.h"\n#include "plan.h"\n', ("src/kernels/zz_plant.c:2", "include"),
     "kernels"),
    ("the transport including the planner", "src/transport/zz_plant.c",
     '#include "transport.h"\n#include "plan.h"\n', ("src/transport/zz_plant.c:2", "include"),
     "transport"),
    ("simulator including the engine", "src/sim/zz_plant.c",
     '#include "sim.h"\n#include "dist.h"\n', ("src/sim/zz_plant.c:2", "include"), None),
    ("convert including the transport", "src/convert/zz_plant.c",
     '#include "transport.h"\n', ("src/convert/zz_plant.c:1", "include"), "convert"),
    ("planner header including the transport", "include/plan/plan.h",
     '\n#include "transport.h"\n', ("include/plan/plan.h", "include"), None),
    ("header outside a layer folder", "include/zz_unlisted.h",
     "#include <stddef.h>\n", ("include/zz_unlisted.h:1", "table"), None),
    ("include of an unknown header", "src/util/zz_plant.c",
     '#include "zz_nowhere.h"\n', ("src/util/zz_plant.c:1", "table"), None),
    ("HDF5 pulled into a simulator header", "include/sim/sim.h",
     '\n#include "h5io.h"\n', ("include/sim/sim.h", "hdf5"), None),
]

# Files planted beside a plant (not themselves violations).
HELPERS = {"include/transport/zz_mpi.h": "#include <mpi.h>\n"}

# A right-way include for each layer whose build is tried: must compile with the same flags.
RIGHT_WAY = {
    "kernels": '#include "kernels.h"\n#include "util.h"\n',
    "model": '#include "model.h"\n',
    "transport": '#include "transport.h"\n#include "wire.h"\n',
    "engine": '#include "dist.h"\n#include "transport.h"\n',
    "convert": '#include "convert.h"\n',
}


def compiles(cc, flags, text):
    with tempfile.TemporaryDirectory(prefix="check-layering-cc.") as tmp:
        src = os.path.join(tmp, "zz_plant.c")
        with open(src, "w", encoding="utf-8") as f:
            f.write(text + "int zz_plant_unit(void);\nint zz_plant_unit(void) { return 0; }\n")
        r = subprocess.run([cc, "-std=c11", "-fsyntax-only", "-D_POSIX_C_SOURCE=200809L"] +
                           flags.split() + [src], capture_output=True, text=True)
        return r.returncode == 0, r.stderr


def self_test(cc, flags):
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    failures = checks = 0
    with tempfile.TemporaryDirectory(prefix="check-layering.") as tmp:
        base = os.path.join(tmp, "base")
        for top in SCAN_DIRS:
            src = os.path.join(repo, top)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(base, top),
                                ignore=lambda d, names: [n for n in names if n == "node_modules"
                                                         or (os.path.isfile(os.path.join(d, n))
                                                             and not n.endswith(C_EXT))])
        checks += 1
        clean = check(base, quiet=True)
        if clean:
            print("self-test: FAIL: the unmodified tree is not clean:", *clean, sep="\n  ",
                  file=sys.stderr)
            failures += 1
        else:
            print("self-test: ok: the unmodified tree passes", file=sys.stderr)
        for i, (what, rel, text, expect, build_layer) in enumerate(PLANTS):
            tree = os.path.join(tmp, f"t{i}")
            shutil.copytree(base, tree)
            for hrel, htext in HELPERS.items():
                os.makedirs(os.path.dirname(os.path.join(tree, hrel)), exist_ok=True)
                with open(os.path.join(tree, hrel), "w", encoding="utf-8") as f:
                    f.write(htext)
            path = os.path.join(tree, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
            errors = [e for e in check(tree, quiet=True)
                      if not any(e.startswith(h + ":") for h in HELPERS)]
            where, rule = expect
            hit = [e for e in errors if e.startswith(where + ":") and f": [{rule}] " in e]
            checks += 1
            if hit and len(errors) == len(hit):
                print(f"self-test: ok: {what}: {hit[0]}", file=sys.stderr)
            else:
                print(f"self-test: FAIL: {what}: expected a [{rule}] error in {where} and no "
                      f"other, got {errors!r}", file=sys.stderr)
                failures += 1
            if build_layer and build_layer in flags:
                checks += 2
                ok, err = compiles(cc, flags[build_layer], text)
                if ok:
                    print(f"self-test: FAIL: {what}: compiles with the {build_layer} "
                          "library's include flags", file=sys.stderr)
                    failures += 1
                else:
                    first = next((l for l in err.splitlines() if "error" in l), err.strip())
                    print(f"self-test: ok: {what}: the {build_layer} build refuses it "
                          f"({first.split('error:')[-1].strip()})", file=sys.stderr)
                ok, err = compiles(cc, flags[build_layer], RIGHT_WAY[build_layer])
                if not ok:
                    print(f"self-test: FAIL: a right-way include does not compile with the "
                          f"{build_layer} library's flags:\n{err}", file=sys.stderr)
                    failures += 1
        # The command-line entry point fails on a violation as well.
        checks += 1
        tree = os.path.join(tmp, "t5")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", tree],
                           capture_output=True, text=True)
        if r.returncode != 1 or "[mpi]" not in r.stderr:
            print(f"self-test: FAIL: --root on a bad tree exited {r.returncode}", file=sys.stderr)
            failures += 1
    missing = sorted({p[4] for p in PLANTS if p[4]} - set(flags))
    if missing and flags:
        print(f"self-test: FAIL: no --flags for {', '.join(missing)}", file=sys.stderr)
        failures += 1
    if not flags:
        print("self-test: note: no --flags-LAYER given, so no planted include was compiled "
              "(ctest passes them)", file=sys.stderr)
    print(f"self-test: {checks - failures} of {checks} checks passed", file=sys.stderr)
    return 1 if failures else 0


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = argv[1:]
    if args in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if args and args[0] == "--self-test":
        cc, flags, rest = os.environ.get("CC", "cc"), {}, args[1:]
        while rest:
            if len(rest) < 2:
                print(f"check-layering: {rest[0]} needs a value", file=sys.stderr)
                return 2
            opt, val, rest = rest[0], rest[1], rest[2:]
            if opt == "--cc":
                cc = val
            elif opt.startswith("--flags-") and opt[8:] in MAY_INCLUDE:
                # CMake's $<TARGET_PROPERTY:...,INCLUDE_DIRECTORIES>, joined by ':'
                flags[opt[8:]] = " ".join("-I" + d for d in re.split(r"[:;]", val) if d)
            else:
                print(f"check-layering: unknown option {opt}", file=sys.stderr)
                return 2
        return self_test(cc, flags)
    if len(args) == 2 and args[0] == "--root":
        root = args[1]
    elif args:
        print("usage: check-layering.sh [--root DIR | --self-test [--cc CC] "
              "[--flags-LAYER DIRS]...]", file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"check-layering: {root}: no src/ folder", file=sys.stderr)
        return 2
    return 1 if check(root) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
