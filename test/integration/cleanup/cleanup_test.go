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

package cleanup

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const stalePeriod = 2 * time.Second

func sweeper(dryRun bool) func(*options.Options) {
	return func(o *options.Options) {
		o.Generic.Controllers = []string{cleanup.ControllerName}
		o.Cleanup.Interval = time.Second
		o.Cleanup.StalePeriod = stalePeriod
		o.Cleanup.DryRun = dryRun
	}
}

// family is an owner Service with children of every namespaced kind the
// sweeper handles, in a few variants.
type family struct {
	ns    string
	owner *corev1.Service
}

func meta(ns, name string, owner metav1.OwnerReference, managed bool, keep bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}
	if managed {
		m.Labels[controller.ManagedByLabel] = controller.ManagedByValue
	}
	if keep {
		m.Annotations = map[string]string{cleanup.KeepAnnotation: "true"}
	}
	m.OwnerReferences = []metav1.OwnerReference{owner}
	return m
}

// goneApp is a controller reference to an App that does not exist, in a
// version the API server does not serve (as after a CRD version is removed).
// The garbage collector cannot map that version and retries for ever
// (restMappingError), so it leaves the children alone: whatever removes them
// is the sweeper, which looks owners up by group and kind.
func goneApp() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "ingress.example.com/v1alpha1", Kind: "App", Name: "gone",
		UID: uuid.NewUUID(), Controller: ptr.To(true)}
}

// newFamily creates the children controlled by a live owner Service.
func newFamily(t *testing.T, client kubernetes.Interface) family {
	t.Helper()
	ns := framework.CreateNamespace(t, client)
	owner, err := client.CoreV1().Services(ns).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createChildren(t, client, ns, *metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("Service")))
	return family{ns: ns, owner: owner}
}

// newDanglingFamily creates the children controlled by an App that is gone.
func newDanglingFamily(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	ns := framework.CreateNamespace(t, client)
	createChildren(t, client, ns, goneApp())
	return ns
}

func createChildren(t *testing.T, client kubernetes.Interface, ns string, owner metav1.OwnerReference) {
	t.Helper()
	ctx := context.Background()
	deployment := func(name string, managed, keep bool) {
		one := int32(1)
		d := &appsv1.Deployment{
			ObjectMeta: meta(ns, name, owner, managed, keep),
			Spec: appsv1.DeploymentSpec{
				Replicas: &one,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
				},
			},
		}
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deployment("orphan-deploy", true, false)
	deployment("unlabelled-deploy", false, false)
	deployment("kept-deploy", true, true)
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: meta(ns, "orphan-svc", owner, true, false),
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: meta(ns, "orphan-pvc", owner, true, false),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// orphan deletes the owner the way `kubectl delete --cascade=orphan` does and
// waits until the garbage collector has stripped the children's references.
func (f family) orphan(t *testing.T, client kubernetes.Interface) time.Time {
	t.Helper()
	orphan := metav1.DeletePropagationOrphan
	at := time.Now()
	if err := client.CoreV1().Services(f.ns).Delete(context.Background(), "owner",
		metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the garbage collector to orphan the children", func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(f.ns).Get(ctx, "orphan-deploy", metav1.GetOptions{})
		return err == nil && len(d.OwnerReferences) == 0, err
	})
	return at
}

func exists(ctx context.Context, client kubernetes.Interface, ns, kind, name string) (bool, error) {
	var err error
	switch kind {
	case "Deployment":
		_, err = client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	case "Service":
		_, err = client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	case "PersistentVolumeClaim":
		_, err = client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

var orphans = []struct{ kind, name string }{
	{"Deployment", "orphan-deploy"}, {"Service", "orphan-svc"}, {"PersistentVolumeClaim", "orphan-pvc"},
}

// The sweeper runs as a ServiceAccount with only the shipped ClusterRole.
func TestChildrenOfAGoneOwnerAreRemovedAfterTheStalePeriodOnly(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	client := cp.Client
	ns := newDanglingFamily(t, client)
	cfg := framework.ServiceAccountWithClusterRoles(t, cp, ns, "components/cleanup/cleanup-controller.yaml")
	startedAt := time.Now() // the children are stale from the first sweep on
	framework.StartManager(t, cfg, sweeper(false))

	for _, o := range orphans {
		framework.Eventually(t, 30*time.Second, o.kind+" "+o.name+" to be removed", func(ctx context.Context) (bool, error) {
			found, err := exists(ctx, client, ns, o.kind, o.name)
			return !found, err
		})
		if gone := time.Since(startedAt); gone < stalePeriod {
			t.Errorf("%s %s removed %s after the sweeper started, before the stale period of %s", o.kind, o.name, gone, stalePeriod)
		}
	}
	// Swept in the same sweeps, these must still be there.
	ctx := context.Background()
	for _, name := range []string{"unlabelled-deploy", "kept-deploy"} {
		if found, err := exists(ctx, client, ns, "Deployment", name); err != nil || !found {
			t.Errorf("Deployment %s was removed (err %v): it is not the sweeper's to remove", name, err)
		}
	}
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "RemovedStale").String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) < len(orphans) {
		t.Errorf("%d RemovedStale events, want one per removed object (%d)", len(events.Items), len(orphans))
	}
}

// Defect 4 of issue 12: `kubectl delete --cascade=orphan` leaves the
// children on purpose. The garbage collector removes the owner's references
// from them before the owner goes, so they carry none: the sweeper must
// leave them alone.
func TestChildrenOrphanedOnPurposeAreKept(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	client := cp.Client
	f := newFamily(t, client)
	cfg := framework.ServiceAccountWithClusterRoles(t, cp, f.ns, "components/cleanup/cleanup-controller.yaml")
	framework.StartManager(t, cfg, sweeper(false))
	f.orphan(t, client)

	waitSweptPastStalePeriod(t)
	ctx := context.Background()
	for _, o := range orphans {
		if found, err := exists(ctx, client, f.ns, o.kind, o.name); err != nil || !found {
			t.Errorf("%s %s, orphaned on purpose, was removed (err %v)", o.kind, o.name, err)
		}
	}
}

// Defect 4 of issue 12: a model-storage PV whose claim does not exist yet
// (created before it, the claim blocked by quota, a conflict or a
// terminating namespace) belongs to a live Pipeline and must be kept.
func TestPVOfALivePipelineIsKept(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	ctx := context.Background()
	client := cp.Client
	ns := framework.CreateNamespace(t, client)
	crd, err := versioned.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	p, err := crd.PipelineV1beta1().Pipelines().Create(ctx, &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps:     []pipelinev1beta1.PipelineStep{{Model: "m", Image: "nginx:1.27"}},
			Namespace: ns,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type:         pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.0.2.1", "share": "/models"},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = crd.PipelineV1beta1().Pipelines().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	pv, err := client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ns + "-models",
			Labels:          map[string]string{controller.ManagedByLabel: controller.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(p, pipelinev1beta1.SchemeGroupVersion.WithKind("Pipeline"))},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "models"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "nfs.csi.k8s.io", VolumeHandle: "192.0.2.1#/models#" + ns}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})

	cfg := framework.ServiceAccountWithClusterRoles(t, cp, ns, "components/cleanup/cleanup-controller.yaml")
	framework.StartManager(t, cfg, sweeper(false))
	waitSweptPastStalePeriod(t)
	got, err := client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Fatalf("PV %s of the live Pipeline %s was removed by the sweeper", pv.Name, p.Name)
	case err != nil:
		t.Fatal(err)
	case got.UID != pv.UID || got.DeletionTimestamp != nil:
		t.Fatalf("PV %s of the live Pipeline %s was removed by the sweeper (uid %s, deletion %v)", pv.Name, p.Name, got.UID, got.DeletionTimestamp)
	}
}

// sweeps is how many sweeps the managers of this process have started.
func sweeps(t *testing.T) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == "controller_manager_cleanup_sweeps_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// waitSweptPastStalePeriod waits until a sweep has seen the world as it is
// now, a whole stale period has passed, and a sweep has run after that: the
// sweeper has removed by then all it would remove.
func waitSweptPastStalePeriod(t *testing.T) {
	t.Helper()
	sweptAfter := func(what string) {
		t.Helper()
		// One worker: once the next sweep has started, the one running now
		// and any started since are done.
		want := sweeps(t) + 2
		framework.Eventually(t, 30*time.Second, what, func(context.Context) (bool, error) {
			return sweeps(t) >= want, nil
		})
	}
	sweptAfter("a sweep to see the objects stale")
	from := time.Now()
	framework.Eventually(t, 2*stalePeriod, "the stale period to pass", func(context.Context) (bool, error) {
		return time.Since(from) > stalePeriod, nil
	})
	sweptAfter("a sweep after the stale period")
}

func TestDryRunRemovesNothingButReports(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	client := cp.Client
	ns := newDanglingFamily(t, client)
	m := framework.StartManager(t, cp.Config, sweeper(true))

	framework.Eventually(t, 30*time.Second, "a WouldRemoveStale event for each orphan", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "WouldRemoveStale").String()})
		return err == nil && len(events.Items) >= len(orphans), err
	})
	for _, o := range orphans {
		if found, err := exists(context.Background(), client, ns, o.kind, o.name); err != nil || !found {
			t.Errorf("dry run removed %s %s (err %v)", o.kind, o.name, err)
		}
	}
	_, body, err := m.Get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `controller_manager_cleanup_removed_total{dry_run="true",kind="Deployment"}`) {
		t.Error("/metrics does not report dry-run removals")
	}
}

func TestDisabledByDefault(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	running := func(controllers ...string) []string {
		m := framework.StartManager(t, cp.Config, func(o *options.Options) { o.Generic.Controllers = controllers })
		var names []string
		framework.Eventually(t, 30*time.Second, "/debug/controllers to list running controllers", func(context.Context) (bool, error) {
			_, body, err := m.Get("/debug/controllers")
			if err != nil {
				return false, err
			}
			var debug struct {
				Controllers []struct {
					Name    string `json:"name"`
					Running bool   `json:"running"`
				} `json:"controllers"`
			}
			if err := json.Unmarshal([]byte(body), &debug); err != nil {
				return false, err
			}
			names = nil
			for _, c := range debug.Controllers {
				if !c.Running {
					return false, nil
				}
				names = append(names, c.Name)
			}
			return true, nil
		})
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		return names
	}
	contains := func(names []string, name string) bool {
		for _, n := range names {
			if n == name {
				return true
			}
		}
		return false
	}
	if names := running("*"); contains(names, cleanup.ControllerName) || len(names) == 0 {
		t.Errorf("--controllers=* runs %v: cleanup must be off by default", names)
	}
	if names := running("*", cleanup.ControllerName); !contains(names, cleanup.ControllerName) {
		t.Errorf("--controllers=*,cleanup runs %v: cleanup missing", names)
	}
}

// Defect 9 of issue 12: the sweeper reads the manager's shared informers,
// the ones the other controllers cache the same kinds in, and opens no second
// watch and cache of its own.
func TestSweeperSharesTheInformers(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	cfg, syncs := countInitialSyncs(cp.Config)
	before := sweeps(t)
	framework.StartManager(t, cfg, func(o *options.Options) {
		sweeper(false)(o)
		o.Generic.Controllers = []string{"*", cleanup.ControllerName}
	})
	framework.Eventually(t, 30*time.Second, "the first sweep, once every cache has synced", func(context.Context) (bool, error) {
		return sweeps(t) > before, nil
	})
	// Children's kinds through the informers selected by the managed-by
	// label; Services also unselected, the Ingress controller's inputs,
	// which its informer filters as they arrive: the owners of its Ingresses.
	managed := "?labelSelector=" + url.QueryEscape(controller.ManagedByLabel+"="+controller.ManagedByValue)
	for _, path := range []string{
		"/apis/apps/v1/deployments" + managed, "/api/v1/services" + managed, "/apis/networking.k8s.io/v1/ingresses" + managed,
		"/api/v1/persistentvolumeclaims" + managed, "/api/v1/persistentvolumes" + managed, "/api/v1/services",
		"/apis/ingress.example.com/v1beta1/apps", "/apis/distri-infer.ndsl.cn/v1beta1/pipelines",
	} {
		if n := syncs.count(path); n != 1 {
			t.Errorf("%s was listed %d times by the manager, want 1: one shared informer per kind and selector", path, n)
		}
	}
}

// initialSyncs counts, per collection path, the successful requests that
// fill an informer's cache: a LIST, or a WATCH that sends the initial events.
// (A request refused, say with 429, is retried by the same informer.)
type initialSyncs struct {
	mu     sync.Mutex
	byPath map[string]int
}

func (s *initialSyncs) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPath[path]
}

func countInitialSyncs(cfg *rest.Config) (*rest.Config, *initialSyncs) {
	s := &initialSyncs{byPath: map[string]int{}}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return framework.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			q := req.URL.Query()
			if err == nil && resp.StatusCode == http.StatusOK && req.Method == http.MethodGet &&
				(q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") {
				s.mu.Lock()
				path := req.URL.Path
				if selector := q.Get("labelSelector"); selector != "" {
					path += "?labelSelector=" + url.QueryEscape(selector)
				}
				s.byPath[path]++
				s.mu.Unlock()
			}
			return resp, err
		})
	})
	return out, s
}
