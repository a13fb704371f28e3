#!/usr/bin/env python3
"""Keeps the Swift code blocks of the documentation compiling.

Every ```swift block in README.md, Migration.md and the DocC articles (Sources/*/*.docc/**/*.md) is copied into a
generated Swift file of the `MigrationSnippets` test target (Tests/MigrationSnippets/Generated*.swift), so that
`swift test` compiles every snippet, and runs the ones written as tests. `--typecheck` also compiles each block on its
own, in a module of its own, with only its own imports, against the built library modules: a reader who copies a
block gets code that compiles.

    python3 scripts/check-snippets.py               # regenerate Tests/MigrationSnippets/Generated*.swift
    python3 scripts/check-snippets.py --check       # exit 1 if the generated files are not up to date (CI)
    swift build && python3 scripts/check-snippets.py --typecheck
                                                    # compile every block on its own; exit 1 naming those that fail

Complete blocks and fragments. A block is complete unless its first line of code (after its imports) is a comment
`// Fragment: <why>`, visible to readers. `--typecheck` compiles a complete block with nothing but its own imports and
the library. A fragment is compiled with the blocks it continues (`with:` and `in:` below) and with
Tests/MigrationSnippets/Placeholders.swift, which declares the names that stand for "your app's code" (`api`,
`Profile`, `show`, …) and the few Alamofire names of the "before" code; say in the fragment's comment which of them it
uses. A block that is not compiled at all (`skip`) or that needs another block must be a fragment, or the script
fails.

How a block is compiled is set by an HTML comment on the line before its fence (invisible on GitHub and in DocC):

    <!-- snippet: NAME KIND in:TYPE with:NAME,NAME -->

KIND, `in:TYPE` and `with:` are optional. KIND is one of:

    body  (default) the block is the body of `func NAME() async throws { … }`: statements, local types.
    test  the same, as a Swift Testing test: `@Test func NAME() async throws { … }`; it runs under `swift test`.
          The block imports Testing itself.
    decl  the block is the body of `struct NAME { … }`: declarations (types, methods, properties, @Test methods).
          Tests elsewhere in the target can reach them as `NAME.Type` or `NAME().method()`.
    top   the block goes at file scope unchanged (extensions, protocols); its names must be unique in the target.
    skip  the block is not compiled (for Package.swift excerpts or another library's code).

With `in:TYPE` the wrapper is put in `extension TYPE { … }`, so that unqualified names resolve to TYPE's nested
declarations first: a block that continues the `decl` block NAME is compiled `in:NAME`. `with:NAME,…` names further
blocks a fragment needs. `import Alamofire` is compiled as `import AlamofireStandIn` (Tests/AlamofireStandIn, the
Alamofire names the "before" code uses), beside the library modules, so that the block compiles as a user's file
that imports both does; `import SwiftRetrier` is dropped.

Without a comment a block gets KIND body and an automatic NAME (`migrationSnippet3`). A fence written
```swift skip (or ```swift no-compile) is skipped too. Leading `import` lines (and `#if canImport(…)` groups of
imports) are moved to the top of the generated file. Names must be unique across all sources: every snippet lives in
the same module.

Each snippet is preceded by `#sourceLocation`, so compiler errors and test failures point at the Markdown line.
"""
import concurrent.futures
import difflib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "Tests" / "MigrationSnippets"
KINDS = ("body", "test", "decl", "top", "skip")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
ANNOTATION = re.compile(r"^\s*<!--\s*snippet:\s*(?P<args>.*?)\s*-->\s*$")
FRAGMENT = re.compile(r"^\s*//\s*Fragment:\s*\S")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Modules the "before" code imports that are not dependencies: an import of a module of STAND_IN_MODULES is compiled
# as an import of the stand-in module (a target of Package.swift), other import lines of DROPPED_IMPORT are dropped.
STAND_IN_MODULES = {"Alamofire": "AlamofireStandIn"}
STAND_IN_IMPORT = re.compile(r"^\s*import\s+(?P<module>" + "|".join(STAND_IN_MODULES) + r")\s*$")
DROPPED_IMPORT = re.compile(r"^\s*import\s+(SwiftRetrier)\s*$")
PREAMBLE = re.compile(r"^\s*(@\w+(\(.*\))?\s+)*import\s+\w+|^#if\s+canImport\(\w+\)|^#endif\b")

LIBRARY_MODULES = ("RetryKit", "RetryKitHTTP", "RetryKitTesting")

HEADER_IMPORTS = """import Dispatch
import Foundation
import RetryKit
import RetryKitHTTP
import RetryKitTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
"""


class SnippetError(Exception):
    pass


class Snippet:
    def __init__(self, source, line, name, kind, namespace, lines, context=()):
        self.source = source  # repository-relative path of the Markdown file
        self.line = line  # 1-based line of the first code line
        self.name = name
        self.kind = kind
        self.namespace = namespace  # a type whose extension the snippet is compiled in, or None
        self.lines = lines
        self.context = list(context)  # names of the snippets a fragment continues (`with:` and `in:`)
        self.fragment = is_fragment(lines)

    @property
    def where(self):
        return f"{self.source}:{self.line}: {self.name}"


def is_fragment(lines):
    """A fragment says so on its first line of code (after its imports): `// Fragment: why`."""
    for line in lines:
        if line.strip() == "" or PREAMBLE.match(line):
            continue
        return bool(FRAGMENT.match(line))
    return False


def sources():
    found = [ROOT / "README.md", ROOT / "Migration.md"]
    found += sorted((ROOT / "Sources").glob("*/*.docc/**/*.md"))
    return [path for path in found if path.is_file()]


def output_name(path):
    relative = path.relative_to(ROOT)
    parts = [p for p in relative.with_suffix("").parts if p != "Sources"]
    words = []
    for part in parts:
        part = part.replace(".docc", "")
        words += [w for w in re.split(r"[^A-Za-z0-9]+", part) if w]
    # Two distinct spellings: the module name and the catalog name are the same word; keep one.
    deduplicated = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]]
    return "Generated" + "".join(w[:1].upper() + w[1:] for w in deduplicated) + ".swift"


def auto_prefix(path):
    stem = path.stem
    return stem[:1].lower() + re.sub(r"[^A-Za-z0-9]", "", stem[1:])


def parse(path):
    relative = str(path.relative_to(ROOT))
    lines = path.read_text(encoding="utf-8").split("\n")
    snippets = []
    problems = []
    index = 0
    count = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        indent, fence, info = match.group("indent"), match.group("fence"), match.group("info").strip()
        start = index
        body = []
        index += 1
        while index < len(lines):
            closing = FENCE.match(lines[index])
            if closing and closing.group("fence")[0] == fence[0] and len(closing.group("fence")) >= len(fence) \
                    and closing.group("info").strip() == "":
                break
            line = lines[index]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            index += 1
        else:
            raise SnippetError(f"{relative}:{start + 1}: code block is never closed")
        index += 1
        words = info.split()
        if not words or words[0] != "swift":
            continue
        count += 1
        name, kind, namespace, context = f"{auto_prefix(path)}Snippet{count}", "body", None, []
        if any(word in ("skip", "no-compile") for word in words[1:]):
            kind = "skip"
        previous = start - 1
        while previous >= 0 and lines[previous].strip() == "":
            previous -= 1
        annotation = ANNOTATION.match(lines[previous]) if previous >= 0 else None
        if annotation:
            args = annotation.group("args").split()
            options = [arg for arg in args[1:] if arg.startswith("in:")]
            withs = [arg for arg in args[1:] if arg.startswith("with:")]
            kinds = [arg for arg in args[1:] if not arg.startswith(("in:", "with:"))]
            if not args or len(kinds) > 1 or len(options) > 1 or len(withs) > 1:
                raise SnippetError(
                    f"{relative}:{previous + 1}: expected <!-- snippet: NAME [KIND] [in:TYPE] [with:NAME,…] -->")
            context = [name for arg in withs for name in arg[5:].split(",") if name]
            name = args[0]
            kind = kinds[0] if kinds else kind
            if options:
                namespace = options[0][3:]
                if not IDENTIFIER.match(namespace) or kind == "top":
                    raise SnippetError(f"{relative}:{previous + 1}: bad `in:` option {options[0]!r}")
            if not IDENTIFIER.match(name):
                raise SnippetError(f"{relative}:{previous + 1}: snippet name {name!r} is not a Swift identifier")
            if kind not in KINDS:
                raise SnippetError(f"{relative}:{previous + 1}: unknown snippet kind {kind!r}; use one of {KINDS}")
        snippet = Snippet(relative, start + 2, name, kind, namespace, body, context)
        if snippet.namespace and snippet.namespace not in snippet.context:
            snippet.context.append(snippet.namespace)
        if not snippet.fragment and (snippet.kind == "skip" or snippet.context):
            why = "is not compiled" if snippet.kind == "skip" else f"needs {', '.join(snippet.context)} to compile"
            problems.append(
                f"{relative}:{start + 2}: the block {why}: say so on its first line of code, "
                "`// Fragment: <why it is not a complete program>`")
        snippets.append(snippet)
    if problems:
        raise SnippetError("\n".join(problems))
    return snippets


def split_preamble(lines):
    """Leading import lines (and `#if canImport` groups of them) move to the top of the file.

    Returns the groups (each a tuple of normalized lines: one import, or one `#if … #endif` group) and the index of
    the first line of code.
    """
    groups = []
    group = None
    index = 0
    while index < len(lines) and (lines[index].strip() == "" or PREAMBLE.match(lines[index])):
        line = lines[index].strip()
        index += 1
        if not line:
            continue
        if line.startswith("#if"):
            group = [line]
        elif line.startswith("#endif") and group is not None:
            group.append(line)
            groups.append(tuple(group))
            group = None
        elif group is not None:
            group.append(line)
        else:
            groups.append((line,))
    if group is not None:
        raise SnippetError("an `#if` in a snippet's imports is not closed before its code")
    return groups, index


def render_group(group):
    if len(group) == 1:
        return [group[0]]
    return [group[0]] + ["    " + line for line in group[1:-1]] + [group[-1]]


def code_lines(lines):
    """The snippet's own lines stay unindented, so that compiler columns match the Markdown too."""
    return [line.rstrip() for line in lines]


def wrap(snippet):
    """The snippet's code (without its leading imports) as Swift lines, wrapped as its KIND says."""
    try:
        _, first = split_preamble(snippet.lines)
    except SnippetError as error:
        raise SnippetError(f"{snippet.source}:{snippet.line}: {error}")
    code = snippet.lines[first:]
    while code and code[-1].strip() == "":
        code.pop()
    line = snippet.line + first
    block = [f"// {snippet.source}:{line}: {snippet.name} ({snippet.kind})"]
    location = f'#sourceLocation(file: "{snippet.source}", line: {line})'
    if snippet.kind == "top":
        return block + [location] + code_lines(code) + ["#sourceLocation()"]
    if snippet.kind == "body":
        opening = f"func {snippet.name}() async throws {{"
    elif snippet.kind == "test":
        file_name = pathlib.PurePath(snippet.source).name
        opening = f'@Test("{file_name}: {snippet.name}") func {snippet.name}() async throws {{'
    else:
        opening = f"struct {snippet.name} {{"
    if snippet.namespace:
        block += [f"extension {snippet.namespace} {{", "    " + opening]
    else:
        block += [opening]
    block += [location] + code_lines(code) + ["#sourceLocation()"]
    block += ["    }", "}"] if snippet.namespace else ["}"]
    return block


def imports(snippet):
    """The snippet's own import groups, without those of modules that are not dependencies."""
    try:
        groups, _ = split_preamble(snippet.lines)
    except SnippetError as error:
        raise SnippetError(f"{snippet.source}:{snippet.line}: {error}")
    kept = []
    for group in groups:
        stand_in = STAND_IN_IMPORT.match(group[0])
        if stand_in:
            group = (f"import {STAND_IN_MODULES[stand_in.group('module')]}",)
        if not DROPPED_IMPORT.match(group[0]) and group not in kept:
            kept.append(group)
    return kept


def render(path, snippets):
    relative = str(path.relative_to(ROOT))
    out = [
        f"// Generated by scripts/check-snippets.py from {relative}: do not edit.",
        f"// Edit {relative}, then run `python3 scripts/check-snippets.py`.",
        "// swift-format-ignore-file",
        "",
    ]
    header_groups, _ = split_preamble(HEADER_IMPORTS.split("\n"))
    hoisted = []
    blocks = []
    for snippet in snippets:
        if snippet.kind == "skip":
            continue
        hoisted += [g for g in imports(snippet) if g not in header_groups and g not in hoisted]
        blocks.append(wrap(snippet))
    out += HEADER_IMPORTS.rstrip("\n").split("\n")
    if hoisted:
        out.append("")
        for group in hoisted:
            out += render_group(group)
    for block in blocks:
        out += [""] + block
    return "\n".join(out) + "\n"


PLACEHOLDERS = OUT_DIR / "Placeholders.swift"


def modules_directory():
    """Where `swift build` put the library modules (RetryKit.swiftmodule, …)."""
    try:
        bin_path = subprocess.run(
            ["swift", "build", "--show-bin-path"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        raise SnippetError(f"cannot ask SwiftPM for its build directory: {error}")
    for candidate in (pathlib.Path(bin_path) / "Modules", pathlib.Path(bin_path)):
        if all((candidate / f"{module}.swiftmodule").exists()
               for module in LIBRARY_MODULES + tuple(STAND_IN_MODULES.values())):
            return candidate
    modules = LIBRARY_MODULES + tuple(STAND_IN_MODULES.values())
    raise SnippetError(f"no built {', '.join(modules)} modules in {bin_path}: run `swift build` first")


def typecheck_source(snippet, by_name):
    """The Swift file that compiles `snippet` on its own: its imports and code, after the blocks it continues."""
    chain = []

    def add(name, seen):
        if name in seen:
            raise SnippetError(f"{snippet.where}: `with:`/`in:` blocks form a cycle through {name}")
        other = by_name.get(name)
        if other is None:
            return
        for earlier in other.context:
            add(earlier, seen | {name})
        if other not in chain:
            chain.append(other)

    for name in snippet.context:
        if name not in by_name and not snippet.namespace == name:
            raise SnippetError(f"{snippet.where}: `with:{name}` names no snippet")
        add(name, {snippet.name})
    chain.append(snippet)
    groups = []
    for part in chain:
        groups += [g for g in imports(part) if g not in groups]
    out = [f"// {snippet.where}, compiled on its own by scripts/check-snippets.py --typecheck"]
    for group in groups:
        out += render_group(group)
    for part in chain:
        out += [""] + wrap(part)
    return "\n".join(out) + "\n"


def typecheck(all_snippets, jobs):
    """Compiles every block that is not skipped, each in a module of its own, and reports which ones fail."""
    modules = modules_directory()
    by_name = {s.name: s for s in all_snippets if s.kind != "skip"}
    candidates = [s for s in all_snippets if s.kind != "skip"]
    compiler = ["xcrun", "swiftc"] if sys.platform == "darwin" else ["swiftc"]
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="snippets-"))

    def check(snippet):
        source = scratch / f"{snippet.name}.swift"
        source.write_text(typecheck_source(snippet, by_name), encoding="utf-8")
        files = [str(source)]
        if snippet.fragment:
            files.append(str(PLACEHOLDERS))
        command = compiler + [
            "-typecheck", "-swift-version", "6", "-parse-as-library", "-warnings-as-errors",
            # A member from a module that only Placeholders.swift imports must not count as imported.
            "-enable-upcoming-feature", "MemberImportVisibility",
            "-module-name", f"Snippet_{snippet.name}", "-I", str(modules)] + files
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        return snippet, result.returncode, (result.stdout + result.stderr).strip(), command

    failures = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for snippet, status, output, command in pool.map(check, candidates):
                label = "fragment, with its context" if snippet.fragment else "on its own"
                if status == 0:
                    print(f"ok    {snippet.where} ({label})")
                    continue
                failures.append(snippet)
                print(f"FAIL  {snippet.where} ({label}) does not compile:")
                print("\n".join("      " + line for line in output.splitlines()[:40]))
                print(f"      (command: {' '.join(command)})")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    skipped = [s for s in all_snippets if s.kind == "skip"]
    print(f"{len(candidates) - len(failures)} of {len(candidates)} blocks compile "
          f"({sum(not s.fragment for s in candidates)} complete, {sum(s.fragment for s in candidates)} fragments); "
          f"{len(skipped)} fragments not compiled")
    if failures:
        print("blocks that do not compile: " + ", ".join(s.where for s in failures), file=sys.stderr)
        return 1
    return 0


def main(argv):
    check = "--check" in argv[1:]
    typecheck_only = "--typecheck" in argv[1:]
    unknown = [arg for arg in argv[1:] if arg not in ("--check", "--typecheck")]
    if unknown or (check and typecheck_only):
        print(__doc__)
        return 2
    try:
        expected = {}
        names = {}
        all_snippets = []
        for path in sources():
            snippets = parse(path)
            all_snippets += snippets
            for snippet in snippets:
                if snippet.kind == "skip":
                    continue
                if snippet.name in names:
                    raise SnippetError(
                        f"{snippet.source}:{snippet.line}: snippet name {snippet.name!r} is already used at "
                        f"{names[snippet.name]}")
                names[snippet.name] = f"{snippet.source}:{snippet.line}"
            if any(s.kind != "skip" for s in snippets):
                expected[OUT_DIR / output_name(path)] = render(path, snippets)
        if typecheck_only:
            return typecheck(all_snippets, os.cpu_count() or 2)
    except SnippetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    existing = set(OUT_DIR.glob("Generated*.swift"))
    stale = sorted(existing - set(expected))
    changed = []
    for path, text in sorted(expected.items()):
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            changed.append((path, current, text))

    if check:
        for path, current, text in changed:
            relative = path.relative_to(ROOT)
            print(f"{relative} is out of date with the Markdown it is generated from:")
            diff = difflib.unified_diff(
                (current or "").splitlines(), text.splitlines(), f"{relative} (committed)", f"{relative} (expected)",
                lineterm="", n=1)
            print("\n".join(list(diff)[:60]))
        for path in stale:
            print(f"{path.relative_to(ROOT)} is generated from no Markdown any more")
        if changed or stale:
            print("run `python3 scripts/check-snippets.py` and commit the result", file=sys.stderr)
            return 1
        print(f"{len(names)} snippets in {len(expected)} files are up to date")
        return 0

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for path, _, text in changed:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    for path in stale:
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    print(f"{len(names)} snippets in {len(expected)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
