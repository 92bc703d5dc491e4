#!/usr/bin/env bash
# Prints the version the build stamps into the binary, from git describe.
#
#   a release tag vX.Y.Z on HEAD       vX.Y.Z
#   N commits after a release tag      vX.Y.Z-N-g<sha>
#   no release tag yet                 v0.0.0-<commits>-g<sha>
#   uncommitted changes                the above with -dirty
#   no git (a source tarball)          v0.0.0-unknown
#
# component-base parses the version as semver, so it always starts vX.Y.Z.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo v0.0.0-unknown
  exit 0
fi
if v=$(git describe --tags --match 'v[0-9]*.[0-9]*.[0-9]*' --dirty 2>/dev/null); then
  echo "$v"
  exit 0
fi
echo "v0.0.0-$(git rev-list --count HEAD)-g$(git describe --always --dirty)"
