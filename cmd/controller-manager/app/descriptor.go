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

package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/factories"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/shard"
)

// Controller is what a constructor returns: something that runs until its
// context is done and has a name.
type Controller interface {
	Name() string
	// Run blocks until ctx is done and the controller's reconciles in
	// flight have finished.
	Run(ctx context.Context)
}

// CacheSyncer is implemented by controllers that say whether the informers
// they read have synced (pkg/controller.Base does). In per-controller mode a
// replica offers such a controller to the others once they have, whatever
// the other controllers' caches do; one that does not say waits for every
// informer of the replica.
type CacheSyncer interface {
	HasSynced() bool
}

// QueueLengther is implemented by controllers that can report their queue
// depth on /debug/controllers.
type QueueLengther interface {
	QueueLen() int
}

// ControllerContext is what every constructor gets: clients, the shared
// informer factories and the options of all controllers.
type ControllerContext struct {
	// KubeConfig is the manager's client config for built-in types
	// (protobuf); ClientConfig gives a per-controller copy.
	KubeConfig *rest.Config
	// InformerFactory is the one shared factory for built-in types.
	InformerFactory informers.SharedInformerFactory
	// CRDInformerFactory is the one shared factory for this project's own
	// API groups (App, Pipeline).
	CRDInformerFactory crdinformers.SharedInformerFactory
	// MetadataInformerFactory is the one shared factory of metadata-only
	// informers, for kinds a controller reads only the metadata of
	// (Namespaces, Nodes), cluster-wide.
	MetadataInformerFactory metadatainformer.SharedInformerFactory
	// Options holds every controller's options.
	Options *options.Options
	// Unit is the name the controller runs under when it is one shard of
	// a controller (<controller>-<i>-of-<n>): its queue's and its clients'.
	// Empty otherwise.
	Unit string

	// factories are the set's: InformerFactory, CRDInformerFactory and
	// MetadataInformerFactory, and the filtered ones by name.
	factories *factories.Factories

	recorders func(component string) record.EventRecorder
	// guard, when set, is the lease guard every client goes through: it
	// refuses writes without a fresh Lease.
	guard *leaseguard.Guard
}

// ClientConfig returns a copy of the client config whose user agent names the
// controller, so the API server's audit log and metrics tell controllers apart.
func (c ControllerContext) ClientConfig(controller string) *rest.Config {
	cfg := rest.AddUserAgent(rest.CopyConfig(c.KubeConfig), "controller-manager/"+controller)
	if c.guard != nil {
		cfg = c.guard.ClientConfig(cfg)
	}
	return cfg
}

// Complete sets the common options the manager decides for each build:
// the name the controller runs under (UnitName) and its queue's order.
func (c ControllerContext) Complete(common *controller.Common, controller string) {
	common.Name = c.UnitName(controller)
	if c.Options != nil {
		common.Queue = c.Options.Generic.ControllerQueue
	}
}

// UnitName is the name a controller's queue, metrics and clients go by:
// the shard unit's when it runs as one, else the controller's own.
func (c ControllerContext) UnitName(controller string) string {
	if c.Unit != "" {
		return c.Unit
	}
	return controller
}

// KubeClient returns a clientset for the named controller.
func (c ControllerContext) KubeClient(controller string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.ClientConfig(controller))
}

// CRDClient returns a clientset for this project's own API groups, for the
// named controller, in --custom-resource-content-type.
func (c ControllerContext) CRDClient(controller string) (versioned.Interface, error) {
	return versioned.NewForConfig(c.customResourceConfig(controller))
}

// customResourceConfig is ClientConfig in the custom resources' encoding.
func (c ControllerContext) customResourceConfig(controller string) *rest.Config {
	var contentType string
	if c.Options != nil {
		contentType = c.Options.Generic.CustomResourceContentType
	}
	return customResourceConfig(c.ClientConfig(controller), contentType)
}

// FilteredInformerFactory returns the informer factory for built-in types
// named name, made on first use with the shared factory's client, resync and
// options followed by opts (a label selector, a transform of its own): for
// informers the shared factory cannot give, such as the pods with a label.
// The manager starts, waits for and stops it with the shared factories; a
// controller rebuilt later gets the same factory, already started.
func (c ControllerContext) FilteredInformerFactory(name string, opts ...informers.SharedInformerOption) informers.SharedInformerFactory {
	return c.factories.Filtered(name, opts...)
}

// ManagedInformerFactory returns the informer factory of the children: it
// lists and watches only objects with controller.ManagedByLabel, so its
// caches grow with what the manager manages, not with the cluster. Every
// controller reads its children's kinds from it; a same-name object without
// the label (a blocker) is read live and watched alone (controller.BlockerWatches).
func (c ControllerContext) ManagedInformerFactory() informers.SharedInformerFactory {
	return c.factories.Filtered(managedFactoryName,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managedSelector }))
}

const managedFactoryName = "managed"

var managedSelector = labels.SelectorFromSet(labels.Set{controller.ManagedByLabel: controller.ManagedByValue}).String()

// EventRecorder returns a recorder whose events name the controller as their source.
func (c ControllerContext) EventRecorder(controller string) record.EventRecorder {
	return c.recorders(controller)
}

// Constructor builds a controller, registering the informers it needs with
// the shared factories. It must not start anything.
type Constructor func(ctx context.Context, cc ControllerContext) (Controller, error)

// ControllerDescriptor registers a controller with the manager.
type ControllerDescriptor struct {
	// Name is the canonical name used by --controllers.
	Name string
	// Aliases are other names --controllers accepts for it.
	Aliases []string
	// DisabledByDefault controllers run only when named in --controllers.
	DisabledByDefault bool
	// Help says in a sentence what the controller does, in Markdown: the
	// README's table of controllers (hack/flagdocs) and --help show it.
	Help string
	// New builds the controller.
	New Constructor
	// Role is the RBAC the controller needs; hack/rbacgen renders it into
	// manifests/ and the chart (make generate).
	Role controller.Role
	// Options points to the controller's options in the manager's (nil:
	// none). The registry binds their flags in the flag set "<name>
	// controller", with --concurrent-<name>-syncs when their defaults give
	// the controller workers, and validates them.
	Options func(*options.Options) controller.Options
	// ShardKeys, for a controller --shards can split, place the objects of
	// each resource its informers list in a shard; resources not named
	// are read whole. Nil: the controller is not split.
	ShardKeys map[string]shard.Key
}

// Registry is the set of controllers the manager knows.
type Registry []ControllerDescriptor

// Names returns the canonical names, sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for _, d := range r {
		names = append(names, d.Name)
	}
	sort.Strings(names)
	return names
}

// DisabledByDefault returns the canonical names of the controllers that are off unless asked for.
func (r Registry) DisabledByDefault() []string {
	var names []string
	for _, d := range r {
		if d.DisabledByDefault {
			names = append(names, d.Name)
		}
	}
	sort.Strings(names)
	return names
}

// Enabled applies kube-controller-manager's --controllers semantics and
// returns the enabled descriptors in registry order: '*' turns on every
// controller not disabled by default, 'foo' turns foo on, '-foo' turns it
// off, and the first mention of a controller wins. Aliases count as their
// canonical name. An unknown name is an error listing the known ones.
//
// The decision is that of k8s.io/controller-manager/app.IsControllerEnabled,
// which knows no aliases or unknown names; importing it would also link the
// generic API server and the etcd client into the binary.
func (r Registry) Enabled(requested []string) ([]ControllerDescriptor, error) {
	canonical := map[string]string{}
	for _, d := range r {
		canonical[d.Name] = d.Name
		for _, a := range d.Aliases {
			canonical[a] = d.Name
		}
	}

	star := false
	decided := map[string]bool{}
	for _, entry := range requested {
		entry = strings.TrimSpace(entry)
		if entry == "*" {
			star = true
			continue
		}
		name, enable := strings.CutPrefix(entry, "-")
		enable = !enable
		c, ok := canonical[name]
		if !ok {
			return nil, fmt.Errorf("unknown controller %q in --controllers; known controllers: %s", entry, strings.Join(r.Names(), ", "))
		}
		if _, seen := decided[c]; !seen {
			decided[c] = enable
		}
	}

	var enabled []ControllerDescriptor
	for _, d := range r {
		on, explicit := decided[d.Name]
		if !explicit {
			on = star && !d.DisabledByDefault
		}
		if on {
			enabled = append(enabled, d)
		}
	}
	return enabled, nil
}

// Flags returns the manager's named flag sets: o's own and every
// controller's, bound to o.
func (r Registry) Flags(o *options.Options) cliflag.NamedFlagSets {
	fss := o.Flags(r.Names(), r.DisabledByDefault())
	for _, d := range r {
		if d.Options == nil {
			continue
		}
		fs := fss.FlagSet(d.Name + " controller")
		own := d.Options(o)
		if c := own.CommonOptions(); c.Workers > 0 {
			fs.IntVar(&c.Workers, workersFlag(d.Name), c.Workers, fmt.Sprintf("Objects the %s controller reconciles at once.", d.Name))
		}
		own.AddFlags(fs)
	}
	return fss
}

// ValidateOptions returns every problem with o, the controllers' options
// included.
func (r Registry) ValidateOptions(o *options.Options) error {
	errs := []error{o.Validate()}
	defaults := options.NewOptions()
	for _, d := range r {
		if d.Options == nil {
			continue
		}
		own := d.Options(o)
		if d.Options(defaults).CommonOptions().Workers > 0 && own.CommonOptions().Workers < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1, got %d", workersFlag(d.Name), own.CommonOptions().Workers))
		}
		errs = append(errs, own.Validate())
	}
	return errors.Join(errs...)
}

func workersFlag(controller string) string { return "concurrent-" + controller + "-syncs" }

// validate reports registry mistakes: duplicate names or aliases.
func (r Registry) validate() error {
	seen := map[string]string{}
	for _, d := range r {
		for _, n := range slices.Concat([]string{d.Name}, d.Aliases) {
			if other, dup := seen[n]; dup {
				return fmt.Errorf("controller name %q registered by both %s and %s", n, other, d.Name)
			}
			seen[n] = d.Name
		}
		if d.New == nil {
			return fmt.Errorf("controller %s has no constructor", d.Name)
		}
	}
	return nil
}
