package pipeline

import (
	"context"
	"testing"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned/fake"
)

// A Pipeline deleted while it was reconciled is not a failure: writing its
// status finds it gone, and the reconcile must neither fail nor retry
// (the e2e suite on kind saw "Reconcile failed" logged for it).
func TestStatusOfADeletedPipelineIsNotAnError(t *testing.T) {
	c := &Controller{crdClient: fake.NewSimpleClientset()}
	p := samplePipeline()
	status := pipelinev1beta1.PipelineStatus{Phase: "Pending"}
	if err := c.updateStatus(context.Background(), p, status); err != nil {
		t.Fatalf("updating the status of a deleted Pipeline returned %v, want nil", err)
	}
}
