// Package pipeline is the Pipeline controller: a cluster-scoped Pipeline
// becomes an NFS PersistentVolume and its claim, and per step a Deployment and
// a Service pinned to the step's nodes, chained by the DST environment
// variable. Status reports what was observed at the end of every reconcile.
package pipeline

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	pipelineinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions/pipeline/v1beta1"
	pipelinelisters "github.com/ndsl/controller-manager/pkg/generated/listers/pipeline/v1beta1"
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

// Kinds of children, as used in events and errors.
const (
	kindNamespace  = "Namespace"
	kindVolume     = "PersistentVolume"
	kindClaim      = "PersistentVolumeClaim"
	kindDeployment = "Deployment"
	kindService    = "Service"
)

// The resources the controller writes, as its consistency store knows them.
var (
	pipelinesResource   = pipelinev1beta1.Resource("pipelines")
	namespacesResource  = corev1.Resource("namespaces")
	volumesResource     = corev1.Resource("persistentvolumes")
	claimsResource      = corev1.Resource("persistentvolumeclaims")
	deploymentsResource = appsv1.Resource("deployments")
	servicesResource    = corev1.Resource("services")
)

var pipelineGroupKind = pipelinev1beta1.Kind("Pipeline")

// Controller keeps the children of every Pipeline.
type Controller struct {
	kubeClient kubernetes.Interface
	crdClient  versioned.Interface
	recorder   record.EventRecorder
	opts       Options

	pipelines       pipelinelisters.PipelineLister
	pipelineIndexer cache.Indexer
	deployments     appslisters.DeploymentLister
	services        corelisters.ServiceLister
	claims          corelisters.PersistentVolumeClaimLister
	volumes         corelisters.PersistentVolumeLister
	namespaces      corelisters.NamespaceLister
	nodes           corelisters.NodeLister
	cachesSynced    []cache.InformerSynced

	consistency *controller.ConsistencyStore
	queue       controller.Queue
}

// NewController builds the controller and registers its event handlers and
// the node index on the shared informers; it starts nothing.
func NewController(
	ctx context.Context,
	pipelines pipelineinformers.PipelineInformer,
	deployments appsinformers.DeploymentInformer,
	services coreinformers.ServiceInformer,
	claims coreinformers.PersistentVolumeClaimInformer,
	volumes coreinformers.PersistentVolumeInformer,
	namespaces coreinformers.NamespaceInformer,
	nodes coreinformers.NodeInformer,
	kubeClient kubernetes.Interface,
	crdClient versioned.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		kubeClient:      kubeClient,
		crdClient:       crdClient,
		recorder:        recorder,
		opts:            opts,
		pipelines:       pipelines.Lister(),
		pipelineIndexer: pipelines.Informer().GetIndexer(),
		deployments:     deployments.Lister(),
		services:        services.Lister(),
		claims:          claims.Lister(),
		volumes:         volumes.Lister(),
		namespaces:      namespaces.Lister(),
		nodes:           nodes.Lister(),
		cachesSynced: []cache.InformerSynced{
			pipelines.Informer().HasSynced, deployments.Informer().HasSynced,
			services.Informer().HasSynced, claims.Informer().HasSynced,
			volumes.Informer().HasSynced, namespaces.Informer().HasSynced,
			nodes.Informer().HasSynced,
		},
		consistency: controller.NewConsistencyStore(map[schema.GroupResource]cache.Store{
			pipelinesResource:   pipelines.Informer().GetStore(),
			namespacesResource:  namespaces.Informer().GetStore(),
			volumesResource:     volumes.Informer().GetStore(),
			claimsResource:      claims.Informer().GetStore(),
			deploymentsResource: deployments.Informer().GetStore(),
			servicesResource:    services.Informer().GetStore(),
		}, controller.DefaultConsistencyTimeout),
		queue: controller.NewQueue(ControllerName),
	}

	if err := pipelines.Informer().AddIndexers(cache.Indexers{nodeIndex: indexByNode}); err != nil {
		return nil, fmt.Errorf("adding the node index to the Pipeline informer: %w", err)
	}
	if _, err := pipelines.Informer().AddEventHandler(pipelineHandler(c.queue)); err != nil {
		return nil, err
	}
	// Children, mapped to the Pipeline that controls them, after
	// childBatchPeriod.
	childHandler := controller.EnqueueControllerOf(batchedQueue{Queue: c.queue, period: childBatchPeriod}, pipelineGroupKind, true)
	for _, informer := range []cache.SharedIndexInformer{deployments.Informer(), services.Informer(), claims.Informer(), volumes.Informer()} {
		if _, err := informer.AddEventHandler(childHandler); err != nil {
			return nil, err
		}
	}
	// Only a node appearing or going changes what a Pipeline reports; its
	// status heartbeats do not, so updates are not mapped.
	nodeHandler := controller.EnqueueMapped(c.queue, c.pipelinesOnNode)
	nodeHandler.UpdateFunc = nil
	if _, err := nodes.Informer().AddEventHandler(nodeHandler); err != nil {
		return nil, err
	}
	return c, nil
}

// pipelineHandler enqueues Pipelines on add, delete, resync and spec
// changes. An update that leaves the generation alone changes only status or
// metadata, most often the controller's own status write: reconciling it at
// once would only observe the children mid-way and write status again.
func pipelineHandler(q controller.Queue) cache.ResourceEventHandlerFuncs {
	h := controller.EnqueueObject(q)
	enqueue := h.UpdateFunc
	h.UpdateFunc = func(oldObj, newObj any) {
		o, okOld := oldObj.(*pipelinev1beta1.Pipeline)
		n, okNew := newObj.(*pipelinev1beta1.Pipeline)
		if okOld && okNew && o.Generation == n.Generation && !controller.IsResync(oldObj, newObj) {
			return
		}
		enqueue(oldObj, newObj)
	}
	return h
}

// batchedQueue adds keys after a period. The delaying queue keeps one
// pending add per key, so every event within the period joins the first.
type batchedQueue struct {
	controller.Queue
	period time.Duration
}

// Add schedules key after the period.
func (q batchedQueue) Add(key controller.Key) { q.AddAfter(key, q.period) }

// indexByNode is the node index function.
func indexByNode(obj any) ([]string, error) {
	p, ok := obj.(*pipelinev1beta1.Pipeline)
	if !ok {
		return nil, nil
	}
	return pipelineNodes(p), nil
}

// pipelinesOnNode maps a Node to the Pipelines whose steps name it.
func (c *Controller) pipelinesOnNode(node metav1.Object) []controller.Key {
	objs, err := c.pipelineIndexer.ByIndex(nodeIndex, node.GetName())
	if err != nil {
		return nil
	}
	keys := make([]controller.Key, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*pipelinev1beta1.Pipeline); ok {
			keys = append(keys, controller.Key{Name: p.Name})
		}
	}
	return keys
}

// Name implements the manager's Controller.
func (c *Controller) Name() string { return ControllerName }

// QueueLen reports the queue depth for /debug/controllers.
func (c *Controller) QueueLen() int { return c.queue.Len() }

// Run waits for the caches, then reconciles until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.cachesSynced...) {
		return
	}
	w := controller.Worker{
		Name:      ControllerName,
		Queue:     c.queue,
		Reconcile: c.sync,
		OnGiveUp:  c.giveUp,
	}
	w.Run(ctx, c.opts.Workers)
}

// giveUp tells the Pipeline's owner that it could not be reconciled.
func (c *Controller) giveUp(_ context.Context, key controller.Key, err error) {
	if p, getErr := c.pipelines.Get(key.Name); getErr == nil {
		c.recorder.Eventf(p, corev1.EventTypeWarning, "ReconcileFailed", "Giving up after repeated failures until the Pipeline or a child changes: %v", err)
	}
}
