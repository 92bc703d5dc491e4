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
	"testing"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
)

// A Pipeline deleted while it was reconciled is not a failure: writing its
// status finds it gone, and the reconcile must neither fail nor retry
// (the e2e suite on kind saw "Reconcile failed" logged for it).
func TestStatusOfADeletedPipelineIsNotAnError(t *testing.T) {
	c := &Controller{crdClient: fake.NewSimpleClientset()}
	p := stored(samplePipeline())
	status := pipelinev1.PipelineStatus{Phase: "Pending"}
	if err := c.updateStatus(context.Background(), p, status); err != nil {
		t.Fatalf("updating the status of a deleted Pipeline returned %v, want nil", err)
	}
}
