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
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	// timeout bounds every wait for convergence: pods on kwok nodes need the
	// scheduler, the deployment and replicaset controllers and kwok, and the
	// machine may be loaded.
	timeout = 2 * time.Minute
	// window is how long a settled state must hold: several HPA syncs (1 s)
	// and the manager's reaction to every event in between.
	window = 8 * time.Second
)

// newNamespace creates a namespace for the test, deleted when it ends.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := framework.CreateNamespace(t, cp.Client)
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// crdClient is an admin client for Apps and Pipelines.
func crdClient(t *testing.T) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pollInterval is how often conditions are checked.
const pollInterval = 100 * time.Millisecond

// callTimeout bounds one check's requests, so that a slow API server does
// not stall a poll; the check's error then says so.
const callTimeout = 10 * time.Second

// eventually polls cond until it holds, failing the test after timeout with
// what and cond's last error, which should say what was seen instead.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

// poll calls cond until it holds or d passes, and returns its last error
// (or that it did not hold). Each call gets a context of its own, so that
// the deadline never shows up as the last error in place of what was seen.
func poll(d time.Duration, cond func(ctx context.Context) (bool, error)) error {
	deadline := time.Now().Add(d)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		ok, err := cond(ctx)
		cancel()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("condition not met")
			}
			return last
		}
		<-ticker.C
	}
}

// holds checks for the whole window and fails the test at the first
// violation (an error of errorf, or misrouted), which says what changed.
// Other errors, such as a request that timed out, are no evidence either
// way and are retried.
func holds(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	var failure error
	_ = poll(window, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		if errors.As(err, new(violation)) || errors.As(err, new(misrouted)) {
			failure = err
		}
		return failure != nil, nil
	})
	if failure != nil {
		t.Fatalf("%s did not hold for %s: %v", what, window, failure)
	}
}

// newApp is an App of one container on port 80.
func newApp(name string, replicas *int32, service bool) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: replicas, EnableService: service},
	}
}

// createApp creates app in ns.
func createApp(t *testing.T, ns string, app *appv1beta1.App) *appv1beta1.App {
	t.Helper()
	created, err := crdClient(t).AppV1beta1().Apps(ns).Create(context.Background(), app, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating App %s: %v", app.Name, err)
	}
	return created
}

// getApp reads the App.
func getApp(ctx context.Context, t *testing.T, ns, name string) (*appv1beta1.App, error) {
	return crdClient(t).AppV1beta1().Apps(ns).Get(ctx, name, metav1.GetOptions{})
}

// patchAppSpec merge-patches the App's spec, as a user would.
func patchAppSpec(t *testing.T, ns, name, spec string) *appv1beta1.App {
	t.Helper()
	app, err := crdClient(t).AppV1beta1().Apps(ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"spec":`+spec+`}`), metav1.PatchOptions{FieldManager: "user"})
	if err != nil {
		t.Fatalf("patching App %s with %s: %v", name, spec, err)
	}
	return app
}

// reconciled waits until the App's status describes its latest generation:
// the manager has reconciled it since its last spec change.
func reconciled(t *testing.T, ns, name string) *appv1beta1.App {
	t.Helper()
	var app *appv1beta1.App
	eventually(t, "App "+name+" to be reconciled", func(ctx context.Context) (bool, error) {
		var err error
		if app, err = getApp(ctx, t, ns, name); err != nil {
			return false, err
		}
		if app.Status.ObservedGeneration != app.Generation {
			return false, fmt.Errorf("observedGeneration %d, generation %d", app.Status.ObservedGeneration, app.Generation)
		}
		return true, nil
	})
	return app
}

// controlledBy holds when obj's controller reference names the owner's UID.
func controlledBy(obj metav1.Object, owner types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner
}

// deploymentOf waits for the one Deployment in ns controlled by owner.
func deploymentOf(t *testing.T, ns string, owner types.UID) *appsv1.Deployment {
	t.Helper()
	var found *appsv1.Deployment
	eventually(t, fmt.Sprintf("a Deployment in %s controlled by %s", ns, owner), func(ctx context.Context) (bool, error) {
		list, err := cp.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var mine []*appsv1.Deployment
		for i := range list.Items {
			if controlledBy(&list.Items[i], owner) {
				mine = append(mine, &list.Items[i])
			}
		}
		if len(mine) != 1 {
			return false, fmt.Errorf("%d Deployments controlled by it", len(mine))
		}
		found = mine[0]
		return true, nil
	})
	return found
}

// serviceOf waits for the one Service in ns controlled by owner.
func serviceOf(t *testing.T, ns string, owner types.UID) *corev1.Service {
	t.Helper()
	var found *corev1.Service
	eventually(t, fmt.Sprintf("a Service in %s controlled by %s", ns, owner), func(ctx context.Context) (bool, error) {
		list, err := cp.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var mine []*corev1.Service
		for i := range list.Items {
			if controlledBy(&list.Items[i], owner) {
				mine = append(mine, &list.Items[i])
			}
		}
		if len(mine) != 1 {
			return false, fmt.Errorf("%d Services controlled by it", len(mine))
		}
		found = mine[0]
		return true, nil
	})
	return found
}

// getDeployment reads a Deployment.
func getDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

// available waits until the Deployment has rolled out its latest
// generation with replicas available pods, and returns it.
func available(t *testing.T, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, fmt.Sprintf("Deployment %s to run %d available pods", name, replicas), func(ctx context.Context) (bool, error) {
		var err error
		if d, err = getDeployment(ctx, ns, name); err != nil {
			return false, err
		}
		s := d.Status
		if s.ObservedGeneration != d.Generation || ptr.Deref(d.Spec.Replicas, 1) != replicas || s.Replicas != replicas ||
			s.UpdatedReplicas != replicas || s.AvailableReplicas != replicas {
			return false, fmt.Errorf("spec.replicas %d, generation %d, status %+v", ptr.Deref(d.Spec.Replicas, 1), d.Generation, s)
		}
		return true, nil
	})
	return d
}

// managerWrites counts the manager's writes to the named object of a
// resource path such as /apis/apps/v1/namespaces/ns/deployments.
func managerWrites(collection, name string) int {
	n := 0
	for request, count := range manager.Writes.ByRequest() {
		if strings.HasSuffix(request, " "+collection+"/"+name) {
			n += count
		}
	}
	return n
}

// deploymentsPath is the collection path of Deployments in ns.
func deploymentsPath(ns string) string { return "/apis/apps/v1/namespaces/" + ns + "/deployments" }

// servicesPath is the collection path of Services in ns.
func servicesPath(ns string) string { return "/api/v1/namespaces/" + ns + "/services" }

// violation is what a check saw instead of what it wants.
type violation struct{ error }

// errorf is fmt.Errorf for what a check saw instead of what it wants, as
// opposed to an error that kept it from looking.
func errorf(format string, args ...any) error { return violation{fmt.Errorf(format, args...)} }
