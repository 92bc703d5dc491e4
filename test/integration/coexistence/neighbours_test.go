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

package coexistence

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

// TestAppBesidePipeline runs, in one namespace, Pipeline coexist-mix with a
// step llm and an App named coexist-mix-llm, as the step's children and
// pods were named and labelled: both converge, and each Service routes only
// to its own owner's pods.
func TestAppBesidePipeline(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	p := createPipeline(t, newPipeline("coexist-mix", ns, step("llm", gpuNodeA)))
	pipelineReady(t, p.Name)
	app := createApp(t, ns, newApp("coexist-mix-llm", ptr.To[int32](2), true))
	appNotBlocked(t, ns, app.Name)

	appDeployment := deploymentOf(t, ns, app.UID)
	appService := serviceOf(t, ns, app.UID)
	stepDeployment := deploymentOf(t, ns, p.UID)
	stepService := serviceOf(t, ns, p.UID)
	available(t, ns, appDeployment.Name, 2)
	available(t, ns, stepDeployment.Name, 1)

	routing := func(ctx context.Context) error {
		if err := routesOnlyTo(ctx, ns, appService.Name, appDeployment.UID, stepDeployment.UID); err != nil {
			return err
		}
		return routesOnlyTo(ctx, ns, stepService.Name, stepDeployment.UID, appDeployment.UID)
	}
	eventually(t, "each Service to route to its own pods", func(ctx context.Context) (bool, error) {
		err := routing(ctx)
		if errors.As(err, new(misrouted)) {
			t.Fatal(err)
		}
		return err == nil, err
	})
	holds(t, "each Service routing to its own pods only", routing)
}

// appNotBlocked waits until the manager has reconciled the App's latest
// generation and does not report it Degraded (e.g. a child's name taken).
func appNotBlocked(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "App "+name+" reconciled and not Degraded", func(ctx context.Context) (bool, error) {
		app, err := getApp(ctx, t, ns, name)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(app.Status.Conditions, appv1beta1.ConditionDegraded)
		if app.Status.ObservedGeneration != app.Generation || c == nil || c.Status == metav1.ConditionTrue {
			return false, errorf("generation %d observed %d, Degraded %+v", app.Generation, app.Status.ObservedGeneration, c)
		}
		return true, nil
	})
}
