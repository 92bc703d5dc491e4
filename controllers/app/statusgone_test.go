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

package app

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
)

// An App deleted while it was reconciled is not a failure: writing its
// status finds it gone, and the reconcile must neither fail, retry nor
// record a Warning.
func TestStatusOfADeletedAppIsNotAnError(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	c := &Controller{crdClient: fake.NewSimpleClientset(), recorder: recorder}
	app := &appv1.App{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	status := appv1.AppStatus{ObservedGeneration: 1}
	if err := c.updateStatus(context.Background(), app, status); err != nil {
		t.Fatalf("updating the status of a deleted App returned %v, want nil", err)
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("recorded %q for a deleted App", e)
	default:
	}
}
