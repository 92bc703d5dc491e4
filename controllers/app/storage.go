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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/storageversion"
)

// CRDName is the name of the Apps' CustomResourceDefinition.
const CRDName = "apps.ingress.example.com"

// storageMigration is what moves the stored Apps to the CRD's storage version.
type storageMigration struct {
	crds storageversion.CRDClient
	// apps is a client of its own, so that the rewrite does not take the
	// workers' share of the client's rate limit.
	apps versioned.Interface
}

// MigrateStorage has Run move every App stored at another version than the
// CRD's storage version to it, once (pkg/storageversion), beside the
// workers. crds and apps must write under the controller's Lease, as its
// other clients do, and apps must list every App. The manager asks it of
// one unit of the controller.
func (c *Controller) MigrateStorage(crds storageversion.CRDClient, apps versioned.Interface) {
	c.storage = &storageMigration{crds: crds, apps: apps}
}

// Run reconciles until ctx is done, as controller.Base's Run does, and
// migrates the stored Apps meanwhile when MigrateStorage asked it to; the
// migration ends with Run, to be taken up by the next leader if unfinished.
func (c *Controller) Run(ctx context.Context) {
	if c.storage == nil {
		c.Base.Run(ctx)
		return
	}
	storageversion.Beside(ctx, c.Base.Run, c.storage.crds, CRDName, c.storage.rewriteApps)
}

// rewriteApps writes every App back as listed through the status
// subresource: the API server re-encodes and stores the whole object at
// the storage version, and it needs only the apps/status update the
// controller has, and passes none of the Apps' admission webhooks and
// policies (they match apps, not apps/status).
func (m *storageMigration) rewriteApps(ctx context.Context) (storageversion.Rewritten, error) {
	list := func(ctx context.Context, o metav1.ListOptions) ([]*appv1.App, string, error) {
		apps, err := m.apps.AppV1().Apps(metav1.NamespaceAll).List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		items := make([]*appv1.App, len(apps.Items))
		for i := range apps.Items {
			items[i] = &apps.Items[i]
		}
		return items, apps.Continue, nil
	}
	write := func(ctx context.Context, app *appv1.App) error {
		_, err := m.apps.AppV1().Apps(app.Namespace).UpdateStatus(ctx, app, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		return err
	}
	return storageversion.RewriteEach(ctx, list, write)
}
