package cleanup

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/pkg/controller"
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

func meta(ns, name string, owner *corev1.Service, managed bool, keep bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}
	if managed {
		m.Labels[controller.ManagedByLabel] = controller.ManagedByValue
	}
	if keep {
		m.Annotations = map[string]string{cleanup.KeepAnnotation: "true"}
	}
	m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, corev1.SchemeGroupVersion.WithKind("Service"))}
	return m
}

func newFamily(t *testing.T, client kubernetes.Interface) family {
	t.Helper()
	ctx := context.Background()
	ns := framework.CreateNamespace(t, client)
	owner, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
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
	return family{ns: ns, owner: owner}
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
func TestOrphansAreRemovedAfterTheStalePeriodOnly(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	client := cp.Client
	f := newFamily(t, client)
	cfg := framework.ServiceAccountWithClusterRoles(t, cp, f.ns, "rbac/cleanup-controller.yaml")
	framework.StartManager(t, cfg, sweeper(false))
	orphanedAt := f.orphan(t, client)

	for _, o := range orphans {
		framework.Eventually(t, 30*time.Second, o.kind+" "+o.name+" to be removed", func(ctx context.Context) (bool, error) {
			found, err := exists(ctx, client, f.ns, o.kind, o.name)
			return !found, err
		})
		if gone := time.Since(orphanedAt); gone < stalePeriod {
			t.Errorf("%s %s removed %s after it was orphaned, before the stale period of %s", o.kind, o.name, gone, stalePeriod)
		}
	}
	// Swept in the same sweeps, these must still be there.
	ctx := context.Background()
	for _, name := range []string{"unlabelled-deploy", "kept-deploy"} {
		if found, err := exists(ctx, client, f.ns, "Deployment", name); err != nil || !found {
			t.Errorf("Deployment %s was removed (err %v): it is not the sweeper's to remove", name, err)
		}
	}
	events, err := client.CoreV1().Events(f.ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "RemovedStale").String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) < len(orphans) {
		t.Errorf("%d RemovedStale events, want one per removed object (%d)", len(events.Items), len(orphans))
	}
}

func TestDryRunRemovesNothingButReports(t *testing.T) {
	framework.RequireCRDs(t, cp.Config)
	client := cp.Client
	f := newFamily(t, client)
	m := framework.StartManager(t, cp.Config, sweeper(true))
	f.orphan(t, client)

	framework.Eventually(t, 30*time.Second, "a WouldRemoveStale event for each orphan", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events(f.ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("reason", "WouldRemoveStale").String()})
		return err == nil && len(events.Items) >= len(orphans), err
	})
	for _, o := range orphans {
		if found, err := exists(context.Background(), client, f.ns, o.kind, o.name); err != nil || !found {
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
