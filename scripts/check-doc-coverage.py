#!/usr/bin/env python3
"""Fails if a public symbol in the given symbol-graph directory has no doc comment of its own."""
import json
import pathlib
import sys

missing = []
for path in pathlib.Path(sys.argv[1]).glob("*.symbols.json"):
    graph = json.loads(path.read_text())
    for symbol in graph.get("symbols", []):
        if symbol.get("accessLevel") not in ("public", "open"):
            continue
        kind = symbol["kind"]["identifier"]
        # Synthesized members and protocol requirements' default implementations carry no source location.
        if "location" not in symbol:
            continue
        if symbol.get("docComment") is None:
            name = ".".join(symbol["pathComponents"])
            where = symbol["location"]["uri"].split("/")[-1]
            missing.append(f"{where}: {kind} {name}")
if missing:
    print("public symbols without documentation:")
    print("\n".join(sorted(set(missing))))
    sys.exit(1)
