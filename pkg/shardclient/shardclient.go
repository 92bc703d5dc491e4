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

// Package shardclient gives a shard unit's informers their clients: for the
// resources its controller shards (ShardKeys), each list and watch goes
// through pkg/shard (the API server's shardSelector where it honours it, a
// filter on the client in every case), so whatever informer the controller
// asks its factories for holds only the unit's range. Other resources, and
// every other request, pass unchanged. The controllers' own clients, which
// write, are not these.
package shardclient

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	typednetworkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/tools/cache"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	typedapp "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/typed/app/v1"
	typedpipeline "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/typed/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/shard"
)

// Lists holds one shard ListerWatcher per resource, namespace and
// selectors, so that an informer's relists and rewatches reuse it (and its
// probe of where the range is selected).
type Lists struct {
	shard shard.Shard
	keys  map[string]shard.Key // by resource

	mu  sync.Mutex
	lws map[string]*shard.ListerWatcher
}

// NewLists returns the Lists of shard s, whose resources are placed by keys.
func NewLists(s shard.Shard, keys map[string]shard.Key) *Lists {
	shard.RegisterMetrics()
	return &Lists{shard: s, keys: keys, lws: map[string]*shard.ListerWatcher{}}
}

type listFunc func(context.Context, metav1.ListOptions) (runtime.Object, error)
type watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)

// lw is the shard ListerWatcher of resource in namespace for these
// options' selectors; nil if the resource is not sharded.
func (s *Lists) lw(resource, namespace string, o metav1.ListOptions, list listFunc, watch watchFunc) *shard.ListerWatcher {
	key, ok := s.keys[resource]
	if !ok {
		return nil
	}
	id := resource + "/" + namespace + "?" + o.LabelSelector + "&" + o.FieldSelector
	s.mu.Lock()
	defer s.mu.Unlock()
	if lw, ok := s.lws[id]; ok {
		return lw
	}
	lw := shard.NewListerWatcher(&cache.ListWatch{ListWithContextFunc: cache.ListWithContextFunc(list), WatchFuncWithContext: cache.WatchFuncWithContext(watch)}, s.shard, key, resource)
	s.lws[id] = lw
	return lw
}

// shardedList lists through the shard ListerWatcher, or list if the
// resource is not sharded.
func shardedList[L runtime.Object](ctx context.Context, s *Lists, resource, namespace string, o metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (L, error), watch watchFunc) (L, error) {
	untyped := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) }
	lw := s.lw(resource, namespace, o, untyped, watch)
	if lw == nil {
		return list(ctx, o)
	}
	obj, err := lw.ListWithContext(ctx, o)
	if err != nil {
		var none L
		return none, err
	}
	return obj.(L), nil
}

// shardedWatch watches through the shard ListerWatcher, or watch if the
// resource is not sharded.
func shardedWatch[L runtime.Object](ctx context.Context, s *Lists, resource, namespace string, o metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (L, error), watch watchFunc) (watch.Interface, error) {
	untyped := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) }
	lw := s.lw(resource, namespace, o, untyped, watch)
	if lw == nil {
		return watch(ctx, o)
	}
	return lw.WatchWithContext(ctx, o)
}

// Kube returns client, its lists and watches of sharded resources through
// lists: the built-in types' informer client of a shard unit.
func Kube(client kubernetes.Interface, lists *Lists) kubernetes.Interface {
	return shardedKube{Interface: client, s: lists}
}

// CRD returns client, its lists and watches of sharded resources through
// lists: the custom resources' informer client of a shard unit.
func CRD(client versioned.Interface, lists *Lists) versioned.Interface {
	return shardedCRD{Interface: client, s: lists}
}

// shardedKube is the built-in types' informer client of a shard unit.
type shardedKube struct {
	kubernetes.Interface
	s *Lists
}

func (c shardedKube) AppsV1() typedappsv1.AppsV1Interface {
	return shardedAppsV1{c.Interface.AppsV1(), c.s}
}

func (c shardedKube) CoreV1() typedcorev1.CoreV1Interface {
	return shardedCoreV1{c.Interface.CoreV1(), c.s}
}

func (c shardedKube) NetworkingV1() typednetworkingv1.NetworkingV1Interface {
	return shardedNetworkingV1{c.Interface.NetworkingV1(), c.s}
}

type shardedAppsV1 struct {
	typedappsv1.AppsV1Interface
	s *Lists
}

func (g shardedAppsV1) Deployments(ns string) typedappsv1.DeploymentInterface {
	return shardedDeployments{g.AppsV1Interface.Deployments(ns), g.s, ns}
}

type shardedDeployments struct {
	typedappsv1.DeploymentInterface
	s  *Lists
	ns string
}

func (r shardedDeployments) List(ctx context.Context, o metav1.ListOptions) (*appsv1.DeploymentList, error) {
	return shardedList(ctx, r.s, "deployments", r.ns, o, r.DeploymentInterface.List, r.DeploymentInterface.Watch)
}

func (r shardedDeployments) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "deployments", r.ns, o, r.DeploymentInterface.List, r.DeploymentInterface.Watch)
}

type shardedCoreV1 struct {
	typedcorev1.CoreV1Interface
	s *Lists
}

func (g shardedCoreV1) Services(ns string) typedcorev1.ServiceInterface {
	return shardedServices{g.CoreV1Interface.Services(ns), g.s, ns}
}

func (g shardedCoreV1) Pods(ns string) typedcorev1.PodInterface {
	return shardedPods{g.CoreV1Interface.Pods(ns), g.s, ns}
}

func (g shardedCoreV1) PersistentVolumeClaims(ns string) typedcorev1.PersistentVolumeClaimInterface {
	return shardedClaims{g.CoreV1Interface.PersistentVolumeClaims(ns), g.s, ns}
}

func (g shardedCoreV1) PersistentVolumes() typedcorev1.PersistentVolumeInterface {
	return shardedVolumes{g.CoreV1Interface.PersistentVolumes(), g.s}
}

type shardedServices struct {
	typedcorev1.ServiceInterface
	s  *Lists
	ns string
}

func (r shardedServices) List(ctx context.Context, o metav1.ListOptions) (*corev1.ServiceList, error) {
	return shardedList(ctx, r.s, "services", r.ns, o, r.ServiceInterface.List, r.ServiceInterface.Watch)
}

func (r shardedServices) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "services", r.ns, o, r.ServiceInterface.List, r.ServiceInterface.Watch)
}

type shardedPods struct {
	typedcorev1.PodInterface
	s  *Lists
	ns string
}

func (r shardedPods) List(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	return shardedList(ctx, r.s, "pods", r.ns, o, r.PodInterface.List, r.PodInterface.Watch)
}

func (r shardedPods) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "pods", r.ns, o, r.PodInterface.List, r.PodInterface.Watch)
}

type shardedClaims struct {
	typedcorev1.PersistentVolumeClaimInterface
	s  *Lists
	ns string
}

func (r shardedClaims) List(ctx context.Context, o metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
	return shardedList(ctx, r.s, "persistentvolumeclaims", r.ns, o, r.PersistentVolumeClaimInterface.List, r.PersistentVolumeClaimInterface.Watch)
}

func (r shardedClaims) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "persistentvolumeclaims", r.ns, o, r.PersistentVolumeClaimInterface.List, r.PersistentVolumeClaimInterface.Watch)
}

type shardedVolumes struct {
	typedcorev1.PersistentVolumeInterface
	s *Lists
}

func (r shardedVolumes) List(ctx context.Context, o metav1.ListOptions) (*corev1.PersistentVolumeList, error) {
	return shardedList(ctx, r.s, "persistentvolumes", "", o, r.PersistentVolumeInterface.List, r.PersistentVolumeInterface.Watch)
}

func (r shardedVolumes) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "persistentvolumes", "", o, r.PersistentVolumeInterface.List, r.PersistentVolumeInterface.Watch)
}

type shardedNetworkingV1 struct {
	typednetworkingv1.NetworkingV1Interface
	s *Lists
}

func (g shardedNetworkingV1) Ingresses(ns string) typednetworkingv1.IngressInterface {
	return shardedIngresses{g.NetworkingV1Interface.Ingresses(ns), g.s, ns}
}

type shardedIngresses struct {
	typednetworkingv1.IngressInterface
	s  *Lists
	ns string
}

func (r shardedIngresses) List(ctx context.Context, o metav1.ListOptions) (*networkingv1.IngressList, error) {
	return shardedList(ctx, r.s, "ingresses", r.ns, o, r.IngressInterface.List, r.IngressInterface.Watch)
}

func (r shardedIngresses) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "ingresses", r.ns, o, r.IngressInterface.List, r.IngressInterface.Watch)
}

// shardedCRD is the custom resources' informer client of a shard unit.
type shardedCRD struct {
	versioned.Interface
	s *Lists
}

func (c shardedCRD) AppV1() typedapp.AppV1Interface {
	return shardedAppGroup{c.Interface.AppV1(), c.s}
}

func (c shardedCRD) PipelineV1() typedpipeline.PipelineV1Interface {
	return shardedPipelineGroup{c.Interface.PipelineV1(), c.s}
}

type shardedAppGroup struct {
	typedapp.AppV1Interface
	s *Lists
}

func (g shardedAppGroup) Apps(ns string) typedapp.AppInterface {
	return shardedApps{g.AppV1Interface.Apps(ns), g.s, ns}
}

type shardedApps struct {
	typedapp.AppInterface
	s  *Lists
	ns string
}

func (r shardedApps) List(ctx context.Context, o metav1.ListOptions) (*appv1.AppList, error) {
	return shardedList(ctx, r.s, "apps", r.ns, o, r.AppInterface.List, r.AppInterface.Watch)
}

func (r shardedApps) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "apps", r.ns, o, r.AppInterface.List, r.AppInterface.Watch)
}

type shardedPipelineGroup struct {
	typedpipeline.PipelineV1Interface
	s *Lists
}

func (g shardedPipelineGroup) Pipelines() typedpipeline.PipelineInterface {
	return shardedPipelines{g.PipelineV1Interface.Pipelines(), g.s}
}

type shardedPipelines struct {
	typedpipeline.PipelineInterface
	s *Lists
}

func (r shardedPipelines) List(ctx context.Context, o metav1.ListOptions) (*pipelinev1.PipelineList, error) {
	return shardedList(ctx, r.s, "pipelines", "", o, r.PipelineInterface.List, r.PipelineInterface.Watch)
}

func (r shardedPipelines) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return shardedWatch(ctx, r.s, "pipelines", "", o, r.PipelineInterface.List, r.PipelineInterface.Watch)
}
