package pipeline

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the Pipeline controller. The manager binds them to
// flags; tests set them directly.
type Options struct {
	// Workers is the number of concurrent reconciles.
	Workers int
	// Queue is the order of the controller's queue; the manager sets it
	// from --controller-queue. Empty is the priority queue.
	Queue controller.QueueKind
	// DefaultNamespace holds the children of Pipelines whose
	// spec.namespace is empty.
	DefaultNamespace string
	// AllowedNamespaces are the namespaces besides DefaultNamespace that a
	// Pipeline's spec.namespace may name; "*" allows every namespace. The
	// controller writes with cluster-wide rights, so without this list
	// whoever may create a Pipeline could run any image in any namespace.
	AllowedNamespaces []string
	// PodSecurity is the least PodSecurity level step pods are built for;
	// a namespace enforcing restricted gets restricted anyway. Empty is
	// baseline.
	PodSecurity PodSecurityLevel
	// MaxRetries bounds a Pipeline's consecutive failed reconciles before
	// its key is dropped until an event; 0 is controller.DefaultMaxRetries.
	// Not a flag: tests lower it to reach the bound quickly.
	MaxRetries int
}

// AnyNamespace in AllowedNamespaces allows every namespace.
const AnyNamespace = "*"

// namespaceAllowed reports whether children may be written in namespace.
func (o *Options) namespaceAllowed(namespace string) bool {
	if namespace == o.DefaultNamespace {
		return true
	}
	for _, n := range o.AllowedNamespaces {
		if n == namespace || n == AnyNamespace {
			return true
		}
	}
	return false
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Workers: 5, DefaultNamespace: "pipeline", PodSecurity: PodSecurityBaseline}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Workers < 1 {
		return fmt.Errorf("--concurrent-pipeline-syncs must be at least 1, got %d", o.Workers)
	}
	if errs := validation.IsDNS1123Label(o.DefaultNamespace); len(errs) > 0 {
		return fmt.Errorf("--pipeline-namespace %q is not a valid namespace name: %s", o.DefaultNamespace, strings.Join(errs, "; "))
	}
	if err := validatePodSecurity(o.PodSecurity); err != nil {
		return err
	}
	for _, n := range o.AllowedNamespaces {
		if n == AnyNamespace {
			continue
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return fmt.Errorf("--pipeline-allowed-namespaces: %q is not a valid namespace name: %s", n, strings.Join(errs, "; "))
		}
	}
	return nil
}
