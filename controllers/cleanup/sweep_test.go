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

package cleanup

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/controller"
	crdfake "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

// The caches may lag behind the API server: a PV whose Pipeline the cache
// does not hold (yet) is removed only if a live GET confirms the Pipeline
// is gone, and then only the version the cache saw (UID and resourceVersion
// preconditions).
func TestSweepRechecksTheOwnerLiveBeforeRemoving(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{
		Name: "models", UID: "pv-uid", ResourceVersion: "7",
		Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "distri-infer.ndsl.cn/v1beta1", Kind: "Pipeline",
			Name: "p", UID: "p-uid", Controller: ptr.To(true)}},
	}}
	livePipeline := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "distri-infer.ndsl.cn/v1beta1", Kind: "Pipeline"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "p-uid"},
	}
	for name, tc := range map[string]struct {
		live       []runtime.Object
		wantDelete bool
	}{
		"Pipeline alive, cache behind": {live: []runtime.Object{livePipeline}},
		"Pipeline gone":                {wantDelete: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kubeInformers := informers.NewSharedInformerFactory(kubefake.NewClientset(pv), 0)
			crdInformers := crdinformers.NewSharedInformerFactory(crdfake.NewSimpleClientset(), 0) // holds no Pipeline
			scheme := runtime.NewScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			client := metadatafake.NewSimpleMetadataClient(scheme, tc.live...)
			var deletes []metav1.DeleteOptions
			client.PrependReactor("delete", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
				deletes = append(deletes, a.(clienttesting.DeleteActionImpl).DeleteOptions)
				return true, nil, nil
			})
			c, err := NewController(kubeInformers, kubeInformers, crdInformers, client, record.NewFakeRecorder(10), Options{Interval: 1})
			if err != nil {
				t.Fatal(err)
			}
			kubeInformers.Start(ctx.Done())
			crdInformers.Start(ctx.Done())
			kubeInformers.WaitForCacheSync(ctx.Done())
			crdInformers.WaitForCacheSync(ctx.Done())

			if _, err := c.sweep(ctx, sweepKey); err != nil {
				t.Fatal(err)
			}
			switch {
			case !tc.wantDelete && len(deletes) != 0:
				t.Errorf("PV deleted although the live API holds its Pipeline: %+v", deletes)
			case tc.wantDelete && len(deletes) != 1:
				t.Fatalf("%d deletes, want 1", len(deletes))
			case tc.wantDelete:
				p := deletes[0].Preconditions
				if p == nil || ptr.Deref(p.UID, "") != "pv-uid" || ptr.Deref(p.ResourceVersion, "") != "7" {
					t.Errorf("delete preconditions %+v, want the cached UID and resourceVersion", p)
				}
			}
		})
	}
}
