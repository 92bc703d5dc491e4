// Package ingress is the Ingress controller (the design notes'
// "ingress-manager"): a Service annotated ingress/http gets an Ingress of the
// same name, owned by the Service, routing / to the Service's first port.
package ingress

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// ControllerName is the name used by --controllers, the queue and metrics.
const ControllerName = "ingress"

// Controller keeps an Ingress for every annotated Service.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	opts     Options

	services       corelisters.ServiceLister
	servicesSynced cache.InformerSynced
	ingresses      networkinglisters.IngressLister
	ingressSynced  cache.InformerSynced

	queue controller.Queue
}

// NewController builds the controller and registers its event handlers on
// the shared informers; it starts nothing.
func NewController(
	ctx context.Context,
	services coreinformers.ServiceInformer,
	ingresses networkinginformers.IngressInformer,
	client kubernetes.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		client:         client,
		recorder:       recorder,
		opts:           opts,
		services:       services.Lister(),
		servicesSynced: services.Informer().HasSynced,
		ingresses:      ingresses.Lister(),
		ingressSynced:  ingresses.Informer().HasSynced,
		queue:          controller.NewQueue(ControllerName),
	}
	// Every Service: one that lost its annotation may still own an Ingress
	// to delete, and resyncs re-check every Service against its Ingress.
	if _, err := services.Informer().AddEventHandler(controller.EnqueueObject(c.queue)); err != nil {
		return nil, err
	}
	if _, err := ingresses.Informer().AddEventHandler(
		controller.EnqueueControllerOf(c.queue, schema.GroupKind{Kind: "Service"}, false)); err != nil {
		return nil, err
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
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.servicesSynced, c.ingressSynced) {
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

// giveUp tells the Service's owner that its Ingress could not be reconciled.
func (c *Controller) giveUp(_ context.Context, key controller.Key, err error) {
	if svc, getErr := c.services.Services(key.Namespace).Get(key.Name); getErr == nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "ReconcileFailed", "Giving up on the Ingress after repeated failures: %v", err)
	}
}
