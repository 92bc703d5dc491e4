package pipeline

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Options configures the Pipeline controller. The manager binds them to
// flags; tests set them directly.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers int
	// DefaultNamespace holds the children of Pipelines whose
	// spec.namespace is empty.
	DefaultNamespace string
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Workers: 5, DefaultNamespace: "pipeline"}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--concurrent-pipeline-syncs must be at least 1, got %d", o.Workers)
	}
	if errs := validation.IsDNS1123Label(o.DefaultNamespace); len(errs) > 0 {
		return fmt.Errorf("--pipeline-namespace %q is not a valid namespace name: %s", o.DefaultNamespace, strings.Join(errs, "; "))
	}
	return nil
}
