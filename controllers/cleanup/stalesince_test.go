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
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/controller"
	crdfake "github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
	crdinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions"
)

// The stale-since time lives on the object: recorded once with a patch of
// that annotation alone under uid and resourceVersion preconditions, read
// back by any leader, removed when the object is no longer stale, and never
// written by a dry run.
func TestStaleSinceIsRecordedOnTheObject(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const period = time.Hour
	svc := func(name string, annotations map[string]string, owner string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "5", Annotations: annotations,
			Labels: map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: owner,
				UID: "owner-uid", Controller: ptr.To(true)}},
		}}
	}
	at := func(d time.Duration) map[string]string {
		return map[string]string{StaleSinceAnnotation: now.Add(d).Format(time.RFC3339)}
	}
	owner := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "owner-uid"}}
	for name, tc := range map[string]struct {
		obj         *corev1.Service
		dryRun      bool
		wantPatch   any // the annotation's value in the patch: a string, nil to remove it, or absent
		wantPatched bool
		wantDelete  bool
	}{
		"first found stale: recorded":         {obj: svc("new", nil, "gone"), wantPatched: true, wantPatch: now.Format(time.RFC3339)},
		"stale, recorded within the period":   {obj: svc("young", at(-period/2), "gone")},
		"stale, recorded a period ago":        {obj: svc("old", at(-period), "gone"), wantDelete: true},
		"recorded in the future (clock skew)": {obj: svc("ahead", at(period), "gone")},
		"owner alive again: record removed":   {obj: svc("alive", at(-period/2), "owner"), wantPatched: true, wantPatch: nil},
		"kept on purpose: record removed": {obj: func() *corev1.Service {
			s := svc("kept", at(-period), "gone")
			s.Annotations[KeepAnnotation] = "true"
			return s
		}(), wantPatched: true, wantPatch: nil},
		"not stale, not recorded: no write":     {obj: svc("fine", nil, "owner")},
		"dry run: nothing recorded":             {obj: svc("dry", nil, "gone"), dryRun: true},
		"dry run: a recorded time still counts": {obj: svc("dry-old", at(-period), "gone"), dryRun: true},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			kubeInformers := informers.NewSharedInformerFactory(kubefake.NewClientset(tc.obj, owner), 0)
			crdInformers := crdinformers.NewSharedInformerFactory(crdfake.NewSimpleClientset(), 0)
			scheme := runtime.NewScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			live := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: owner.ObjectMeta}
			client := metadatafake.NewSimpleMetadataClient(scheme, live)
			var patches [][]byte
			var deletes int
			client.PrependReactor("patch", "services", func(a clienttesting.Action) (bool, runtime.Object, error) {
				patches = append(patches, a.(clienttesting.PatchActionImpl).Patch)
				return true, nil, nil
			})
			client.PrependReactor("delete", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
				deletes++
				return true, nil, nil
			})
			c, err := NewController(kubeInformers, kubeInformers, crdInformers, client, record.NewFakeRecorder(10),
				Options{Interval: 1, StalePeriod: period, DryRun: tc.dryRun})
			if err != nil {
				t.Fatal(err)
			}
			c.clock = clocktesting.NewFakePassiveClock(now)
			kubeInformers.Start(ctx.Done())
			crdInformers.Start(ctx.Done())
			kubeInformers.WaitForCacheSync(ctx.Done())
			crdInformers.WaitForCacheSync(ctx.Done())
			if _, err := c.sweep(ctx, sweepKey); err != nil {
				t.Fatal(err)
			}

			if (deletes > 0) != tc.wantDelete {
				t.Errorf("%d deletes, want delete %t", deletes, tc.wantDelete)
			}
			if !tc.wantPatched {
				if len(patches) > 0 {
					t.Errorf("patches %q, want none", patches)
				}
				return
			}
			if len(patches) != 1 {
				t.Fatalf("patches %q, want one", patches)
			}
			var got struct {
				Metadata struct {
					UID             string         `json:"uid"`
					ResourceVersion string         `json:"resourceVersion"`
					Annotations     map[string]any `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(patches[0], &got); err != nil {
				t.Fatal(err)
			}
			m := got.Metadata
			if m.UID != string(tc.obj.UID) || m.ResourceVersion != "5" || len(m.Annotations) != 1 || m.Annotations[StaleSinceAnnotation] != tc.wantPatch {
				t.Errorf("patch %s, want only %s set to %v under the object's uid and resourceVersion", patches[0], StaleSinceAnnotation, tc.wantPatch)
			}
		})
	}
}
