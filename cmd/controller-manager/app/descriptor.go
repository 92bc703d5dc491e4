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

	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/metrics"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
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
	// Metrics are the controller's own metrics, beyond those every
	// controller has: hack/flagdocs lists them in docs/operations.md.
	Metrics []metrics.Registerable
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
