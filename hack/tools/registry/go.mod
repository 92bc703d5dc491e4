module github.com/ndsl/controller-manager/hack/tools/registry

go 1.26.0

// An in-memory OCI registry for hack/kind/release-check.sh.
require github.com/google/go-containerregistry v0.22.1
