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

package ingress

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// A Service the cache does not hold (its informer keeps only the Wanted
// ones) is read live only when it controls an Ingress, and that Ingress is
// deleted only when the Service is there, the same object, and asks for no
// Ingress.
func TestSyncOfAServiceNotCached(t *testing.T) {
	var served corev1.Service
	var ing networkingv1.Ingress
	for file, obj := range map[string]any{"testdata/served-service.json": &served, "testdata/served-ingress.json": &ing} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, obj); err != nil {
			t.Fatal(err)
		}
	}
	unannotated := served.DeepCopy()
	unannotated.Annotations = nil
	replaced := unannotated.DeepCopy()
	replaced.UID = "another"
	ownedByApp := ing.DeepCopy()
	ownedByApp.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ingress.example.com/v1beta1", Kind: "App", Name: ing.Name, UID: "app", Controller: ptr.To(true)}}

	cases := []struct {
		name    string
		ingress *networkingv1.Ingress // in the cache, nil: none
		live    *corev1.Service       // on the API server, nil: none
		want    []string              // verb resource of each request
	}{
		{name: "no Ingress", live: unannotated},
		{name: "an Ingress another kind controls", ingress: ownedByApp, live: unannotated},
		{name: "the Service is gone", ingress: &ing, want: []string{"get services"}},
		{name: "a new Service of the name", ingress: &ing, live: replaced, want: []string{"get services"}},
		{name: "the cache is behind an annotated Service", ingress: &ing, live: &served, want: []string{"get services"}},
		{name: "the Service lost its annotations", ingress: &ing, live: unannotated, want: []string{"get services", "delete ingresses"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.live != nil {
				objs = append(objs, tc.live)
			}
			if tc.ingress != nil {
				objs = append(objs, tc.ingress)
			}
			kube := kubefake.NewClientset(objs...)
			factory := kubeinformers.NewSharedInformerFactory(kube, 0)
			services, ingresses := factory.Core().V1().Services(), factory.Networking().V1().Ingresses()
			c, err := NewController(services, ingresses, kube, record.NewFakeRecorder(10), DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if tc.ingress != nil {
				if err := ingresses.Informer().GetIndexer().Add(tc.ingress); err != nil {
					t.Fatal(err)
				}
			}
			kube.ClearActions()
			if _, err := c.sync(context.Background(), controller.Key{Namespace: served.Namespace, Name: served.Name}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range kube.Actions() {
				got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("requests %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWanted(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		want        bool
	}{
		{map[string]string{AnnotationEnabled: "true"}, true},
		{map[string]string{AnnotationEnabled: "false"}, true}, // its Ingress, if any, goes
		{map[string]string{AnnotationHost: "h"}, true},
		{map[string]string{"ingress.example.com/x": ""}, false},
		{map[string]string{"team": "shop"}, false},
		{nil, false},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
		if got := Wanted(svc); got != tc.want {
			t.Errorf("Wanted(%v) = %v, want %v", tc.annotations, got, tc.want)
		}
	}
}
