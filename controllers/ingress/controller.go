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

// Package ingress is the Ingress controller (the design notes'
// "ingress-manager"): a Service annotated ingress/http gets an Ingress of the
// same name, owned by the Service, routing / to the Service's first port.
package ingress

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// ControllerName is the name used by --controllers, the queue and metrics.
const ControllerName = "ingress"

// Controller keeps an Ingress for every annotated Service.
type Controller struct {
	controller.Base
	recorder record.EventRecorder
	opts     Options

	services  corelisters.ServiceLister
	ingresses *controller.Ingresses
	// serviceClient reads a Service the cache does not hold, which
	// controls an Ingress (syncUncached).
	serviceClient corev1client.ServicesGetter
}

// NewController builds the controller and registers its event handlers on
// the shared informers; it starts nothing. services should hold only the
// Wanted Services (NewServiceInformer); a Service it lacks is looked up
// live only when it controls an Ingress.
func NewController(
	services coreinformers.ServiceInformer,
	ingresses networkinginformers.IngressInformer,
	kubeClient kubernetes.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		Base:      controller.NewBase(cmp.Or(opts.Name, ControllerName), opts.Workers, opts.Queue),
		recorder:  recorder,
		opts:      opts,
		services:  services.Lister(),
		ingresses: controller.NewIngresses(ingresses, kubeClient),

		serviceClient: kubeClient.CoreV1(),
	}
	c.Synced = []cache.InformerSynced{services.Informer().HasSynced, ingresses.Informer().HasSynced}
	c.Reconcile = c.sync
	// The Ingress informer holds only labelled Ingresses: a same-name one in
	// the way is watched alone, and its going requeues the Service.
	c.ingresses.WatchBlockers(controller.NewBlockerWatches(c.Queue, 0))
	if err := c.Track(c.ingresses); err != nil {
		return nil, err
	}
	c.MaxRetries = opts.MaxRetries
	c.GiveUp = controller.GiveUpEvent(recorder, func(key controller.Key) (runtime.Object, error) {
		return c.services.Services(key.Namespace).Get(key.Name)
	}, "Giving up on the Ingress after repeated failures")

	// Every Service the informer holds, and its leaving it: one that lost
	// its annotations arrives as a delete, and may still own an Ingress to
	// delete. Resyncs re-check every held Service against its Ingress.
	handlers := controller.EnqueueObject(c.Queue)
	enqueueDeleted := handlers.DeleteFunc
	handlers.DeleteFunc = func(obj any) {
		// Deleted with its annotations on, it is gone, and its Ingress
		// with it (the garbage collector): nothing to do, nothing to read.
		if svc, ok := obj.(*corev1.Service); ok && Wanted(svc) {
			return
		}
		enqueueDeleted(obj)
	}
	if err := c.Handle(services.Informer(), handlers); err != nil {
		return nil, err
	}
	if err := c.Handle(ingresses.Informer(),
		controller.EnqueueControllerOf(c.Queue, schema.GroupKind{Kind: "Service"}, false)); err != nil {
		return nil, err
	}
	// A same-name Ingress the Service does not control blocks its own,
	// maybe past the Service's retry budget: its going unblocks the Service.
	if err := c.Handle(ingresses.Informer(), controller.EnqueueUnblocked(c.Queue, c.serviceNamed)); err != nil {
		return nil, err
	}
	return c, nil
}

// serviceNamed maps an Ingress to the Service of the same name in its
// namespace, whose Ingress it would be, if that Service exists.
func (c *Controller) serviceNamed(ing metav1.Object) []controller.Key {
	if _, err := c.services.Services(ing.GetNamespace()).Get(ing.GetName()); err != nil {
		return nil
	}
	return []controller.Key{{Namespace: ing.GetNamespace(), Name: ing.GetName()}}
}
