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

package shard

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/bits"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	shards "github.com/ndsl/controller-manager/pkg/shard"
)

// The kinds the test shards, one of each key: namespaced custom and built-in
// objects by namespace, cluster-scoped Pipelines by uid, and the Pipelines'
// PersistentVolumes by their controller's uid (client side only).
const (
	apps      = "apps"
	services  = "services"
	pipelines = "pipelines"
	volumes   = "persistentvolumes"
)

var kinds = []string{apps, services, pipelines, volumes}

// keyOf is the shard key of each kind.
var keyOf = map[string]shards.Key{
	apps:      shards.Namespace,
	services:  shards.Namespace,
	pipelines: shards.UID,
	volumes:   shards.ControllerOwner(pipelinev1beta1.SchemeGroupVersion.WithKind("Pipeline").GroupKind()),
}

// oracleShard is the shard of n (1, 2 or 4) that the API server's hash
// places value in, computed here from hash/fnv and not by pkg/shard: the
// top bits of the 64-bit FNV-1a hash. Uids are placed so.
func oracleShard(value string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(value))
	hi, _ := bits.Mul64(h.Sum64(), uint64(n))
	return int(hi)
}

// oracleNamespaceShard is the shard of n that namespace ns's objects are
// in: the top bits of FNV-1a mixed by SplitMix64's finalizer.
func oracleNamespaceShard(ns string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(ns))
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	hi, _ := bits.Mul64(x, uint64(n))
	return int(hi)
}

// oraclePlace is the shard of n of an object whose recorded value is
// "ns:<namespace>" or "uid:<uid>".
func oraclePlace(value string, n int) int {
	if ns, ok := strings.CutPrefix(value, "ns:"); ok {
		return oracleNamespaceShard(ns, n)
	}
	return oracleShard(strings.TrimPrefix(value, "uid:"), n)
}

// world is what the test created, per kind: informer key to the value that
// places the object (namespace, uid, or controller uid).
type world struct {
	t      *testing.T
	kube   kubernetes.Interface
	crd    versioned.Interface
	run    string
	labels map[string]string
	// objects are per kind, informer key to the value that places it:
	// "ns:<namespace>" or "uid:<uid>" (oraclePlace).
	objects map[string]map[string]string
	// pipelineUIDs are the Pipelines' uids, to own volumes.
	pipelineUIDs []string
	names        int
}

func newWorld(t *testing.T, kube kubernetes.Interface, crd versioned.Interface, run string) *world {
	w := &world{t: t, kube: kube, crd: crd, run: run, labels: map[string]string{"shard-test": run}, objects: map[string]map[string]string{}}
	for _, k := range kinds {
		w.objects[k] = map[string]string{}
	}
	return w
}

// selector selects what this run created.
func (w *world) selector() string { return "shard-test=" + w.run }

// name is a fresh object name.
func (w *world) name(prefix string) string {
	w.names++
	return fmt.Sprintf("%s-%s-%d", prefix, w.run, w.names)
}

func (w *world) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: w.labels}
}

// namespace creates namespace name.
func (w *world) namespace(ctx context.Context, name string) {
	w.t.Helper()
	if _, err := w.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: w.meta(name)}, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// app creates an App in ns.
func (w *world) app(ctx context.Context, ns string) {
	w.t.Helper()
	app := &appv1beta1.App{ObjectMeta: w.meta(w.name("app")), Spec: appv1beta1.AppSpec{Image: "nginx:1.27"}}
	if _, err := w.crd.AppV1beta1().Apps(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("creating App in %s: %v", ns, err)
	}
	w.objects[apps][ns+"/"+app.Name] = "ns:" + ns
}

// service creates a headless Service in ns (no cluster IP to allocate).
func (w *world) service(ctx context.Context, ns string) {
	w.t.Helper()
	svc := &corev1.Service{ObjectMeta: w.meta(w.name("svc")), Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := w.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("creating Service in %s: %v", ns, err)
	}
	w.objects[services][ns+"/"+svc.Name] = "ns:" + ns
}

// pipeline creates a Pipeline and returns its uid.
func (w *world) pipeline(ctx context.Context) string {
	w.t.Helper()
	p := &pipelinev1beta1.Pipeline{ObjectMeta: w.meta(w.name("pipeline")), Spec: pipelinev1beta1.PipelineSpec{
		Steps: []pipelinev1beta1.PipelineStep{{Model: "m", Image: "nginx:1.27", Location: "node-1"}},
		ModelStorage: pipelinev1beta1.ModelStorage{
			Type:         pipelinev1beta1.StorageTypeNFS,
			CSIParameter: map[string]string{"server": "192.0.2.10", "share": "/models"},
		},
	}}
	created, err := w.crd.PipelineV1beta1().Pipelines().Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("creating Pipeline: %v", err)
	}
	uid := string(created.UID)
	w.objects[pipelines][created.Name] = "uid:" + uid
	w.pipelineUIDs = append(w.pipelineUIDs, uid)
	return uid
}

// volume creates a PersistentVolume controlled by the Pipeline of ownerUID,
// or by nothing if ownerUID is empty.
func (w *world) volume(ctx context.Context, ownerUID string) {
	w.t.Helper()
	pv := &corev1.PersistentVolume{ObjectMeta: w.meta(w.name("pv")), Spec: corev1.PersistentVolumeSpec{
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: "nfs.csi.k8s.io", VolumeHandle: pvHandle(w.names)}},
	}}
	if ownerUID != "" {
		pv.OwnerReferences = []metav1.OwnerReference{{APIVersion: pipelinev1beta1.SchemeGroupVersion.String(),
			Kind: "Pipeline", Name: "owner", UID: types.UID(ownerUID), Controller: ptr.To(true)}}
	}
	if _, err := w.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("creating PersistentVolume: %v", err)
	}
	// A volume no Pipeline controls is placed by its namespace, "".
	w.objects[volumes][pv.Name] = "ns:" // cluster-scoped, no controller: namespace ""
	if ownerUID != "" {
		w.objects[volumes][pv.Name] = "uid:" + ownerUID
	}
}

func pvHandle(i int) string { return fmt.Sprintf("192.0.2.10#/models#%d", i) }

// listWatch is the ListWatch of kind, restricted to this run's objects.
func (w *world) listWatch(kind string) (*cache.ListWatch, runtime.Object) {
	sel := w.selector()
	type lister func(context.Context, metav1.ListOptions) (runtime.Object, error)
	type watcher func(context.Context, metav1.ListOptions) (watch.Interface, error)
	var list lister
	var watchFn watcher
	var obj runtime.Object
	switch kind {
	case apps:
		c := w.crd.AppV1beta1().Apps(metav1.NamespaceAll)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchFn, obj = c.Watch, &appv1beta1.App{}
	case services:
		c := w.kube.CoreV1().Services(metav1.NamespaceAll)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchFn, obj = c.Watch, &corev1.Service{}
	case pipelines:
		c := w.crd.PipelineV1beta1().Pipelines()
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchFn, obj = c.Watch, &pipelinev1beta1.Pipeline{}
	case volumes:
		c := w.kube.CoreV1().PersistentVolumes()
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }
		watchFn, obj = c.Watch, &corev1.PersistentVolume{}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return watchFn(ctx, o)
		},
	}, obj
}
