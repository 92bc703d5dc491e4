#!/usr/bin/env bash
# Copies a multi-document YAML stream from stdin to stdout without its
# CustomResourceDefinitions (make undeploy KEEP_CRDS=1).
set -euo pipefail
awk '
  function flush() { if (doc != "" && doc !~ /(^|\n)kind: CustomResourceDefinition\n/) printf "---\n%s", doc; doc = "" }
  /^---/ { flush(); next }
  { doc = doc $0 "\n" }
  END { flush() }
'
