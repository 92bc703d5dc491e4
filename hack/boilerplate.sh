#!/usr/bin/env bash
# The license header (hack/boilerplate.go.txt) on every Go file in git.
#
#   hack/boilerplate.sh           add it where it is missing (make generate)
#   hack/boilerplate.sh --verify  list the files without it, exit 1 if any (make verify)
#
# The header opens the file, after its build constraints if it has any
# (gofmt keeps those first). Generated code gets it from the generators,
# which read the same file.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

header=hack/boilerplate.go.txt

# body_after_constraints prints the file without its leading build
# constraint lines and the blank lines after them.
body_after_constraints() {
  awk 'BEGIN { head = 1 }
       head && (/^\/\/go:build / || /^\/\/ \+build / || /^$/) { next }
       { head = 0; print }' "$1"
}

has_header() {
  # awk reads the whole file, so that no SIGPIPE fails the pipeline.
  body_after_constraints "$1" | awk -v n="$(wc -l <"$header")" 'NR <= n' | cmp -s - "$header"
}

missing=()
while IFS= read -r f; do
  [ -f "$f" ] || continue
  has_header "$f" || missing+=("$f")
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
  {
    # Build constraints first, as gofmt wants them.
    awk '/^\/\/go:build / || /^\/\/ \+build / { print; next } { exit }' "$f" | sed '$a\\' | grep . && echo
    cat "$header"
    echo
    body_after_constraints "$f"
  } >"$f.tmp"
  mv "$f.tmp" "$f"
done
echo "boilerplate.sh: header added to ${#missing[@]} files" >&2
