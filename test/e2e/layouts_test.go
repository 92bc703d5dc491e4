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
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/layout"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// layoutWatch follows the manager's Leases and records every moment at
// which unit Leases of two Lease layouts were held at once.
type layoutWatch struct {
	legacy   func(string) (string, bool)
	mu       sync.Mutex
	held     map[string]string // held unit Lease → its layout
	overlaps []string
	stop     context.CancelFunc
}

// watchLayouts starts following the manager's Leases; check stops it.
func watchLayouts(t *testing.T) *layoutWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &layoutWatch{held: map[string]string{}, stop: cancel, legacy: layout.LegacyNames(framework.LeaseName,
		[]string{appcontroller.ControllerName, ingress.ControllerName, pipeline.ControllerName, cleanup.ControllerName})}
	factory := informers.NewSharedInformerFactoryWithOptions(cluster.Kube, 0, informers.WithNamespace(framework.ManagerNamespace))
	informer := factory.Coordination().V1().Leases().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    w.saw,
		UpdateFunc: func(_, obj any) { w.saw(obj) },
		DeleteFunc: func(obj any) {
			if lease, ok := obj.(*coordinationv1.Lease); ok {
				w.mu.Lock()
				delete(w.held, lease.Name)
				w.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return w
}

// saw records a unit Lease as held by its layout (stated, or for a version
// before layouts told by its name), or not held: no holder, or a fence's
// stand-in holder, in parentheses.
func (w *layoutWatch) saw(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok || lease.Name == layout.FenceName(framework.LeaseName) {
		return
	}
	l := lease.Labels[layout.Label]
	if lease.Labels[layout.GroupLabel] != framework.LeaseName {
		var unit bool
		if l, unit = w.legacy(lease.Name); !unit || lease.Labels[layout.GroupLabel] != "" {
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" || strings.HasPrefix(holder, "(") {
		delete(w.held, lease.Name)
		return
	}
	w.held[lease.Name] = l
	layouts := map[string]bool{}
	for _, l := range w.held {
		layouts[l] = true
	}
	if len(layouts) > 1 {
		w.overlaps = append(w.overlaps, fmt.Sprintf("%s %v", time.Now().UTC().Format("15:04:05.000"), maps.Clone(w.held)))
	}
}

// check fails the test if Leases of two layouts were held at once, and
// stops following them.
func (w *layoutWatch) check(t *testing.T, what string) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.overlaps) > 0 {
		t.Errorf("%s: Leases of two layouts held at once, %d times; first: %s", what, len(w.overlaps), w.overlaps[0])
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
