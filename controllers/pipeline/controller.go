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

// Package pipeline is the Pipeline controller: a cluster-scoped Pipeline
// (distri-infer.ndsl.cn/v1, stored) becomes an NFS PersistentVolume and its
// claim, and per step a Deployment and a Service pinned to the step's nodes,
// chained by the DST environment variable. Status reports what was observed
// at the end of every reconcile. The validating webhook judges requests as
// v1beta1, the design notes' version, whichever version they were sent in.
package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	pipelineinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions/pipeline/v1"
	pipelinelisters "github.com/ndsl/controller-manager/pkg/generated/listers/pipeline/v1"
)

// ControllerName is the name used by --controllers, the queue and metrics.
const ControllerName = "pipeline"

// childBatchPeriod delays the reconcile a child's event asks for, so that the
// burst of changes while a Pipeline's children start (volume and claim bound,
// pods turning ready one by one) is observed in few reconciles and written
// in few status updates. The Job controller batches pod events the same way.
const childBatchPeriod = time.Second

// nodeIndex indexes Pipelines by the names of the nodes their steps are
// pinned to, so that a Node event finds the Pipelines that name it.
const nodeIndex = "pipeline-by-node"

// namespaceIndex indexes Pipelines by the namespace of their children, so
// that a Namespace event finds the Pipelines that target it.
const namespaceIndex = "pipeline-by-namespace"

// childIndex indexes Pipelines by the children they want, as childKey
// strings, so that an object going out of a child's way finds the
// Pipelines it blocked without a list of every Pipeline.
const childIndex = "pipeline-by-child"

// The kinds of children, as childKey spells them.
const (
	kindDeployment = "Deployment"
	kindService    = "Service"
	kindClaim      = "PersistentVolumeClaim"
	kindVolume     = "PersistentVolume"
)

// The resources the controller writes without a child adapter, as its
// consistency store knows them.
var (
	pipelinesResource  = pipelinev1.Resource("pipelines")
	namespacesResource = corev1.Resource("namespaces")
)

var pipelineGroupKind = pipelinev1.Kind("Pipeline")

// Controller keeps the children of every Pipeline.
type Controller struct {
	controller.Base
	// kubeClient creates namespaces: they are not children, and an existing
	// one, even without the controller's label, is never written.
	kubeClient kubernetes.Interface
	crdClient  versioned.Interface
	recorder   record.EventRecorder
	opts       Options

	pipelines       pipelinelisters.PipelineLister
	pipelineIndexer cache.Indexer
	// namespaces and nodes hold metadata only (PartialObjectMetadata): the
	// controller reads their names, labels and deletion timestamps.
	namespaces  cache.GenericLister
	nodes       cache.GenericLister
	volumes     *controller.PersistentVolumes
	claims      *controller.PersistentVolumeClaims
	deployments *controller.Deployments
	services    *controller.Services

	consistency *controller.ConsistencyStore
	// storage, when set, migrates the stored Pipelines (MigrateStorage).
	storage *storageMigration
}

// NewController builds the controller and registers its event handlers and
// the node index on the shared informers; it starts nothing. namespaces and
// nodes are metadata-only informers (metadatainformer).
func NewController(
	pipelines pipelineinformers.PipelineInformer,
	deployments appsinformers.DeploymentInformer,
	services coreinformers.ServiceInformer,
	claims coreinformers.PersistentVolumeClaimInformer,
	volumes coreinformers.PersistentVolumeInformer,
	namespaces informers.GenericInformer,
	nodes informers.GenericInformer,
	kubeClient kubernetes.Interface,
	crdClient versioned.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		Base:            controller.NewBase(cmp.Or(opts.Name, ControllerName), opts.Workers, opts.Queue),
		kubeClient:      kubeClient,
		crdClient:       crdClient,
		recorder:        recorder,
		opts:            opts,
		pipelines:       pipelines.Lister(),
		pipelineIndexer: pipelines.Informer().GetIndexer(),
		namespaces:      namespaces.Lister(),
		nodes:           nodes.Lister(),
		volumes:         controller.NewPersistentVolumes(volumes, kubeClient),
		claims:          controller.NewPersistentVolumeClaims(claims, kubeClient),
		deployments:     controller.NewDeployments(deployments, kubeClient),
		services:        controller.NewServices(services, kubeClient),
		consistency: controller.NewConsistencyStore(map[schema.GroupResource]cache.Store{
			pipelinesResource:                         pipelines.Informer().GetStore(),
			namespacesResource:                        namespaces.Informer().GetStore(),
			corev1.Resource("persistentvolumes"):      volumes.Informer().GetStore(),
			corev1.Resource("persistentvolumeclaims"): claims.Informer().GetStore(),
			appsv1.Resource("deployments"):            deployments.Informer().GetStore(),
			corev1.Resource("services"):               services.Informer().GetStore(),
		}, controller.DefaultConsistencyTimeout),
	}
	c.Synced = []cache.InformerSynced{
		pipelines.Informer().HasSynced, deployments.Informer().HasSynced,
		services.Informer().HasSynced, claims.Informer().HasSynced,
		volumes.Informer().HasSynced, namespaces.Informer().HasSynced,
		nodes.Informer().HasSynced,
	}
	c.Reconcile = c.sync
	// The children's informers hold only labelled objects: a same-name
	// object in a child's way is watched alone, and its going requeues the
	// Pipeline.
	blockers := controller.NewBlockerWatches(c.Queue, 0)
	c.volumes.WatchBlockers(blockers)
	c.claims.WatchBlockers(blockers)
	c.deployments.WatchBlockers(blockers)
	c.services.WatchBlockers(blockers)
	if err := c.Track(c.volumes, c.claims, c.deployments, c.services); err != nil {
		return nil, err
	}
	// The children no longer wanted are found by their controller, not by
	// a label selector over every cached object of the kind.
	if err := errors.Join(c.volumes.IndexByController(pipelineGroupKind), c.claims.IndexByController(pipelineGroupKind),
		c.deployments.IndexByController(pipelineGroupKind), c.services.IndexByController(pipelineGroupKind)); err != nil {
		return nil, err
	}
	c.MaxRetries = opts.MaxRetries
	c.GiveUp = controller.GiveUpEvent(recorder, func(key controller.Key) (runtime.Object, error) {
		return c.pipelines.Get(key.Name)
	}, "Giving up after repeated failures until the Pipeline or a child changes")

	if err := controller.AddIndexers(pipelines.Informer(), cache.Indexers{
		nodeIndex:      indexByNode,
		namespaceIndex: indexByNamespace(opts.DefaultNamespace),
		childIndex:     indexByChild(opts.DefaultNamespace),
	}); err != nil {
		return nil, fmt.Errorf("adding the node, namespace and child indexes to the Pipeline informer: %w", err)
	}
	if err := c.Handle(pipelines.Informer(), pipelineHandler(c.Queue)); err != nil {
		return nil, err
	}
	if err := c.Handle(pipelines.Informer(), c.overlapHandler()); err != nil {
		return nil, err
	}
	// Children, mapped to the Pipeline that controls them, after
	// childBatchPeriod.
	childHandler := controller.EnqueueControllerOf(controller.Batched(c.Queue, childBatchPeriod), pipelineGroupKind, true)
	for _, child := range []struct {
		informer cache.SharedIndexInformer
		kind     string
	}{
		{deployments.Informer(), kindDeployment}, {services.Informer(), kindService},
		{claims.Informer(), kindClaim}, {volumes.Informer(), kindVolume},
	} {
		if err := c.Handle(child.informer, childHandler); err != nil {
			return nil, err
		}
		// A same-name object the Pipeline does not control blocks its
		// child (and, for a Service, the previous step's Deployment),
		// maybe past the retry budget: its going unblocks the Pipeline.
		if err := c.Handle(child.informer, controller.EnqueueUnblocked(c.Queue, c.pipelinesWanting(child.kind))); err != nil {
			return nil, err
		}
	}
	// Only a node appearing or going changes what a Pipeline reports; its
	// status heartbeats do not, so updates are not mapped.
	nodeHandler := controller.EnqueueMapped(c.Queue, c.pipelinesOnNode)
	nodeHandler.UpdateFunc = nil
	if err := c.Handle(nodes.Informer(), nodeHandler); err != nil {
		return nil, err
	}
	// A missing namespace blocks the Pipelines that target it, and so does
	// a terminating one, maybe past their retry budget: its creation or
	// deletion unblocks them, and a deletion refuses them.
	namespaceHandler := controller.EnqueueMapped(c.Queue, c.pipelinesInNamespace)
	namespaceHandler.UpdateFunc = nil
	if err := c.Handle(namespaces.Informer(), namespaceHandler); err != nil {
		return nil, err
	}
	// A namespace turning restricted (or back) changes the step pods.
	if err := c.Handle(namespaces.Informer(), namespaceEnforceHandler(c.Queue, c.pipelinesInNamespace)); err != nil {
		return nil, err
	}
	return c, nil
}

// pipelineHandler enqueues Pipelines on add, delete, resync and spec
// changes. An update that leaves the generation alone changes only status or
// metadata, most often the controller's own status write: reconciling it at
// once would only observe the children mid-way and write status again.
func pipelineHandler(q controller.Queue) cache.ResourceEventHandlerDetailedFuncs {
	h := controller.EnqueueObject(q)
	enqueue := h.UpdateFunc
	h.UpdateFunc = func(oldObj, newObj any) {
		o, okOld := oldObj.(*pipelinev1.Pipeline)
		n, okNew := newObj.(*pipelinev1.Pipeline)
		if okOld && okNew && o.Generation == n.Generation && !controller.IsResync(oldObj, newObj) {
			return
		}
		enqueue(oldObj, newObj)
	}
	return h
}

// indexByNode is the node index function.
func indexByNode(obj any) ([]string, error) {
	p, ok := obj.(*pipelinev1.Pipeline)
	if !ok {
		return nil, nil
	}
	return pipelineNodes(p), nil
}

// pipelinesOnNode maps a Node to the Pipelines whose steps name it.
func (c *Controller) pipelinesOnNode(node metav1.Object) []controller.Key {
	return c.pipelinesIndexed(nodeIndex, node.GetName())
}

// pipelinesIndexed is the keys of the Pipelines index maps value to.
func (c *Controller) pipelinesIndexed(index, value string) []controller.Key {
	objs, err := c.pipelineIndexer.ByIndex(index, value)
	if err != nil {
		return nil
	}
	keys := make([]controller.Key, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*pipelinev1.Pipeline); ok {
			keys = append(keys, controller.Key{Name: p.Name})
		}
	}
	return keys
}

// indexByChild is the child index function.
func indexByChild(defaultNamespace string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		p, ok := obj.(*pipelinev1.Pipeline)
		if !ok {
			return nil, nil
		}
		return wantedChildKeys(p, defaultNamespace), nil
	}
}

// wantedChildKeys are the childKeys of every child p wants.
func wantedChildKeys(p *pipelinev1.Pipeline, defaultNamespace string) []string {
	namespace := childNamespace(p, defaultNamespace)
	storage := storageName(p, namespace)
	keys := []string{childKey(kindVolume, "", storage), childKey(kindClaim, namespace, storage)}
	for _, s := range p.Spec.Steps {
		name := StepName(p.Name, s.Model)
		keys = append(keys, childKey(kindDeployment, namespace, name), childKey(kindService, namespace, name))
	}
	return keys
}

// childKey is the child index value of an object of kind.
func childKey(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

// pipelinesWanting maps an object of kind to the Pipelines that want a
// child of that kind, namespace and name.
func (c *Controller) pipelinesWanting(kind string) func(obj metav1.Object) []controller.Key {
	return func(obj metav1.Object) []controller.Key {
		return c.pipelinesIndexed(childIndex, childKey(kind, obj.GetNamespace(), obj.GetName()))
	}
}

// indexByNamespace is the namespace index function.
func indexByNamespace(defaultNamespace string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		p, ok := obj.(*pipelinev1.Pipeline)
		if !ok {
			return nil, nil
		}
		return []string{childNamespace(p, defaultNamespace)}, nil
	}
}

// pipelinesInNamespace maps a Namespace to the Pipelines whose children it
// holds.
func (c *Controller) pipelinesInNamespace(ns metav1.Object) []controller.Key {
	return c.pipelinesIndexed(namespaceIndex, ns.GetName())
}
