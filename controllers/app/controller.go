// Package app is the App controller: an App (ingress.example.com/v1beta1)
// gets a Deployment running its image and, when it asks, a Service and an
// Ingress, all named after it and controlled by it. The controller writes
// only what differs from the desired state, with server-side apply for
// drift, and reports what it observed in the App's status.
package app

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	appinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions/app/v1beta1"
	applisters "github.com/ndsl/controller-manager/pkg/generated/listers/app/v1beta1"
)

// ControllerName is the name used by --controllers, the queue and metrics.
const ControllerName = "app"

// The resources the controller writes, as its consistency store knows them.
var (
	appsResource        = appv1beta1.SchemeGroupVersion.WithResource("apps").GroupResource()
	deploymentsResource = schema.GroupResource{Group: "apps", Resource: "deployments"}
	servicesResource    = schema.GroupResource{Resource: "services"}
	ingressesResource   = schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}
)

// Controller keeps every App's Deployment, Service and Ingress as its spec
// asks, and its status as observed.
type Controller struct {
	kubeClient kubernetes.Interface
	appClient  versioned.Interface
	recorder   record.EventRecorder
	opts       Options

	apps        applisters.AppLister
	deployments appslisters.DeploymentLister
	services    corelisters.ServiceLister
	ingresses   networkinglisters.IngressLister
	synced      []cache.InformerSynced

	consistency *controller.ConsistencyStore
	queue       controller.Queue
	now         func() time.Time
}

// NewController builds the controller and registers its event handlers on
// the shared informers; it starts nothing.
func NewController(
	ctx context.Context,
	apps appinformers.AppInformer,
	deployments appsinformers.DeploymentInformer,
	services coreinformers.ServiceInformer,
	ingresses networkinginformers.IngressInformer,
	kubeClient kubernetes.Interface,
	appClient versioned.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		kubeClient:  kubeClient,
		appClient:   appClient,
		recorder:    recorder,
		opts:        opts,
		apps:        apps.Lister(),
		deployments: deployments.Lister(),
		services:    services.Lister(),
		ingresses:   ingresses.Lister(),
		synced: []cache.InformerSynced{
			apps.Informer().HasSynced,
			deployments.Informer().HasSynced,
			services.Informer().HasSynced,
			ingresses.Informer().HasSynced,
		},
		consistency: controller.NewConsistencyStore(map[schema.GroupResource]cache.Store{
			appsResource:        apps.Informer().GetStore(),
			deploymentsResource: deployments.Informer().GetStore(),
			servicesResource:    services.Informer().GetStore(),
			ingressesResource:   ingresses.Informer().GetStore(),
		}, controller.DefaultConsistencyTimeout),
		queue: controller.NewQueue(ControllerName),
		now:   time.Now,
	}
	// Apps, resyncs included: a periodic resync re-checks every App.
	if _, err := apps.Informer().AddEventHandler(controller.EnqueueObject(c.queue)); err != nil {
		return nil, err
	}
	// Children, mapped to the App that controls them.
	owner := appv1beta1.SchemeGroupVersion.WithKind("App").GroupKind()
	for _, informer := range []cache.SharedIndexInformer{deployments.Informer(), services.Informer(), ingresses.Informer()} {
		if _, err := informer.AddEventHandler(controller.EnqueueControllerOf(c.queue, owner, false)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Name implements the manager's Controller.
func (c *Controller) Name() string { return ControllerName }

// QueueLen reports the queue depth for /debug/controllers.
func (c *Controller) QueueLen() int { return c.queue.Len() }

// Run waits for the caches, then reconciles until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
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

// giveUp tells the App's owner that it could not be reconciled.
func (c *Controller) giveUp(_ context.Context, key controller.Key, err error) {
	if app, getErr := c.apps.Apps(key.Namespace).Get(key.Name); getErr == nil {
		c.recorder.Eventf(app, corev1.EventTypeWarning, "ReconcileFailed", "Giving up after repeated failures until the App or a child changes: %v", err)
	}
}
