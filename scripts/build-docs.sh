#!/usr/bin/env bash
# Builds the DocC documentation of the three products (RetryKit, RetryKitHTTP, RetryKitTesting) with the toolchain's
# `docc` (no plugin, no dependency), treating warnings as errors, and fails if any public symbol of the library targets
# lacks a doc comment. Writes one archive per product and a static site that combines them:
#
#     scripts/build-docs.sh
#     python3 -m http.server --directory .build-docs/docs/site 8000   # then open http://localhost:8000/documentation/
#
# DOCS_OUTPUT=dir puts the archives and the site in dir instead of .build-docs/docs.
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=.build-docs
out=${DOCS_OUTPUT:-$scratch/docs}
mkdir -p "$out"
# dump-symbol-graph also tries the test modules and fails on them; only the library graphs are needed.
# Extension block symbols make DocC render (and link-check) extensions of other modules' types, such as
# RetryKitHTTP's URLSession methods; without them those pages are silently dropped.
swift package --scratch-path "$scratch" dump-symbol-graph --emit-extension-block-symbols >/dev/null 2>&1 || true
graphs=$(find "$scratch" -type d -name symbolgraph | head -n 1)
for module in RetryKit RetryKitHTTP RetryKitTesting; do
    [ -f "$graphs/$module.symbols.json" ] || { echo "no symbol graph for $module"; exit 1; }
done

for module in RetryKit RetryKitHTTP RetryKitTesting; do
    dir=$(mktemp -d)
    cp "$graphs/$module.symbols.json" "$dir/"
    # Extension symbol graphs (RetryKitHTTP@Foundation…) belong to the module too.
    cp "$graphs/$module@"*.symbols.json "$dir/" 2>/dev/null || true
    catalog=Sources/$module/$module.docc
    args=(--additional-symbol-graph-dir "$dir" --fallback-display-name "$module"
          --fallback-bundle-identifier "org.retrykit.$module" --warnings-as-errors
          --output-path "$out/$module.doccarchive")
    if [ -d "$catalog" ]; then
        docc convert "$catalog" "${args[@]}"
    else
        docc convert "${args[@]}"
    fi
    python3 scripts/check-doc-coverage.py "$dir"
    rm -rf "$dir"
done
# One static site with the three products under a common landing page.
rm -rf "$out/site"
docc merge "$out/RetryKit.doccarchive" "$out/RetryKitHTTP.doccarchive" "$out/RetryKitTesting.doccarchive" \
    --synthesized-landing-page-name RetryKit --output-path "$out/site" >/dev/null
echo "documentation built in $out: one archive per product, and a static site of all three:"
echo "    python3 -m http.server --directory $out/site 8000"
echo "    then open http://localhost:8000/documentation/"
