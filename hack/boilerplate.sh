#!/usr/bin/env bash
# The license header (hack/boilerplate.go.txt) on every Go file in git.
#
#   hack/boilerplate.sh           add it where it is missing (make generate)
#   hack/boilerplate.sh --verify  list the files without it, exit 1 if any (make verify)
#
# Generated code gets it from the generators, which read the same file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

header=hack/boilerplate.go.txt
lines=$(wc -l <"$header")
missing=()
while IFS= read -r f; do
  [ -f "$f" ] || continue
  if ! head -n "$lines" "$f" | cmp -s - "$header"; then
    missing+=("$f")
  fi
done < <(git ls-files --cached --others --exclude-standard '*.go')

if [ "${1:-}" = --verify ]; then
  if [ ${#missing[@]} -gt 0 ]; then
    echo "license header missing (run hack/boilerplate.sh):" >&2
    printf '  %s\n' "${missing[@]}" >&2
    exit 1
  fi
  exit 0
fi
for f in "${missing[@]}"; do
  { cat "$header"; echo; cat "$f"; } >"$f.tmp" && mv "$f.tmp" "$f"
done
echo "boilerplate.sh: header added to ${#missing[@]} files" >&2
