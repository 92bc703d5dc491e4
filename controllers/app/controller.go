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

// Package app is the App controller: an App (ingress.example.com/v1, stored)
// gets a Deployment running its image and, when it asks, a Service and an
// Ingress, all named after it and controlled by it. The controller applies
// only what differs from the desired state, with server-side apply, and
// reports what it observed in the App's status.
package app

import (
	"cmp"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	appinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions/app/v1"
	applisters "github.com/ndsl/controller-manager/pkg/generated/listers/app/v1"
)

// ControllerName is the name used by --controllers, the queue and metrics.
const ControllerName = "app"

// childBatchPeriod delays the reconcile a child's or a pod's event asks for,
// so that one reconcile answers a burst of them.
const childBatchPeriod = time.Second

var appsResource = appv1.SchemeGroupVersion.WithResource("apps").GroupResource()

// Controller keeps every App's Deployment, Service and Ingress as its spec
// asks, and its status as observed.
type Controller struct {
	controller.Base
	kube      kubernetes.Interface
	crdClient versioned.Interface
	recorder  record.EventRecorder
	opts      Options

	apps        applisters.AppLister
	deployments *controller.Deployments
	services    *controller.Services
	ingresses   *controller.Ingresses
	// pods holds the App's pods, cut down by TransformPod, for the reason
	// they are unavailable; read only.
	pods cache.Indexer

	consistency *controller.ConsistencyStore
	now         func() time.Time
	// storage, when set, migrates the stored Apps (MigrateStorage).
	storage *storageMigration
}

// NewController builds the controller and registers its event handlers on
// the shared informers; it starts nothing. pods need hold only the pods
// PodSelector selects, transformed by TransformPod: the manager gives it an
// informer of its own, filtered by the selector.
func NewController(
	apps appinformers.AppInformer,
	deployments appsinformers.DeploymentInformer,
	services coreinformers.ServiceInformer,
	ingresses networkinginformers.IngressInformer,
	pods coreinformers.PodInformer,
	kubeClient kubernetes.Interface,
	crdClient versioned.Interface,
	recorder record.EventRecorder,
	opts Options,
) (*Controller, error) {
	c := &Controller{
		Base:        controller.NewBase(cmp.Or(opts.Name, ControllerName), opts.Workers, opts.Queue),
		kube:        kubeClient,
		crdClient:   crdClient,
		recorder:    recorder,
		opts:        opts,
		apps:        apps.Lister(),
		deployments: controller.NewDeployments(deployments, kubeClient),
		services:    controller.NewServices(services, kubeClient),
		ingresses:   controller.NewIngresses(ingresses, kubeClient),
		pods:        pods.Informer().GetIndexer(),
		consistency: controller.NewConsistencyStore(map[schema.GroupResource]cache.Store{
			appsResource:                       apps.Informer().GetStore(),
			appsv1.Resource("deployments"):     deployments.Informer().GetStore(),
			corev1.Resource("services"):        services.Informer().GetStore(),
			networkingv1.Resource("ingresses"): ingresses.Informer().GetStore(),
		}, controller.DefaultConsistencyTimeout),
		now: time.Now,
	}
	c.Synced = []cache.InformerSynced{
		apps.Informer().HasSynced,
		deployments.Informer().HasSynced,
		services.Informer().HasSynced,
		ingresses.Informer().HasSynced,
		pods.Informer().HasSynced,
	}
	if err := addPodIndex(pods.Informer()); err != nil {
		return nil, err
	}
	c.Reconcile = c.sync
	// The children's informers hold only labelled objects: a same-name
	// object in a child's way is watched alone, and its going requeues the App.
	blockers := controller.NewBlockerWatches(c.Queue, 0)
	c.deployments.WatchBlockers(blockers)
	c.services.WatchBlockers(blockers)
	c.ingresses.WatchBlockers(blockers)
	if err := c.Track(c.deployments, c.services, c.ingresses); err != nil {
		return nil, err
	}
	c.MaxRetries = opts.MaxRetries
	c.GiveUp = controller.GiveUpEvent(recorder, func(key controller.Key) (runtime.Object, error) {
		return c.apps.Apps(key.Namespace).Get(key.Name)
	}, "Giving up after repeated failures until the App or a child changes")

	// Apps, resyncs included: a periodic resync re-checks every App.
	if err := c.Handle(apps.Informer(), controller.EnqueueObject(c.Queue)); err != nil {
		return nil, err
	}
	// Children, mapped to the App that controls them, batched: the deployment
	// controller and the kubelets change a Deployment's status in bursts, and
	// one reconcile after the burst writes the App's status once for it.
	owner := appv1.SchemeGroupVersion.WithKind("App").GroupKind()
	batched := controller.Batched(c.Queue, childBatchPeriod)
	for _, informer := range []cache.SharedIndexInformer{deployments.Informer(), services.Informer(), ingresses.Informer()} {
		if err := c.Handle(informer, controller.EnqueueControllerOf(batched, owner, false)); err != nil {
			return nil, err
		}
		// A same-name object the App does not control blocks its child,
		// maybe past the App's retry budget: its going unblocks the App.
		if err := c.Handle(informer, controller.EnqueueUnblocked(c.Queue, c.appNamed)); err != nil {
			return nil, err
		}
	}
	// Pods, mapped to their App by its labels, on the changes that can
	// change why they are unavailable.
	podHandler := controller.EnqueueMapped(batched, c.appOfPod)
	enqueueUpdate := podHandler.UpdateFunc
	podHandler.UpdateFunc = func(oldObj, newObj any) {
		if podChanged(oldObj, newObj) {
			enqueueUpdate(oldObj, newObj)
		}
	}
	if err := c.Handle(pods.Informer(), podHandler); err != nil {
		return nil, err
	}
	return c, nil
}

// appOfPod maps a pod of an App's Deployment to the App, if it exists.
func (c *Controller) appOfPod(obj metav1.Object) []controller.Key {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	name, ok := appNameOfPod(pod)
	if !ok {
		return nil
	}
	if _, err := c.apps.Apps(pod.Namespace).Get(name); err != nil {
		return nil
	}
	return []controller.Key{{Namespace: pod.Namespace, Name: name}}
}

// appNamed maps an object of a child kind to the App of the same name in
// its namespace, whose child it would be, if that App exists.
func (c *Controller) appNamed(obj metav1.Object) []controller.Key {
	if _, err := c.apps.Apps(obj.GetNamespace()).Get(obj.GetName()); err != nil {
		return nil
	}
	return []controller.Key{{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}
