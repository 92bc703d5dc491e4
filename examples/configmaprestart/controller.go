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

// Package configmaprestart is the example controller of
// docs/adding-a-controller.md: a Deployment labelled
// configmap-restart.ndsl.cn/configmap=<name> restarts its pods when the
// ConfigMap <name> of its namespace changes. The manager does not run it;
// test/integration/configmaprestart does, added to its registry as the
// guide adds it.
//
// The Deployments are not the manager's: their owners (a user, Helm, Argo
// CD) opt in with the label, and the controller writes two annotations and
// no other field, under a field manager of its own (controller.ApplyFields).
package configmaprestart

import (
	"cmp"
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/controller"
)

const (
	// ControllerName is the name used by --controllers, the queue and metrics.
	ControllerName = "configmap-restart"
	// ConfigMapLabel, on a Deployment, names the ConfigMap of its namespace
	// whose changes restart its pods.
	ConfigMapLabel = "configmap-restart.ndsl.cn/configmap"
	// HashAnnotation, on the Deployment, is the hash of the ConfigMap's
	// data last seen; on a ConfigMap in the cache, the hash of its data.
	HashAnnotation = "configmap-restart.ndsl.cn/hash"
	// RestartedForAnnotation, on the pod template, is the hash of the data
	// the pods were last restarted for: changing it rolls the Deployment.
	RestartedForAnnotation = "configmap-restart.ndsl.cn/restarted-for"
	// FieldManager owns the two annotations, and nothing else.
	FieldManager = "ndsl-controller-manager/" + ControllerName
)

// Options configures the controller: only the options every controller
// has (its name, workers, queue).
type Options struct {
	controller.Common
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options { return Options{Common: controller.Common{Workers: 2}} }

// Controller restarts the pods of labelled Deployments when their
// ConfigMap changes.
type Controller struct {
	controller.Base
	deployments appslisters.DeploymentLister
	configMaps  corelisters.ConfigMapLister
	client      kubernetes.Interface
	recorder    record.EventRecorder
}

// NewController builds the controller on deployments, which should hold
// only the labelled Deployments (DeploymentSelector), and configMaps,
// whose objects should be cut down by TransformConfigMap. It starts
// nothing.
func NewController(deployments appsinformers.DeploymentInformer, configMaps coreinformers.ConfigMapInformer,
	client kubernetes.Interface, recorder record.EventRecorder, opts Options) (*Controller, error) {
	c := &Controller{
		Base:        controller.NewBase(cmp.Or(opts.Name, ControllerName), opts.Workers, opts.Queue),
		deployments: deployments.Lister(),
		configMaps:  configMaps.Lister(),
		client:      client,
		recorder:    recorder,
	}
	c.Synced = []cache.InformerSynced{deployments.Informer().HasSynced, configMaps.Informer().HasSynced}
	c.Reconcile = c.sync
	c.GiveUp = controller.GiveUpEvent(recorder, func(key controller.Key) (runtime.Object, error) {
		return c.deployments.Deployments(key.Namespace).Get(key.Name)
	}, "Giving up on restarting for the ConfigMap after repeated failures")
	if err := c.Handle(deployments.Informer(), controller.EnqueueObject(c.Queue)); err != nil {
		return nil, err
	}
	// A ConfigMap's change concerns the Deployments of its namespace that
	// name it.
	if err := c.Handle(configMaps.Informer(), controller.EnqueueMapped(c.Queue, c.naming)); err != nil {
		return nil, err
	}
	return c, nil
}

// DeploymentSelector selects the Deployments that opt in, for the
// Deployment informer's list and watch.
func DeploymentSelector() labels.Selector {
	exists, _ := labels.NewRequirement(ConfigMapLabel, selection.Exists, nil) // a valid key: no error
	return labels.NewSelector().Add(*exists)
}

// naming returns the keys of the cached Deployments that name cm.
func (c *Controller) naming(cm metav1.Object) []controller.Key {
	deployments, err := c.deployments.Deployments(cm.GetNamespace()).List(labels.Everything())
	if err != nil {
		return nil
	}
	var keys []controller.Key
	for _, d := range deployments {
		if d.Labels[ConfigMapLabel] == cm.GetName() {
			keys = append(keys, controller.Key{Namespace: d.Namespace, Name: d.Name})
		}
	}
	return keys
}

// sync brings one Deployment's annotations to its ConfigMap's hash.
func (c *Controller) sync(ctx context.Context, key controller.Key) (controller.Result, error) {
	return controller.Result{}, c.syncDeployment(ctx, key)
}

// syncDeployment is sync without a Result: it never asks for a requeue.
func (c *Controller) syncDeployment(ctx context.Context, key controller.Key) error {
	d, err := c.deployments.Deployments(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil // gone, or no longer labelled
	}
	if err != nil {
		return err
	}
	name := d.Labels[ConfigMapLabel]
	cm, err := c.configMaps.ConfigMaps(d.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // nothing to follow until it exists; its creation enqueues d
	}
	if err != nil {
		return err
	}
	hash := cm.Annotations[HashAnnotation]
	seen := d.Annotations[HashAnnotation]
	if hash == "" || hash == seen {
		return nil
	}
	// The first hash seen is recorded only: opting in restarts nothing.
	// The template's annotation, once set, is applied again as it is: the
	// field manager owns it, and an apply without it would remove it.
	restartFor := d.Spec.Template.Annotations[RestartedForAnnotation]
	if seen != "" {
		restartFor = hash
	}
	ac := appsv1ac.Deployment(d.Name, d.Namespace).WithAnnotations(map[string]string{HashAnnotation: hash})
	if restartFor != "" {
		ac.WithSpec(appsv1ac.DeploymentSpec().WithTemplate(
			corev1ac.PodTemplateSpec().WithAnnotations(map[string]string{RestartedForAnnotation: restartFor})))
	}
	if _, err := controller.ApplyFields(ctx, c.client.AppsV1().Deployments(d.Namespace), appsv1.Resource("deployments"), d, ac, FieldManager); err != nil {
		return controller.WriteFailed(c.recorder, d, "RestartFailed", "annotate", "Deployment "+klog.KObj(d).String(), err)
	}
	if seen != "" {
		c.recorder.Eventf(d, corev1.EventTypeNormal, "RestartedForConfigMap", "ConfigMap %s changed: restarting the pods", name)
		klog.FromContext(ctx).V(2).Info("Restarting for its ConfigMap", "deployment", klog.KObj(d), "configMap", name)
	}
	return nil
}
