#!/usr/bin/env python3
"""Fails when the files of one crate import each other in a cycle.

Reads every `.rs` file under each crate's source root, resolves each `crate::`, `super::` and
`self::` path it names (in `use` items and in expressions) to the file of the deepest module
that exists (following `pub use` re-exports to the file that defines the item), and looks for
strongly connected components in that file graph. Declaring a child module (`mod x;`) is not an
import, and neither is a child using its ancestors' items (nesting, which Rust grants a child);
a parent's `pub use child::X` is. Test code counts too: a test that imports upward is an edge.

    tools/import_cycles.py                # every crate of the workspace
    tools/import_cycles.py --root DIR     # one source root (e.g. a planted cycle in a temp dir)
    tools/import_cycles.py --modules      # print the graph of top-level modules per crate
    tools/import_cycles.py --self-test    # plants cycles in a temp crate: each must be found

Exit status 1 and each cycle's files when there is one; 0 otherwise.
"""
import argparse
import os
import re
import sys

# `crate::`, `super::`, `self::` and (2018 uniform paths) a child module's own name.
PATH_RE = re.compile(r"(?<![\w:])([a-z_][A-Za-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_RE = re.compile(r"\buse\s+([a-z_][^;]*);", re.S)
# Comments, strings and char literals, left to right, so a quote in one cannot open another.
LEXEME_RE = re.compile(
    r"//[^\n]*|/\*.*?\*/|b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.|[^'\\\n])'", re.S
)


def module_of(root, path):
    """The module path (list of names) of a file under a source root."""
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def scan_files(root):
    files = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            # A main.rs beside a lib.rs is another crate (the binary), which names the library
            # by its crate name, not `crate::`.
            if n.endswith(".rs") and not (n == "main.rs" and "lib.rs" in names):
                p = os.path.join(dirpath, n)
                files[module_of(root, p)] = p
    return files


def strip(text):
    return LEXEME_RE.sub(lambda m: '""' if m.group(0)[:1] in "rb\"'" else " ", text)


def expand_use(tree):
    """`crate::a::{b, c::{d, e}}` -> ['crate::a::b', 'crate::a::c::d', ...]."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        i = s.find("{")
        if i < 0:
            out.append(prefix + s)
            return
        head, body = s[:i], s[i + 1 : s.rfind("}")]
        depth, part, parts = 0, "", []
        for ch in body:
            if ch == "," and depth == 0:
                parts.append(part)
                part = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            part += ch
        parts.append(part)
        for p in parts:
            if p:
                walk(prefix + head, p)

    walk("", tree)
    return out


def resolve(files, here, path):
    """The file a path names: its deepest prefix that is a module of this crate."""
    parts = path.split("::")
    if parts[0] not in ("crate", "self", "super"):
        if tuple(here) + (parts[0],) not in files:
            return None  # another crate, or a name that is not a module
        parts = ["self"] + parts
    if parts[0] == "crate":
        base, parts = (), parts[1:]
    else:
        base = here
        if parts[0] == "self":
            parts = parts[1:]
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
    mod = tuple(base) + tuple(p for p in parts if p not in ("self", "*"))
    while mod not in files and mod:
        mod = mod[:-1]
    return mod if mod in files else None


def defines(text, name):
    return re.search(
        r"\b(?:struct|enum|fn|trait|type|const|static|union|mod)\s+" + re.escape(name) + r"\b|macro_rules!\s*"
        + re.escape(name) + r"\b",
        text,
    )


def reexports(text):
    """`pub use` items of a file: {exported name: full path}, and the glob paths."""
    named, globs = {}, []
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", text, re.S):
        for p in expand_use(m.group(1)):
            if p.endswith("::*"):
                globs.append(p[:-3])
                continue
            alias = re.match(r"(.*)\bas\b(\w+)$", p)
            path, name = (alias.group(1), alias.group(2)) if alias else (p, p.split("::")[-1])
            named[name] = path
    return named, globs


class Crate:
    def __init__(self, files):
        self.files = files
        self.text = {}
        for mod, path in files.items():
            with open(path, encoding="utf-8") as f:
                self.text[mod] = strip(f.read())
        self.exports = {mod: reexports(t) for mod, t in self.text.items()}

    def target(self, here, path, depth=0):
        """The file that defines what `path` names, following `pub use` re-exports."""
        mod = resolve(self.files, here, path)
        if mod is None:
            return None
        parts = [p for p in path.split("::") if p not in ("crate", "self", "super", "*")]
        name = parts[-1] if parts else None
        if depth > 8 or name is None or name == (mod[-1] if mod else None):
            return mod
        if defines(self.text[mod], name):
            return mod
        named, globs = self.exports[mod]
        if name in named:
            return self.target(mod, named[name], depth + 1) or mod
        for g in globs:
            t = self.target(mod, g + "::" + name, depth + 1)
            if t is not None and t != mod and defines(self.text[t], name):
                return t
        return mod


def edges_of(files):
    crate = Crate(files)
    graph = {m: set() for m in files}
    for mod, text in crate.text.items():
        found = []
        for m in USE_RE.finditer(text):
            found += expand_use(m.group(1))
        for m in PATH_RE.finditer(USE_RE.sub("", text)):
            found.append(m.group(1) + m.group(2))
        for p in found:
            p = re.sub(r"\bas\b\w+$", "", p)
            target = crate.target(mod, p)
            # A child seeing its ancestors' items is nesting, not layering: Rust gives a child
            # module its parents' private items for exactly that. Every other edge counts.
            if target is not None and target != mod[: len(target)]:
                graph[mod].add(target)
    return graph


def sccs(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def crate_roots(repo):
    roots = []
    for dirpath, dirnames, names in os.walk(repo):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "node_modules", ".venv")]
        if "Cargo.toml" in names:
            with open(os.path.join(dirpath, "Cargo.toml"), encoding="utf-8") as f:
                toml = f.read()
            for m in re.finditer(r'^\s*path\s*=\s*"([^"]+\.rs)"', toml, re.M):
                src = os.path.dirname(os.path.join(dirpath, m.group(1)))
                roots.append(os.path.normpath(src))
            if os.path.isdir(os.path.join(dirpath, "src")):
                roots.append(os.path.normpath(os.path.join(dirpath, "src")))
    # A directory named by several targets (a package's lib and bin) is one source root.
    return sorted(set(roots))


def show(files, mod):
    return os.path.relpath(files[mod])


# Planted layouts: (files, whether a cycle must be reported).
SELF_TESTS = [
    ({"lib.rs": "mod a; mod b;", "a.rs": "use crate::b::B; pub struct A;", "b.rs": "use crate::a::A; pub struct B;"}, True),
    ({"lib.rs": "mod a; mod b;", "a.rs": "pub struct A; fn f() { crate::b::g(); }", "b.rs": "pub fn g() {}"}, False),
    # Through a parent's re-export: a -> (m re-exports b's B) -> b -> a.
    ({"lib.rs": "mod m; mod a;", "m/mod.rs": "mod b; pub use b::B;", "m/b.rs": "use crate::a::A; pub struct B;",
      "a.rs": "use crate::m::B; pub struct A;"}, True),
    # A child using its parent's items is nesting, not a cycle.
    ({"lib.rs": "mod m;", "m/mod.rs": "mod c; pub use c::C; pub struct P;", "m/c.rs": "use super::P; pub struct C;"}, False),
    # A 2018 child path in an expression, and a `use` with a group.
    ({"lib.rs": "mod a; mod b;", "a.rs": "use crate::{b::{self, B}};", "b.rs": "pub struct B; fn f() { let _ = crate::a::x(); }"}, True),
    # Names in comments and strings are not imports.
    ({"lib.rs": "mod a; mod b;", "a.rs": "// crate::b::B\nconst S: &str = \"crate::b::B\";", "b.rs": "use crate::a::S;"}, False),
]


def self_test():
    import tempfile

    failed = 0
    for i, (files, cyclic) in enumerate(SELF_TESTS):
        with tempfile.TemporaryDirectory() as root:
            for name, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
                with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                    f.write(text)
            found = bool(sccs(edges_of(scan_files(root))))
        if found != cyclic:
            failed += 1
            print(f"self-test {i}: expected {'a cycle' if cyclic else 'no cycle'}, found {'one' if found else 'none'}")
    print(f"self-test: {len(SELF_TESTS) - failed}/{len(SELF_TESTS)} planted layouts judged right")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", action="append", help="a crate's source root (default: every crate)")
    ap.add_argument("--modules", action="store_true", help="print each crate's top-level module graph")
    ap.add_argument("--self-test", action="store_true", help="check the checker on planted cycles")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    repo = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    roots = args.root or crate_roots(repo)
    bad = 0
    for root in roots:
        files = scan_files(root)
        if not files:
            continue
        graph = edges_of(files)
        if args.modules:
            top = {}
            for a, bs in graph.items():
                for b in bs:
                    if a[:1] != b[:1] and a and b:
                        top.setdefault(a[0], set()).add(b[0])
            print(f"{os.path.relpath(root, repo)}:")
            for a in sorted(top):
                print(f"  {a} -> {', '.join(sorted(top[a]))}")
        for comp in sccs(graph):
            bad += 1
            print(f"import cycle in {os.path.relpath(root, repo)} through {len(comp)} files:")
            for m in comp:
                inside = sorted(show(files, t) for t in graph[m] if t in comp)
                print(f"  {show(files, m)} -> {', '.join(inside)}")
    if bad:
        print(f"{bad} import cycle(s)")
        return 1
    print(f"no import cycles in {len(roots)} source roots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
