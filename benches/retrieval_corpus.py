"""Builds a CodeSearchNet-style retrieval set from CPython's standard library (issue 26).

For every top-level function and every method of a top-level class in the named modules, the
query is the first sentence of its docstring; the indexed copy has every function docstring
removed (CodeSearchNet's protocol), so a query can only be answered from the code itself.

    python3 retrieval_corpus.py OUT_DIR QUERIES_JSON SEED COUNT MODULE...

MODULE is a path relative to the standard library (`json`, `http/server.py`). Writes the
stripped copies under OUT_DIR (same relative paths) and a JSON list of
{query, file, name, start_line, end_line}, lines 1-based in the stripped copy. COUNT queries
are drawn with SEED (a blake3-free, stable order: sha256 of seed, file and line). Prints the
Python version and the counts on stderr.
"""

import ast
import hashlib
import json
import os
import re
import sys
import sysconfig

MIN_WORDS = 3
MAX_WORDS = 40


def first_sentence(doc):
    """The docstring's first sentence, on one line: its first paragraph up to the first full
    stop that ends a sentence."""
    paragraph = doc.strip().split("\n\n")[0]
    text = " ".join(paragraph.split())
    match = re.search(r"(?<=[a-z0-9)\]`'\"])\.(\s|$)", text)
    if match:
        text = text[: match.start() + 1]
    return text.strip()


def targets(tree):
    """(qualified name, node) for top-level functions and methods of top-level classes, in
    source order."""
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((f"{node.name}.{item.name}", item))
    return out


def docstring_node(node):
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            return body[0]
    return None


def strip(source):
    """The source without any function's docstring (a body that was only its docstring gets
    `pass`), and the docstrings of the targets by their index in `targets`."""
    tree = ast.parse(source)
    # Lines as ast counts them (only \n ends one here; str.splitlines also splits on \f and
    # other separators, which would shift every later removal).
    lines = re.findall(r"[^\n]*\n|[^\n]+$", source)
    docs = {}
    for index, (_, node) in enumerate(targets(tree)):
        doc = docstring_node(node)
        if doc is not None:
            docs[index] = doc.value.value
    removals = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = docstring_node(node)
            if doc is None:
                continue
            only = len(node.body) == 1
            removals.append((doc.lineno, doc.end_lineno, doc.col_offset, only))
    for start, end, col, only in sorted(removals, reverse=True):
        # A docstring that shares its line with the def (`def f(): "doc"`) is left alone.
        if lines[start - 1][:col].strip():
            continue
        replacement = [lines[start - 1][:col] + "pass\n"] if only else []
        lines[start - 1 : end] = replacement
    return "".join(lines), docs


def main():
    out_dir, queries_path, seed, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    stdlib = sysconfig.get_paths()["stdlib"]
    files = []
    for module in sys.argv[5:]:
        path = os.path.join(stdlib, module)
        if not os.path.exists(path) and path.endswith(".py") and os.path.isdir(path[:-3]):
            path = path[:-3]  # a module that became a package (zipfile in 3.12, pathlib in 3.13)
        if not os.path.exists(path):
            print(f"{module}: not in this Python's standard library, skipped", file=sys.stderr)
            continue
        if os.path.isdir(path):
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if d not in ("test", "tests", "__pycache__"))
                files.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
        else:
            files.append(path)
    candidates = []
    seen_queries = set()
    for path in files:
        rel = os.path.relpath(path, stdlib)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        stripped, docs = strip(source)
        dest = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w", encoding="utf-8") as f:
            f.write(stripped)
        new_targets = targets(ast.parse(stripped))
        for index, doc in docs.items():
            name, node = new_targets[index]
            short = name.rsplit(".", 1)[-1]
            if short.startswith("test") or node.end_lineno - node.lineno < 2:
                continue
            query = first_sentence(doc)
            words = query.split()
            if not (MIN_WORDS <= len(words) <= MAX_WORDS) or query in seen_queries:
                continue
            seen_queries.add(query)
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            candidates.append(
                {"query": query, "file": rel, "name": name, "start_line": start, "end_line": node.end_lineno}
            )
    order = lambda c: hashlib.sha256(f"{seed}:{c['file']}:{c['start_line']}".encode()).hexdigest()
    chosen = sorted(candidates, key=order)[:count]
    chosen.sort(key=lambda c: (c["file"], c["start_line"]))
    with open(queries_path, "w", encoding="utf-8") as f:
        json.dump(chosen, f, indent=1)
    print(
        f"python {sys.version.split()[0]}: {len(files)} files, {len(candidates)} documented functions, "
        f"{len(chosen)} queries",
        file=sys.stderr,
    )


main()
