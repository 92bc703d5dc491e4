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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/storageversion"
)

// CRDName is the name of the Pipelines' CustomResourceDefinition.
const CRDName = "pipelines.distri-infer.ndsl.cn"

// storageMigration is what moves the stored Pipelines to the CRD's storage
// version.
type storageMigration struct {
	crds storageversion.CRDClient
	// pipelines is a client of its own, so that the rewrite does not take
	// the workers' share of the client's rate limit.
	pipelines versioned.Interface
}

// MigrateStorage has Run move every Pipeline stored at another version than
// the CRD's storage version to it, once (pkg/storageversion), beside the
// workers. crds and pipelines must write under the controller's Lease, as
// its other clients do, and pipelines must list every Pipeline. The manager
// asks it of one unit of the controller.
func (c *Controller) MigrateStorage(crds storageversion.CRDClient, pipelines versioned.Interface) {
	c.storage = &storageMigration{crds: crds, pipelines: pipelines}
}

// Run reconciles until ctx is done, as controller.Base's Run does, and
// migrates the stored Pipelines meanwhile when MigrateStorage asked it to;
// the migration ends with Run, to be taken up by the next leader if
// unfinished.
func (c *Controller) Run(ctx context.Context) {
	if c.storage == nil {
		c.Base.Run(ctx)
		return
	}
	storageversion.Beside(ctx, c.Base.Run, c.storage.crds, CRDName, c.storage.rewritePipelines)
}

// rewritePipelines writes every Pipeline back as listed through the status
// subresource: the API server re-encodes and stores the whole object at the
// storage version. It needs only the pipelines/status update the controller
// has, and passes none of the Pipelines' admission webhooks and policies
// (they match pipelines, not pipelines/status).
func (m *storageMigration) rewritePipelines(ctx context.Context) (storageversion.Rewritten, error) {
	list := func(ctx context.Context, o metav1.ListOptions) ([]*pipelinev1.Pipeline, string, error) {
		pipelines, err := m.pipelines.PipelineV1().Pipelines().List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		items := make([]*pipelinev1.Pipeline, len(pipelines.Items))
		for i := range pipelines.Items {
			items[i] = &pipelines.Items[i]
		}
		return items, pipelines.Continue, nil
	}
	write := func(ctx context.Context, p *pipelinev1.Pipeline) error {
		_, err := m.pipelines.PipelineV1().Pipelines().UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		return err
	}
	return storageversion.RewriteEach(ctx, list, write)
}
