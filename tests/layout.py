#!/usr/bin/env python3
"""The layout checks of docs/architecture.md, read from the sources alone (no build).

1. No import circle between the files of a crate: a file's imports are its `use` lines and
   the `crate::` / `super::` / `self::` paths in its code; a path to a name a module only
   re-exports (`pub use`) counts as a path to the module that defines it, so a `lib.rs`
   that is a map of re-exports does not close a circle. Imports inside `#[cfg(test)]`
   blocks do not count: tests may look at anything.
2. No source file over 800 lines unless its first lines say why (a `//! Long because …`
   line, or `// Long because …`).

Usage: tests/layout.py [--verbose] [ROOT]. Exit 0 when both hold; 1 with the circles and
the long files listed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MAX_LINES = 800
LONG_REASON = re.compile(r"^\s*//[!/]?\s*Long because", re.M)


def strip_comments_and_strings(text: str) -> str:
    """Blanks comments, string and char literals (keeping newlines) so braces and paths
    inside them are not read as code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'b?r(#*)"', text[i : i + 80])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + raw.group(1)
            j = text.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            # a char literal ('a', '\n', '\u{..}') but not a lifetime ('a)
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i : i + 12])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def drop_test_blocks(code: str) -> str:
    """Removes items under `#[cfg(test)]` (a module block or a single item)."""
    result, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        if m.start() < i:
            continue
        result.append(code[i : m.start()])
        j = m.end()
        # the item ends at the matching close brace, or at `;` if that comes first
        brace, semi = code.find("{", j), code.find(";", j)
        if semi >= 0 and (brace < 0 or semi < brace):
            i = semi + 1
            continue
        depth, k = 0, brace
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        result.append("\n" * code.count("\n", m.start(), k + 1))
        i = k + 1
    result.append(code[i:])
    return "".join(result)


class Crate:
    def __init__(self, src: Path):
        self.src = src
        self.modules: dict[tuple[str, ...], Path] = {}
        for path in sorted(src.rglob("*.rs")):
            rel = path.relative_to(src).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "mod":
                parts = parts[:-1]
            if parts in (["lib"], ["main"]):
                parts = []
            if parts and parts[0] == "bin":
                continue
            self.modules[tuple(parts)] = path
        self.code = {
            path: drop_test_blocks(strip_comments_and_strings(path.read_text()))
            for path in self.modules.values()
        }
        self.exports = {m: self._re_exports(m) for m in self.modules}

    def _re_exports(self, module):
        exports: dict[str, list[str]] = {}
        globs: list[list[str]] = []
        for is_pub, segments, alias in self._uses(module):
            if not is_pub or not segments:
                continue
            if segments[-1] == "*":
                globs.append(segments[:-1])
            else:
                exports[alias or segments[-1]] = segments
        return exports, globs

    def _uses(self, module):
        code = self.code[self.modules[module]]
        for m in re.finditer(r"(\bpub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);", code):
            raw = m.group(2)
            for segments, alias in expand_use_tree(raw):
                yield bool(m.group(1)), segments, alias

    def absolute(self, module, segments):
        """The segments as a path from the crate root, or None for another crate's path."""
        if not segments:
            return None
        head = segments[0]
        if head == "crate":
            return list(segments[1:])
        if head == "self":
            return list(module) + list(segments[1:])
        if head == "super":
            base = list(module)
            rest = list(segments)
            while rest and rest[0] == "super":
                base = base[:-1]
                rest = rest[1:]
            return base + rest
        if tuple(module) + (head,) in self.modules:
            return list(module) + list(segments)
        return None

    def defines(self, module, name) -> bool:
        code = self.code[self.modules[module]]
        return re.search(
            rf"\b(struct|enum|fn|trait|type|const|static|union|macro_rules!)\s+{re.escape(name)}\b",
            code,
        ) is not None

    def resolve(self, path: list[str], seen=None) -> tuple[str, ...]:
        """The module that defines what `path` (from the root) names."""
        seen = seen or set()
        current: tuple[str, ...] = ()
        for index, segment in enumerate(path):
            child = current + (segment,)
            if child in self.modules:
                current = child
                continue
            key = (current, segment)
            if key in seen:
                return current
            seen.add(key)
            exports, globs = self.exports[current]
            if segment in exports and not self.defines(current, segment):
                target = self.absolute(current, exports[segment])
                if target is not None:
                    return self.resolve(target + path[index + 1 :], seen)
            if not self.defines(current, segment):
                for glob in globs:
                    target = self.absolute(current, glob)
                    if target is None:
                        continue
                    owner = self.resolve(target, seen)
                    if owner != current and self.defines(owner, segment):
                        return owner
            return current
        return current

    def edges(self):
        for module, file in self.modules.items():
            targets = set()
            for _, segments, _ in self._uses(module):
                path = self.absolute(module, [s for s in segments if s != "*"])
                if path is not None:
                    targets.add(self.resolve(path))
            code = self.code[file]
            for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", code):
                path = self.absolute(module, m.group(1).split("::"))
                if path is not None:
                    targets.add(self.resolve(path))
            for m in re.finditer(r"(?<![\w:])(\w+)((?:::\w+)+)", code):
                if module + (m.group(1),) in self.modules:
                    path = list(module) + [m.group(1)] + m.group(2).split("::")[1:]
                    targets.add(self.resolve(path))
            targets.discard(module)
            yield module, targets


def expand_use_tree(raw: str):
    """`a::{b, c::{d as e, *}}` -> [(["a","b"], None), (["a","c","d"], "e"), (["a","c","*"], None)]."""
    raw = re.sub(r"\s+", " ", raw).strip()

    def split_top(s):
        parts, depth, start = [], 0, 0
        for idx, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:idx])
                start = idx + 1
        parts.append(s[start:])
        return [p.strip() for p in parts if p.strip()]

    def walk(prefix, s):
        s = s.strip()
        brace = s.find("{")
        if brace >= 0 and s.endswith("}"):
            head = [p.strip() for p in s[:brace].split("::") if p.strip()]
            found = []
            for part in split_top(s[brace + 1 : -1]):
                found += walk(prefix + head, part)
            return found
        alias = None
        m = re.fullmatch(r"(.*?)\s+as\s+(\w+)", s)
        if m:
            s, alias = m.group(1), m.group(2)
        path = [p.strip() for p in s.split("::") if p.strip()]
        if path and path[-1] == "self":
            path = path[:-1]
        return [(prefix + path, alias)]

    return walk([], raw)


def circles(crate: Crate) -> list[list[tuple[str, ...]]]:
    graph = {module: targets for module, targets in crate.edges()}
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
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
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            connect(v)
    return found


def one_cycle(crate: Crate, component) -> list[tuple[str, ...]]:
    """A shortest cycle through the component's first module, to show the reader."""
    graph = {m: t & set(component) for m, t in crate.edges() if m in component}
    start = component[0]
    frontier, parent = [start], {start: None}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return list(reversed(path)) + [start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in sys.argv
    root = Path(args[0] if args else Path(__file__).resolve().parent.parent)
    failed = False
    sources = sorted(
        p.parent
        for p in root.glob("*/**/Cargo.toml")
        if (p.parent / "src").is_dir() and "target" not in p.parts and "fuzz" not in p.parts
    )
    for crate_dir in sources:
        crate = Crate(crate_dir / "src")
        for component in circles(crate):
            failed = True
            cycle = one_cycle(crate, component)
            print(f"import circle in {crate_dir.relative_to(root)}: " +
                  " -> ".join(str(crate.modules[m].relative_to(crate_dir)) for m in cycle))
            if verbose and len(component) > len(cycle) - 1:
                print("   (component: " + ", ".join(str(crate.modules[m].relative_to(crate_dir)) for m in component) + ")")
        for file in crate.modules.values():
            text = file.read_text()
            lines = text.count("\n")
            if lines > MAX_LINES and not LONG_REASON.search("\n".join(text.splitlines()[:12])):
                failed = True
                print(f"long file: {file.relative_to(root)} has {lines} lines and no `// Long because …` line at its top")
    if failed:
        print("\nsee docs/architecture.md (layout rules)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
