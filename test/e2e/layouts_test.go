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

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/pkg/layout/layouttest"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// watchLayouts follows the manager's Leases (its earlier versions' too)
// for Leases of two layouts held at once; checkLayouts stops it.
func watchLayouts(t *testing.T) *layouttest.Watch {
	t.Helper()
	return layouttest.Start(t, cluster.Kube, framework.ManagerNamespace, framework.LeaseName, layout.LegacyNames(framework.LeaseName,
		[]string{appcontroller.ControllerName, ingress.ControllerName, pipeline.ControllerName, cleanup.ControllerName}))
}

// checkLayouts fails the test if w saw Leases of two layouts held at once,
// and stops it.
func checkLayouts(t *testing.T, w *layouttest.Watch, what string) {
	t.Helper()
	w.Stop()
	if overlaps := w.Overlaps(); len(overlaps) > 0 {
		t.Errorf("%s: Leases of two layouts held at once, %d times; first: %s", what, len(overlaps), overlaps[0])
	}
}

// waitLeaseHeldAmong waits until one of pods holds the Lease called name.
func waitLeaseHeldAmong(t *testing.T, name string, pods []corev1.Pod) {
	t.Helper()
	eventually(t, managerLeaseDuration+30*time.Second, fmt.Sprintf("one of %v to hold Lease %s", podNames(pods), name), func(ctx context.Context) (bool, error) {
		lease, err := cluster.Kube.CoordinationV1().Leases(framework.ManagerNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == pod }), nil
	})
}
