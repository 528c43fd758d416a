#!/usr/bin/env python3
"""The house in numbers (issue 28): per crate, its modules, the public ones, the import cycles
between its modules, its error types and its lines; and the catch-all error conversions and
`use super::*` outside tests. `--check` fails when a cycle, a catch-all conversion, a glob
import of a parent module outside tests, or a file written other than through code-intel-files
(outside the writers named in RAW_WRITERS) is found, so none can come back unseen.

Usage: scripts/house.py [ROOT] [--check]     (ROOT: a checkout; default this one)
"""

import pathlib
import re
import sys

USE_PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)
ERROR_TYPE = re.compile(r"#\[derive\([^)]*thiserror::Error[^)]*\)\]\s*(?:#\[[^\]]*\]\s*)*pub(?:\([a-z]+\))?\s+(?:enum|struct)\s+(\w+)")
CATCH_ALL = re.compile(r"impl\s+From<(?:String|&(?:'static\s+)?str)>\s+for\s+\w*Error")
RAW_WRITE = re.compile(r"\bstd::fs::write\(|\bFile::create\(")
# Writers that may not go through code-intel-files, and why.
RAW_WRITERS = {
    # The one writer itself.
    "crates/files/src/lib.rs",
    # A derived directory's .gitignore is written in .git and renamed across, so git status
    # never sees it half-written; the writer's temporary files are beside their target.
    "crates/codebase/src/derived.rs",
}
TEXT_ERROR = re.compile(r"\.map_err\(\|[^|]*\|[^\n]*(?:to_string\(\)|format!)")
# `#[cfg(test)]`, or `#[cfg(all(test, …))]` for tests of one platform.
TEST_MOD = re.compile(r"#\[cfg\((?:all\(\s*)?test\b[^\]]*\]\s*mod\s+\w+\s*\{", re.S)


def crates(root):
    """(name, src dir) of every crate: the binary at the root and each under crates/."""
    found = [("git-code-intel", root / "src")]
    for manifest in sorted((root / "crates").glob("*/Cargo.toml")):
        name = re.search(r'^name\s*=\s*"([^"]+)"', manifest.read_text(), re.M).group(1)
        found.append((name, manifest.parent / "src"))
    return found


def module_of(src, path):
    """The module path of a source file: src/a/b.rs and src/a/b/mod.rs are ("a", "b")."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def without_tests(text):
    """The text with its `#[cfg(test)] mod … { … }` blocks cut out (brace-matched)."""
    out, at = [], 0
    for match in TEST_MOD.finditer(text):
        if match.start() < at:
            continue
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[at : match.start()])
        at = i
    out.append(text[at:])
    return "".join(out)


def targets(module, text, modules):
    """The modules of this crate a module's code names (crate::… and super::… paths; a doc
    link in a comment is no import)."""
    text = re.sub(r"//[^\n]*", "", text)
    paths = []
    for match in USE_GROUP.finditer(text):
        for item in re.split(r"[,\s]+", match.group(3)):
            item = item.split("::")[0].strip("{} ")
            if item:
                paths.append((match.group(1), match.group(2) + "::" + item))
    paths += [(m.group(1), m.group(2)) for m in USE_PATH.finditer(text)]
    named = set()
    for anchor, rest in paths:
        segments = [s for s in rest.split("::") if s]
        base = () if anchor == "crate" else module[:-1]
        while segments and segments[0] == "super":
            segments.pop(0)
            base = base[:-1]
        full = base + tuple(segments)
        # The longest prefix that is a module of this crate.
        for end in range(len(full), 0, -1):
            if full[:end] in modules:
                named.add(full[:end])
                break
    return named


def related(a, b):
    """One module is the other or contains it: a parent naming its children is no cycle."""
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted("::".join(m) or "crate" for m in component))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def measure(root, name, src):
    files = sorted(src.rglob("*.rs"))
    modules = {module_of(src, f): f for f in files}
    texts = {m: f.read_text() for m, f in modules.items()}
    graph = {}
    for module, text in texts.items():
        code = without_tests(text)
        graph[module] = {t for t in targets(module, code, modules) if not related(module, t)}
    public = sum(len(re.findall(r"^\s*pub mod \w+;", t, re.M)) for t in texts.values())
    private = sum(len(re.findall(r"^\s*(?:pub\(crate\)\s+)?mod \w+;", t, re.M)) for t in texts.values())
    errors = sorted({e for t in texts.values() for e in ERROR_TYPE.findall(t)})
    catch_all = [str(modules[m].relative_to(src.parent)) for m, t in texts.items() if CATCH_ALL.search(t)]
    raw_writes = [
        rel
        for m, t in texts.items()
        for rel in [str(modules[m].relative_to(root))]
        # A file of tests only (`mod overlay_tests;` under `#[cfg(test)]`) writes as it likes.
        if not rel.endswith("tests.rs") and rel not in RAW_WRITERS and RAW_WRITE.search(without_tests(t))
    ]
    globs = [
        str(modules[m].relative_to(src.parent))
        for m, t in texts.items()
        if re.search(r"^\s*use super::\*;", without_tests(t), re.M)
    ]
    # Errors turned into text where they are caught: their cause is lost to `source()`.
    to_string = sum(len(TEXT_ERROR.findall(t)) for t in texts.values())
    lines = sum(t.count("\n") for t in texts.values())
    return {
        "crate": name,
        "modules": len(files),
        "pub mod": public,
        "private mod": private,
        "cycles": cycles(graph),
        "error types": errors,
        "catch-all From<String>": catch_all,
        "use super::* outside tests": globs,
        "writes outside code-intel-files": raw_writes,
        "errors as text": to_string,
        "lines": lines,
    }


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    reports = [measure(root, name, src) for name, src in crates(root)]
    bad = False
    print(f"{len(reports)} crates")
    for r in reports:
        print(
            f"{r['crate']}: {r['modules']} modules ({r['pub mod']} pub mod, {r['private mod']} private), "
            f"{r['lines']} lines, {len(r['error types'])} error types {r['error types']}, "
            f"{r['errors as text']} errors caught as text"
        )
        for cycle in r["cycles"]:
            print(f"  cycle: {' <-> '.join(cycle)}")
        for path in r["catch-all From<String>"]:
            print(f"  catch-all string conversion into an error: {path}")
        for path in r["use super::* outside tests"]:
            print(f"  use super::* outside tests: {path}")
        for path in r["writes outside code-intel-files"]:
            print(f"  a file written outside code-intel-files (std::fs::write, File::create): {path}")
        bad |= bool(
            r["cycles"]
            or r["catch-all From<String>"]
            or r["use super::* outside tests"]
            or r["writes outside code-intel-files"]
        )
    if "--check" in sys.argv and bad:
        print(
            "house: import cycles, catch-all error conversions, glob imports of a parent or files written "
            "outside code-intel-files (above)",
            file=sys.stderr,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
