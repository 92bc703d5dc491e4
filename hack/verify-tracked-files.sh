#!/usr/bin/env bash
# Fails when git tracks a build output: an executable binary (ELF, Mach-O or
# PE, by magic number) or any file over 1 MB. Tools are built by hack/, never
# committed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

max=1000000
bad=0
while IFS= read -r -d '' f; do
  [[ -f $f && ! -L $f ]] || continue
  size=$(stat -c %s "$f")
  if (( size > max )); then
    echo "$f: $size bytes, over the 1 MB a tracked file may have" >&2
    bad=1
  fi
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case $magic in
    7f454c46|feedface|feedfacf|cefaedfe|cffaedfe|cafebabe|4d5a*)
      echo "$f: an executable binary; build it with hack/ instead of committing it" >&2
      bad=1 ;;
  esac
done < <(git ls-files -z)
exit $bad
