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
	"fmt"
	"math/rand/v2"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/factories"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	crdscheme "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/scheme"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
	"github.com/ndsl/controller-manager/pkg/ha"
	"github.com/ndsl/controller-manager/pkg/leaseguard"
	"github.com/ndsl/controller-manager/pkg/shard"
	"github.com/ndsl/controller-manager/pkg/shardclient"
	"github.com/ndsl/controller-manager/pkg/storageversion"
)

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
	// Shard is that shard unit's range; nil for a whole controller.
	Shard *shard.Shard

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

// StorageMigrationClients are the clients the named controller migrates its
// stored objects with (pkg/storageversion), for the one unit that does: the
// whole controller, or with --shards the unit of shard 0, whose clients,
// unlike its informers, are not sharded and so list every object. Every
// other unit gets nil clients.
func (c ControllerContext) StorageMigrationClients(controller string) (storageversion.CRDClient, versioned.Interface, error) {
	if c.Shard != nil && c.Shard.Index != 0 {
		return nil, nil, nil
	}
	crds, err := apiextensionsclient.NewForConfig(c.ClientConfig(controller))
	if err != nil {
		return nil, nil, err
	}
	objects, err := c.CRDClient(controller)
	if err != nil {
		return nil, nil, err
	}
	return crds.ApiextensionsV1().CustomResourceDefinitions(), objects, nil
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

// controllerContext builds the clients and the ONE shared informer factory
// per kind of client that every controller of a set shares.
//
// For a shard unit u the factories are the unit's own, and their informers
// list and watch only its range (pkg/shardclient).
func (m *Manager) controllerContext(u *ha.Unit) (ControllerContext, error) {
	cc := ControllerContext{KubeConfig: m.config, Options: m.opts}
	var kubeClient kubernetes.Interface
	kubeClient, err := kubernetes.NewForConfig(cc.ClientConfig("shared-informers"))
	if err != nil {
		return cc, fmt.Errorf("building the informers' client: %w", err)
	}
	var crdClient versioned.Interface
	if crdClient, err = versioned.NewForConfig(cc.customResourceConfig("shared-informers")); err != nil {
		return cc, fmt.Errorf("building the custom resource informers' client: %w", err)
	}
	metadataClient, err := metadata.NewForConfig(cc.ClientConfig("shared-informers"))
	if err != nil {
		return cc, fmt.Errorf("building the metadata informers' client: %w", err)
	}
	if u != nil {
		cc.Unit, cc.Shard = u.Name, u.Shard
		lists := shardclient.NewLists(*u.Shard, m.descriptor(u.Controller).ShardKeys)
		kubeClient, crdClient = shardclient.Kube(kubeClient, lists), shardclient.CRD(crdClient, lists)
	}
	// Children come from ManagedInformerFactory, the Ingress controller's
	// Services from their own filtered factory (ingressServices); Kube is
	// for a built-in kind a controller needs whole and cluster-wide.
	cc.factories = factories.New(kubeClient, crdClient, metadataClient, resyncPeriod(m.opts.Generic.MinResyncPeriod), controller.Compact)
	cc.InformerFactory, cc.CRDInformerFactory, cc.MetadataInformerFactory = cc.factories.Kube, cc.factories.CRD, cc.factories.Metadata
	return cc, nil
}

// resyncPeriod spreads resyncs of different managers between min and 2×min,
// as kube-controller-manager does.
func resyncPeriod(minPeriod time.Duration) time.Duration {
	return time.Duration(float64(minPeriod) * (1 + rand.Float64()))
}

// Scheme resolves the kinds of the objects events are recorded on: the
// built-in types plus this project's own.
var Scheme = scheme.Scheme

func init() {
	utilruntime.Must(crdscheme.AddToScheme(Scheme))
}
