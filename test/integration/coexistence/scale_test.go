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
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
)

// TestHPAScalesApp runs a real HPA on an App through the App's scale
// subresource: it scales the App from 1 to 3, the Deployment follows, and
// then nothing moves: no oscillation, and no more writes by the manager.
func TestHPAScalesApp(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	app := createApp(t, ns, newApp("scaled", ptr.To[int32](1), false))
	d := deploymentOf(t, ns, app.UID)
	available(t, ns, d.Name, 1)
	loadPods(t, ns)
	createHPA(t, ns, autoscalingv2.CrossVersionObjectReference{
		APIVersion: appv1beta1.SchemeGroupVersion.String(), Kind: "App", Name: app.Name,
	})

	eventually(t, "the HPA to scale App scaled to 3", func(ctx context.Context) (bool, error) {
		app, err := getApp(ctx, t, ns, "scaled")
		if err != nil {
			return false, err
		}
		if got := ptr.Deref(app.Spec.Replicas, 0); got != maxReplicas {
			return false, errorf("App spec.replicas %d; HPA: %s", got, hpaStatus(ctx, ns))
		}
		return true, nil
	})
	available(t, ns, d.Name, maxReplicas)
	eventually(t, "App scaled to report 3 replicas", func(ctx context.Context) (bool, error) {
		app, err := getApp(ctx, t, ns, "scaled")
		if err != nil {
			return false, err
		}
		if app.Status.Replicas != maxReplicas {
			return false, errorf("status.replicas %d", app.Status.Replicas)
		}
		return true, nil
	})

	settled := reconciled(t, ns, "scaled")
	scaled, err := getDeployment(context.Background(), ns, d.Name)
	if err != nil {
		t.Fatal(err)
	}
	writes := managerWrites(deploymentsPath(ns), d.Name)
	holds(t, "App and Deployment at 3 replicas, untouched", func(ctx context.Context) error {
		app, err := getApp(ctx, t, ns, "scaled")
		if err != nil {
			return err
		}
		dep, err := getDeployment(ctx, ns, d.Name)
		if err != nil {
			return err
		}
		switch {
		case ptr.Deref(app.Spec.Replicas, 0) != maxReplicas || app.Generation != settled.Generation:
			return errorf("App spec.replicas %d generation %d (was %d); HPA: %s",
				ptr.Deref(app.Spec.Replicas, 0), app.Generation, settled.Generation, hpaStatus(ctx, ns))
		case ptr.Deref(dep.Spec.Replicas, 0) != maxReplicas || dep.Generation != scaled.Generation:
			return errorf("Deployment spec.replicas %d generation %d (was %d)", ptr.Deref(dep.Spec.Replicas, 0), dep.Generation, scaled.Generation)
		case managerWrites(deploymentsPath(ns), d.Name) != writes:
			return errorf("the manager wrote the Deployment %d more times", managerWrites(deploymentsPath(ns), d.Name)-writes)
		}
		return nil
	})
}

// TestHPAOnAppDeployment puts an HPA on the Deployment of an App that
// leaves replicas unset: the HPA scales the Deployment and the manager
// leaves the replicas to it, with no write.
func TestHPAOnAppDeployment(t *testing.T) {
	t.Parallel()
	requireSuite(t)
	ns := newNamespace(t)
	app := createApp(t, ns, newApp("unscaled", nil, false))
	d := deploymentOf(t, ns, app.UID)
	available(t, ns, d.Name, 1)
	reconciled(t, ns, app.Name)
	writes := managerWrites(deploymentsPath(ns), d.Name)
	loadPods(t, ns)
	createHPA(t, ns, deploymentTarget(d.Name))
	scaledBy(t, ns, d.Name)
	leftToHPA(t, ns, d.Name, writes)
}

// leftToHPA checks over the window that the HPA's replicas stay and that
// the manager has not written the Deployment since it made writes of them.
func leftToHPA(t *testing.T, ns, deployment string, writes int) {
	t.Helper()
	holds(t, "the HPA's replicas on Deployment "+deployment, func(ctx context.Context) error {
		dep, err := getDeployment(ctx, ns, deployment)
		if err != nil {
			return err
		}
		if got := ptr.Deref(dep.Spec.Replicas, 0); got != maxReplicas {
			return errorf("Deployment spec.replicas %d, want the HPA's %d; HPA: %s", got, maxReplicas, hpaStatus(ctx, ns))
		}
		if n := managerWrites(deploymentsPath(ns), deployment) - writes; n != 0 {
			return errorf("the manager wrote the Deployment %d times since the HPA was created (spec.replicas now %d)", n, ptr.Deref(dep.Spec.Replicas, 0))
		}
		return nil
	})
}
