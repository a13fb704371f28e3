#!/usr/bin/env bash
# Compile-fail checks (issue 14, "no overload traps"): code that must NOT compile against RetryKit's public API.
#
# Every file of Tests/CompileFail/ is type-checked on its own, in a module of its own, against the library modules
# that `swift build` produces (found and flagged as `scripts/check-snippets.py --typecheck` does it):
#
#   - A trap file starts with one or more lines `// expect-error: <substring>` (other `//` lines may follow them, up to
#     the first line of code). It PASSES when the compiler rejects it with at least one error and each substring
#     appears in the diagnostics; compiling, or failing for another reason (a missing module, say), is a FAIL.
#   - A control file has no `expect-error` line (name it ok-*.swift). It PASSES when it compiles with warnings as
#     errors. Controls show that the set-up works: without them a missing module path would make every trap "pass".
#
#     scripts/check-compile-fail.sh                     # build the modules (swift build), then check every file
#     COMPILE_FAIL_NO_BUILD=1 scripts/check-compile-fail.sh   # use the modules already built
#     scripts/check-compile-fail.sh Tests/CompileFail/x.swift …   # check only these files
#
# Prints PASS or FAIL per file and exits 1 if any file fails (or if there is no trap or no control to check).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=Tests/CompileFail
modules=(RetryKit RetryKitHTTP RetryKitTesting)

if [ "${COMPILE_FAIL_NO_BUILD:-}" != 1 ]; then
    swift build
fi
bin=$(swift build --show-bin-path)
search=""
for candidate in "$bin/Modules" "$bin"; do
    found=1
    for module in "${modules[@]}"; do
        [ -e "$candidate/$module.swiftmodule" ] || found=0
    done
    if [ "$found" = 1 ]; then
        search=$candidate
        break
    fi
done
if [ -z "$search" ]; then
    echo "FAIL  no built ${modules[*]} modules in $bin: run \`swift build\` first" >&2
    exit 1
fi

if [ "$(uname)" = Darwin ]; then compiler=(xcrun swiftc); else compiler=(swiftc); fi
flags=(-typecheck -swift-version 6 -parse-as-library -enable-upcoming-feature MemberImportVisibility -I "$search")

if [ "$#" -gt 0 ]; then
    files=("$@")
else
    shopt -s nullglob
    files=("$dir"/*.swift)
    shopt -u nullglob
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

traps=0
controls=0
failures=()
for file in ${files[@]+"${files[@]}"}; do  # (the empty-array guard is for bash 3.2)
    name=$(basename "$file" .swift)
    module="CompileFail_$(printf '%s' "$name" | tr -c 'A-Za-z0-9_\n' '_')"
    # The expected substrings: `// expect-error:` lines of the leading comment block (blank lines allowed).
    expected=()
    while IFS= read -r line; do
        case "$line" in
            "// expect-error:"*)
                text=${line#"// expect-error:"}
                text=${text# }
                [ -n "$text" ] && expected+=("$text")
                ;;
            "//"* | "") ;;
            *) break ;;
        esac
    done <"$file"
    log="$scratch/$name.log"
    if [ "${#expected[@]}" -eq 0 ]; then
        controls=$((controls + 1))
        if "${compiler[@]}" "${flags[@]}" -warnings-as-errors -module-name "$module" "$file" >"$log" 2>&1; then
            echo "PASS  $file (control: compiles)"
        else
            echo "FAIL  $file (control) does not compile:"
            sed -n '1,30s/^/      /p' "$log"
            failures+=("$file")
        fi
        continue
    fi
    traps=$((traps + 1))
    if "${compiler[@]}" "${flags[@]}" -module-name "$module" "$file" >"$log" 2>&1; then
        echo "FAIL  $file compiles, but must be rejected with: ${expected[*]}"
        failures+=("$file")
        continue
    fi
    missing=()
    grep -q "error:" "$log" || missing+=("(no error: diagnostic)")
    for text in "${expected[@]}"; do
        grep -qF -- "$text" "$log" || missing+=("$text")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        first=$(grep -m 1 "error:" "$log" | sed 's/^.*error: //')
        echo "PASS  $file (rejected: $first)"
    else
        echo "FAIL  $file is rejected, but the diagnostics lack:"
        printf '        %s\n' "${missing[@]}"
        sed -n '1,30s/^/      /p' "$log"
        failures+=("$file")
    fi
done

echo "$((traps + controls - ${#failures[@]})) of $((traps + controls)) files as expected ($traps traps, $controls controls)"
if [ "$#" -eq 0 ]; then
    [ "$traps" -gt 0 ] || failures+=("(no trap file in $dir)")
    [ "$controls" -gt 0 ] || failures+=("(no control file in $dir: add an ok-*.swift that must compile)")
fi
if [ "${#failures[@]}" -gt 0 ]; then
    echo "compile-fail check failed: ${failures[*]}" >&2
    exit 1
fi
