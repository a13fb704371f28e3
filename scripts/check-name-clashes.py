#!/usr/bin/env python3
"""Fails when a public top-level type of RetryKit's modules has the name of one in a package users import beside it.

A user who imports Alamofire (or swift-nio, grpc-swift, …) in the same file as RetryKit cannot write a type name that
both modules declare without qualifying it: `RetryPolicy` was such a name (issue 27, point 4). The names of those
packages are committed in scripts/peer-type-names.txt (one `package<TAB>name` a line, `#` comments).

    python3 scripts/check-name-clashes.py           # exit 1 naming every clash
    python3 scripts/check-name-clashes.py --list    # print the public top-level type names found, one a line

A public top-level type is a `class`, `struct`, `enum`, `protocol`, `actor` or `typealias` declared `public` or `open`
at file scope (outside every `{ … }`; `#if` blocks do not count as scopes). Nested types are qualified by their
parent, so they cannot clash.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = ("RetryKit", "RetryKitHTTP", "RetryKitTesting")
PEERS = ROOT / "scripts" / "peer-type-names.txt"

DECLARATION = re.compile(
    r"^(?:@[\w.]+(?:\([^()]*\))?\s+)*"  # attributes: @available(…), @frozen, @MainActor
    r"(?:(?:public|open|final|indirect|nonisolated|nonisolated\(unsafe\)|package|internal)\s+)*"
    r"(?P<keyword>class|struct|enum|protocol|actor|typealias)\s+(?P<name>\w+)")
ACCESS = re.compile(r"(?:^|\s)(?:public|open)\s")


def top_level_code(text):
    """The file's text at brace depth 0, with comments and string literals blanked, as a list of lines."""
    out = []
    depth = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            nesting = 0
            while i < n:
                if text.startswith("/*", i):
                    nesting += 1
                    i += 2
                elif text.startswith("*/", i):
                    nesting -= 1
                    i += 2
                    if nesting == 0:
                        break
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
            continue
        raw = re.match(r'#*"(?:"")?', text[i:])
        if c in '#"' and raw and raw.group(0).endswith('"'):
            opening = raw.group(0)
            hashes = opening[: len(opening) - len(opening.lstrip("#"))]
            closing = ('"""' if opening.lstrip("#") == '"""' else '"') + hashes
            i += len(opening)
            while i < n and not text.startswith(closing, i):
                if text[i] == "\\" and not hashes:
                    i += 1  # an escaped character never closes the literal
                elif text[i] == "\n":
                    out.append("\n")
                i += 1
            i += len(closing)
            out.append('""' if depth == 0 else "")
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 or c == "\n":
            out.append(c)
        i += 1
    return "".join(out).split("\n")


def public_type_names(text):
    names = []
    # A declaration's attributes may sit on lines of their own: join each line with the ones above it that hold
    # only attributes.
    pending = ""
    for line in top_level_code(text):
        line = line.strip()
        if re.fullmatch(r"(?:@[\w.]+(?:\([^()]*\))?\s*)+", line):
            pending += line + " "
            continue
        line, pending = pending + line, ""
        match = DECLARATION.match(line)
        if match and ACCESS.search(" " + line[: match.start("keyword")]):
            names.append(match.group("name"))
    return names


def self_test():
    sample = '''
@available(macOS 13, *)
public final class Outer {
    public struct Nested {}
}
extension Outer { public enum AlsoNested {} }
let text = """
public struct InAString {}
"""
/* public struct InAComment {} */
#if canImport(Darwin)
    @frozen public enum Conditional { case a }
#endif
struct Internal {}
open class Open {}
public typealias Alias = Int
'''
    found = public_type_names(sample)
    expected = ["Outer", "Conditional", "Open", "Alias"]
    if found != expected:
        raise SystemExit(f"check-name-clashes.py: its parser is broken: found {found}, expected {expected}")


def main(argv):
    self_test()
    declared = {}
    for module in MODULES:
        for path in sorted((ROOT / "Sources" / module).rglob("*.swift")):
            for name in public_type_names(path.read_text(encoding="utf-8")):
                declared.setdefault(name, []).append(f"{path.relative_to(ROOT)} ({module})")
    if "--list" in argv[1:]:
        print("\n".join(sorted(declared)))
        return 0
    if not declared:
        print("check-name-clashes.py: found no public types in Sources: is the parser broken?", file=sys.stderr)
        return 2
    peers = {}
    for line in PEERS.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        package, name = line.split("\t")
        peers.setdefault(name.strip(), []).append(package.strip())
    clashes = sorted(set(declared) & set(peers))
    for name in clashes:
        print(f"clash: `{name}` is declared by {', '.join(declared[name])} and by {', '.join(peers[name])}")
    if clashes:
        print(f"{len(clashes)} public type names clash with {PEERS.relative_to(ROOT)}: rename them", file=sys.stderr)
        return 1
    print(f"{len(declared)} public top-level types of {', '.join(MODULES)}: none is named like one of the "
          f"{len(peers)} names in {PEERS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
