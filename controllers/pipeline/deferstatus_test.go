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

package pipeline

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ndsl/controller-manager/pkg/controller"
	crdfake "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

func statusWrites(actions []clienttesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// A reconcile that creates a Pipeline's children leaves the status to the
// reconcile that observes them: what it would report of them (storage
// Pending, no replicas) is superseded at once. That one writes it once, and
// its repeat writes nothing. A failed create is written at once.
func TestStatusWaitsForTheCreatedChildren(t *testing.T) {
	ctx := context.Background()
	p := stored(samplePipeline())
	p.Spec.Namespace = "models"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "models", ResourceVersion: "1"}}
	nodes := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "xx-test-node236"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "xx-test-node239"}},
	}
	kube, crd := kubefake.NewClientset(append(nodes, ns)...), crdfake.NewSimpleClientset(p)
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	crdFactory := crdinformers.NewSharedInformerFactory(crd, 0)
	pipelines := crdFactory.Pipeline().V1().Pipelines()
	deployments, services := kubeFactory.Apps().V1().Deployments(), kubeFactory.Core().V1().Services()
	claims, volumes := kubeFactory.Core().V1().PersistentVolumeClaims(), kubeFactory.Core().V1().PersistentVolumes()
	namespaces, nodeInformer := metadataInformers()
	opts := DefaultOptions()
	opts.AllowedNamespaces = []string{AnyNamespace}
	c, err := NewController(pipelines, deployments, services, claims, volumes, namespaces, nodeInformer, kube, crd, record.NewFakeRecorder(100), opts)
	if err != nil {
		t.Fatal(err)
	}
	add := func(store cache.Store, objs ...runtime.Object) {
		for _, obj := range objs {
			if err := store.Add(obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(pipelines.Informer().GetStore(), p)
	add(namespaces.Informer().GetStore(), metadataOf(ns))
	for _, n := range nodes {
		add(nodeInformer.Informer().GetStore(), metadataOf(n.(metav1.Object)))
	}
	key := controller.Key{Name: p.Name}
	kube.ClearActions()
	crd.ClearActions()

	if _, err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	if creates := len(kube.Actions()); creates != 2+2*len(p.Spec.Steps) {
		t.Fatalf("first reconcile sent %d requests, want one create per child: %v", creates, kube.Actions())
	}
	if n := statusWrites(crd.Actions()); n != 0 {
		t.Fatalf("the reconcile that created the children wrote the status %d times, want 0 (it is superseded at once)", n)
	}

	// The informers deliver the children.
	for _, a := range kube.Actions() {
		created := a.(clienttesting.CreateAction).GetObject()
		var store cache.Store
		switch created.(type) {
		case *corev1.PersistentVolume:
			store = volumes.Informer().GetStore()
		case *corev1.PersistentVolumeClaim:
			store = claims.Informer().GetStore()
		case *corev1.Service:
			store = services.Informer().GetStore()
		default:
			store = deployments.Informer().GetStore()
		}
		live, err := kube.Tracker().Get(a.GetResource(), a.GetNamespace(), created.(metav1.Object).GetName())
		if err != nil {
			t.Fatal(err)
		}
		add(store, live)
	}
	kube.ClearActions()
	if _, err := c.sync(ctx, key); err != nil {
		t.Fatal(err)
	}
	// Only the claim is written again, to name its volume's UID: a read and
	// a patch that move its fields to this manager's apply, then the apply.
	for _, a := range kube.Actions() {
		if a.GetResource().Resource != "persistentvolumeclaims" || len(kube.Actions()) > 3 {
			t.Fatalf("the reconcile that observed the children sent %v, want only the claim's writes", kube.Actions())
		}
	}
	if n := statusWrites(crd.Actions()); n != 1 {
		t.Fatalf("the reconcile that observed the children wrote the status %d times, want 1", n)
	}
}

// A reconcile whose create fails for a reason that is not transient writes
// the status at once, with what it did create.
func TestStatusOfAFailedCreateIsWrittenAtOnce(t *testing.T) {
	p := stored(samplePipeline())
	p.Spec.Namespace = "models"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "models", ResourceVersion: "1"}}
	kube, crd := kubefake.NewClientset(ns), crdfake.NewSimpleClientset(p)
	kube.PrependReactor("create", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(appsv1.Resource("deployments"), "", errors.New("quota"))
	})
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	crdFactory := crdinformers.NewSharedInformerFactory(crd, 0)
	pipelines := crdFactory.Pipeline().V1().Pipelines()
	namespaces, nodes := metadataInformers()
	opts := DefaultOptions()
	opts.AllowedNamespaces = []string{AnyNamespace}
	c, err := NewController(pipelines, kubeFactory.Apps().V1().Deployments(), kubeFactory.Core().V1().Services(),
		kubeFactory.Core().V1().PersistentVolumeClaims(), kubeFactory.Core().V1().PersistentVolumes(), namespaces,
		nodes, kube, crd, record.NewFakeRecorder(100), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipelines.Informer().GetStore().Add(p); err != nil {
		t.Fatal(err)
	}
	if err := namespaces.Informer().GetStore().Add(metadataOf(ns)); err != nil {
		t.Fatal(err)
	}
	crd.ClearActions()
	if _, err := c.sync(context.Background(), controller.Key{Name: p.Name}); err == nil {
		t.Fatal("the reconcile of a refused create returned no error")
	}
	if n := statusWrites(crd.Actions()); n != 1 {
		t.Fatalf("a reconcile whose create failed wrote the status %d times, want 1", n)
	}
}

// metadataInformers are the metadata-only Namespace and Node informers the
// manager gives the controller.
func metadataInformers() (namespaces, nodes kubeinformers.GenericInformer) {
	f := metadatainformer.NewSharedInformerFactory(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), 0)
	return f.ForResource(corev1.SchemeGroupVersion.WithResource("namespaces")), f.ForResource(corev1.SchemeGroupVersion.WithResource("nodes"))
}

// metadataOf is obj as a metadata-only informer holds it.
func metadataOf(obj metav1.Object) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(), Labels: obj.GetLabels(),
	}}
}
