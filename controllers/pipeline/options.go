/*
Copyright The NDSL controller-manager Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// Options configures the Pipeline controller. The manager binds them to
// flags; tests set them directly.
type Options struct {
	// Common are the options every controller has (workers, queue, retries).
	controller.Common
	// DefaultNamespace holds the children of Pipelines whose
	// spec.namespace is empty.
	DefaultNamespace string
	// AllowedNamespaces are the namespaces besides DefaultNamespace that a
	// Pipeline's spec.namespace may name; "*" allows every namespace but
	// the system ones and ManagerNamespace, which only an explicit entry
	// allows. The controller writes with cluster-wide rights, so without
	// this list whoever may create a Pipeline could run any image in any
	// namespace.
	AllowedNamespaces []string
	// ManagerNamespace is the manager's own namespace (its Leases and
	// certificate Secrets), which "*" never includes. Not a flag: the
	// wiring sets it to the namespace the manager resolves for itself.
	ManagerNamespace string
	// CreateNamespaces lets the controller create a missing target
	// namespace. Off, a Pipeline whose namespace does not exist gets no
	// children until someone creates it.
	CreateNamespaces bool
	// MaxReplicas bounds a step's spec.replicas; 0 is no bound.
	MaxReplicas int32
	// AllowedNFS are the NFS exports a Pipeline's modelStorage may name,
	// each SERVER (every share) or SERVER:/share/prefix; empty allows every
	// export. The controller writes the PersistentVolume itself, so without
	// this list a Pipeline author mounts any export, which PodSecurity
	// would forbid them as an inline volume.
	AllowedNFS []string
	// AllowedImages are the registry or repository prefixes a step's image
	// must start with, as the kubelet resolves it; empty allows every image.
	AllowedImages []string
	// PodSecurity is the least PodSecurity level step pods are built for;
	// a namespace enforcing restricted gets restricted anyway. Empty is
	// baseline.
	PodSecurity PodSecurityLevel
}

// AnyNamespace in AllowedNamespaces allows every namespace.
const AnyNamespace = "*"

// reservedNamespaces are never included by AnyNamespace: what runs there
// is the cluster's own, and a Pipeline's children there would act as it.
var reservedNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// namespaceAllowed reports whether children may be written in namespace.
// AnyNamespace leaves out the reserved namespaces and the manager's own; an
// explicit entry (or DefaultNamespace) is the administrator's decision.
func (o *Options) namespaceAllowed(namespace string) bool {
	if namespace == o.DefaultNamespace || slices.Contains(o.AllowedNamespaces, namespace) {
		return true
	}
	return slices.Contains(o.AllowedNamespaces, AnyNamespace) &&
		!slices.Contains(reservedNamespaces, namespace) && namespace != o.ManagerNamespace
}

// namespaceRefusal says why namespace may not hold a Pipeline's children.
func (o *Options) namespaceRefusal(namespace string) error {
	if o.namespaceAllowed(namespace) {
		return nil
	}
	if slices.Contains(o.AllowedNamespaces, AnyNamespace) {
		return fmt.Errorf("namespace %s is not allowed for Pipelines (--pipeline-allowed-namespaces: \"*\" leaves out %s and the manager's own namespace unless listed)",
			namespace, strings.Join(reservedNamespaces, ", "))
	}
	return fmt.Errorf("namespace %s is not allowed for Pipelines (--pipeline-allowed-namespaces)", namespace)
}

// tooManyReplicas says why the step serving model may not run: it asks
// for more replicas than maxReplicas.
func tooManyReplicas(maxReplicas int32, model string, replicas *int32) error {
	if maxReplicas == 0 || replicas == nil || *replicas <= maxReplicas {
		return nil
	}
	return fmt.Errorf("step %s asks for %d replicas, more than the %d allowed (--pipeline-max-replicas)", model, *replicas, maxReplicas)
}

// refusal says why the controller must write nothing for p, whose children
// go to namespace, and the Degraded reason; nil when every allowlist lets
// it through. The first refusal is reported: a namespace, then the
// storage, then the first forbidden image, then replicas over the bound,
// so that one fix at a time shows.
// A forbidden image refuses the whole Pipeline: its steps form one chain,
// and half a chain serves nothing.
func (o *Options) refusal(p *pipelinev1.Pipeline, namespace string) (string, error) {
	if err := o.namespaceRefusal(namespace); err != nil {
		return pipelinev1.ReasonNamespaceNotAllowed, fmt.Errorf("%w; nothing is created", err)
	}
	ms := &p.Spec.ModelStorage
	if err := nfsRefusal(o.AllowedNFS, ms.NFSServer(), ms.NFSPath()); err != nil {
		return pipelinev1.ReasonStorageNotAllowed, fmt.Errorf("%w; nothing is created", err)
	}
	for _, step := range p.Spec.Steps {
		if err := imageRefusal(o.AllowedImages, step.Image); err != nil {
			return pipelinev1.ReasonImageNotAllowed, fmt.Errorf("step %s: %w; nothing is created", step.Model, err)
		}
	}
	for _, step := range p.Spec.Steps {
		if err := tooManyReplicas(o.MaxReplicas, step.Model, step.Replicas); err != nil {
			return pipelinev1.ReasonTooManyReplicas, fmt.Errorf("%w; nothing is created", err)
		}
	}
	return "", nil
}

// DefaultOptions returns the defaults of the flags.
func DefaultOptions() Options {
	return Options{Common: controller.Common{Workers: 5}, DefaultNamespace: "pipeline", PodSecurity: PodSecurityBaseline, MaxReplicas: 100}
}

// Validate checks the options.
func (o *Options) Validate() error {
	if errs := validation.IsDNS1123Label(o.DefaultNamespace); len(errs) > 0 {
		return fmt.Errorf("--pipeline-namespace %q is not a valid namespace name: %s", o.DefaultNamespace, strings.Join(errs, "; "))
	}
	if err := validatePodSecurity(o.PodSecurity); err != nil {
		return err
	}
	if o.MaxReplicas < 0 {
		return fmt.Errorf("--pipeline-max-replicas must be 0 (no limit) or more, got %d", o.MaxReplicas)
	}
	for _, n := range o.AllowedNamespaces {
		if n == AnyNamespace {
			continue
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return fmt.Errorf("--pipeline-allowed-namespaces: %q is not a valid namespace name: %s", n, strings.Join(errs, "; "))
		}
	}
	if err := validateAllowedNFS(o.AllowedNFS); err != nil {
		return err
	}
	return validateAllowedImages(o.AllowedImages)
}

// AddFlags binds the options to their flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DefaultNamespace, "pipeline-namespace", o.DefaultNamespace,
		"Namespace for the children of Pipelines without spec.namespace; the install creates it (the controller only with --pipeline-create-namespaces).")
	fs.StringSliceVar(&o.AllowedNamespaces, "pipeline-allowed-namespaces", o.AllowedNamespaces,
		"Namespaces besides --pipeline-namespace that a Pipeline's spec.namespace may name; \"*\" allows any but kube-system, kube-public, "+
			"kube-node-lease and the manager's own namespace, which only an explicit entry allows. "+
			"A Pipeline naming another namespace is refused by the validating webhook and gets no children, Degraded=True with reason NamespaceNotAllowed and a Warning event.")
	fs.BoolVar(&o.CreateNamespaces, "pipeline-create-namespaces", o.CreateNamespaces,
		"Create a Pipeline's target namespace when it is missing (and again when it is deleted). Off, such a Pipeline gets no children "+
			"and Degraded=True with reason NamespaceNotFound until someone creates the namespace.")
	fs.Int32Var(&o.MaxReplicas, "pipeline-max-replicas", o.MaxReplicas,
		"Most replicas a Pipeline step may ask for; 0 is no limit. A step asking for more is refused by the validating webhook "+
			"and the Pipeline gets no children, Degraded=True with reason TooManyReplicas and a Warning event.")
	fs.StringSliceVar(&o.AllowedNFS, "pipeline-allowed-nfs", o.AllowedNFS,
		"NFS exports a Pipeline's modelStorage may name, each SERVER (any share) or SERVER:/share/prefix (that path and below); "+
			"comma-separated or repeated. Empty allows every export; set it in production. A Pipeline naming another export is refused "+
			"by the validating webhook and gets no children, Degraded=True with reason StorageNotAllowed and a Warning event.")
	fs.StringSliceVar(&o.AllowedImages, "pipeline-allowed-images", o.AllowedImages,
		"Registry (registry.example.com/) or repository (docker.io/library/nginx) prefixes every step image must start with, "+
			"once normalised as the kubelet resolves it (nginx:latest is docker.io/library/nginx:latest); comma-separated or repeated. "+
			"Empty allows every image. A Pipeline with another image is refused by the validating webhook and gets no children, "+
			"Degraded=True with reason ImageNotAllowed and a Warning event.")
	fs.StringVar((*string)(&o.PodSecurity), "pipeline-pod-security", string(o.PodSecurity),
		"PodSecurity level step pods are built to pass: \"baseline\" (seccomp RuntimeDefault, no privilege escalation, the image's own user, root included) "+
			"or \"restricted\" (also runAsNonRoot and every capability dropped: images must run as a non-root numeric USER). "+
			"A namespace labelled pod-security.kubernetes.io/enforce=restricted always gets restricted step pods. Step pods never mount a ServiceAccount token.")
}
