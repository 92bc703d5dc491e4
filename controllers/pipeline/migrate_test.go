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
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
	"github.com/ndsl/controller-manager/pkg/storageversion"
)

// The migration lists every Pipeline and writes each back through the
// status subresource, the one write the controller's RBAC allows on
// Pipelines.
func TestRewritePipelinesWritesEveryPipelineThroughStatus(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewSimpleClientset(
		&pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	)
	m := &storageMigration{pipelines: client}
	done, err := m.rewritePipelines(ctx)
	if err != nil || done != (storageversion.Rewritten{Written: 2}) {
		t.Fatalf("rewritePipelines = %+v, %v; want 2 written", done, err)
	}
	var requests []string
	for _, a := range client.Actions() {
		requests = append(requests, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
	}
	want := []string{"list pipelines/", "update pipelines/status", "update pipelines/status"}
	if !slices.Equal(requests, want) {
		t.Errorf("requests %q, want %q", requests, want)
	}
}
