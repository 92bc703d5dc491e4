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

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// thief is the holder identity a stolen Lease names: no manager's.
const thief = "chaos-thief"

// runner carries out the steps of a schedule.
type runner struct {
	w    *world
	sup  *supervisor
	svc  *webhookService
	skew *skewServer
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// run carries out one step; targets are picked with the step's own random
// numbers among candidates sorted by name.
func (x *runner) run(ctx context.Context, s step) error {
	r := rand.New(rand.NewPCG(s.pick, uint64(s.kind)))
	x.w.mu.Lock()
	x.w.actions[s.kind]++
	n := x.w.actions[s.kind]
	x.w.mu.Unlock()
	switch s.kind {
	case killLeader:
		p, holder, err := x.waitLeader(ctx)
		if err != nil {
			return err
		}
		x.w.logf("kill -9 %s (pid %d, holder %s)", p.Name, p.Pid(), holder)
		return x.sup.kill(p)
	case pauseLeader:
		p, holder, err := x.waitLeader(ctx)
		if err != nil {
			return err
		}
		d := leaseDuration + 3*time.Second
		x.w.logf("SIGSTOP %s (pid %d, holder %s) for %v", p.Name, p.Pid(), holder, d)
		if err := x.sup.pause(ctx, p, d); err != nil {
			return err
		}
		x.w.logf("SIGCONT %s", p.Name)
		x.aftermath(ctx, p, holder)
		return nil
	case restartAPIServer:
		x.w.logf("restarting kube-apiserver")
		return x.w.c.ControlPlane.RestartAPIServer(ctx)
	case restartEtcd:
		x.w.logf("restarting etcd")
		return x.w.c.ControlPlane.RestartEtcd(ctx)
	case stealLease:
		return x.steal(ctx)
	case editChildren:
		return x.editChildren(ctx, r)
	case deleteChildren:
		return x.deleteChildren(ctx, r)
	case deleteClaims:
		return x.deleteClaims(ctx, r)
	case deleteNamespace:
		// Alternately the Pipelines' namespace (claims, a terminating
		// namespace, Retain volumes) and one of the Apps' namespaces.
		if n%2 == 1 {
			return x.deleteNamespace(ctx, pipelineNamespace)
		}
		x.w.mu.Lock()
		nss := slices.Clone(x.w.appNamespaces)
		x.w.mu.Unlock()
		if len(nss) <= 1 {
			return x.deleteNamespace(ctx, pipelineNamespace)
		}
		return x.deleteNamespace(ctx, nss[r.IntN(len(nss))])
	case editOwners:
		return x.editOwners(ctx, r)
	case deleteOwners:
		return x.deleteOwners(ctx, r)
	case rollout:
		return x.rollout(ctx)
	case certFlags:
		return x.changeCertFlags(ctx, r, n)
	case skewClock:
		return x.skewClock(ctx, r, n)
	case changeLayout:
		return x.changeLayout(ctx)
	}
	return fmt.Errorf("unknown step kind %d", s.kind)
}

// waitLeader waits up to 30 s for a running process to hold the Lease.
func (x *runner) waitLeader(ctx context.Context) (*framework.Process, string, error) {
	var p *framework.Process
	var holder string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, holder, err = x.sup.leader(ctx, x.w.c)
		return err == nil && p != nil, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("no running manager holds the Lease (holder %q): %w", holder, err)
	}
	return p, holder, nil
}

// aftermathBound bounds how long a step waits for the leader it paused or
// stole the Lease from to react: a manager that finds its Lease lost exits
// within about two seconds (README), more on a loaded machine.
const aftermathBound = 15 * time.Second

// aftermath waits, at most aftermathBound, until p, which held the Lease as
// holder before a pause or a theft, has either exited (it lost the Lease, as
// it must on seeing another holder) or holds the Lease again, renewed since
// the fault (nobody took it meanwhile). That exit is the fault's own
// consequence and belongs to the fault phase: without the wait, a pause or
// theft late in the schedule let the exit land after convergence, where any
// exit is a crash. A process that neither exits nor leads by then is left
// to the invariants.
func (x *runner) aftermath(ctx context.Context, p *framework.Process, holder string) {
	begin := time.Now()
	var now string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, aftermathBound, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return true, nil
		}
		l, err := x.w.c.Kube.CoordinationV1().Leases(framework.ManagerNamespace).Get(ctx, x.sup.targetLease(), metav1.GetOptions{})
		if err != nil {
			return false, nil // the API server may be restarting
		}
		// Renewed by p since the fault, not merely still naming it.
		now = ptr.Deref(l.Spec.HolderIdentity, "")
		return now == holder && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(begin), nil
	})
	switch {
	case p.Exited():
		x.w.logf("%s exited (%s) %v after the fault", p.Name, p.ExitDescription(), time.Since(begin).Round(100*time.Millisecond))
	case err == nil:
		x.w.logf("%s leads again", p.Name)
	default:
		x.w.logf("%s neither exited nor leads %v after the fault (holder %q)", p.Name, aftermathBound, now)
	}
}

// steal writes the Lease by hand to a holder that is no manager, as a
// confused operator or a split network would, and never renews it; then
// waits for the aftermath on the process it was stolen from.
func (x *runner) steal(ctx context.Context) error {
	victim, _, _ := x.sup.leader(ctx, x.w.c)
	var from string
	err := retrying(ctx, "stealing the Lease", func(ctx context.Context) error {
		leases := x.w.c.Kube.CoordinationV1().Leases(framework.ManagerNamespace)
		l, err := leases.Get(ctx, x.sup.targetLease(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		from = ptr.Deref(l.Spec.HolderIdentity, "")
		now := metav1.NewMicroTime(time.Now())
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(thief), LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	x.w.logf("stole the Lease from %s", from)
	if err != nil {
		return err
	}
	if victim != nil && victim.LogContains(`identity="`+from+`"`) {
		// It may lead again only by acquiring the Lease after the thief's
		// expires, which its exit on seeing the thief precludes.
		x.aftermath(ctx, victim, from)
	}
	return nil
}

// childResources are the resources the controllers write children of.
var childResources = map[string]schema.GroupVersionResource{
	"deployments":            appsv1.SchemeGroupVersion.WithResource("deployments"),
	"services":               corev1.SchemeGroupVersion.WithResource("services"),
	"ingresses":              networkingv1.SchemeGroupVersion.WithResource("ingresses"),
	"persistentvolumeclaims": corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"),
}

// child is a controller-owned object and its owner.
type child struct {
	key   objectKey
	owner objectKey
}

// ownedChildren lists the objects of resource controlled by an owner of
// kind, sorted by name.
func (x *runner) ownedChildren(ctx context.Context, resource, kind string) ([]child, error) {
	var out []child
	add := func(m metav1.Object) {
		ref := metav1.GetControllerOf(m)
		if ref == nil || ref.Kind != kind || m.GetDeletionTimestamp() != nil {
			return
		}
		owner := objectKey{strings.ToLower(kind) + "s", m.GetNamespace(), ref.Name}
		if kind == "Pipeline" {
			owner.namespace = ""
		}
		out = append(out, child{objectKey{resource, m.GetNamespace(), m.GetName()}, owner})
	}
	client, err := metadata.NewForConfig(x.w.c.Config)
	if err != nil {
		return nil, err
	}
	gvr, ok := childResources[resource]
	if !ok {
		return nil, fmt.Errorf("no child resource %q", resource)
	}
	err = retrying(ctx, "listing "+resource, func(ctx context.Context) error {
		out = nil
		l, err := client.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range l.Items {
			add(&l.Items[i])
		}
		return nil
	})
	slices.SortFunc(out, func(a, b child) int { return strings.Compare(a.key.String(), b.key.String()) })
	return out, err
}

// pickN picks up to n distinct elements.
func pickN[T any](r *rand.Rand, items []T, n int) []T {
	var out []T
	for _, i := range r.Perm(len(items))[:min(n, len(items))] {
		out = append(out, items[i])
	}
	return out
}

// patch sends a JSON merge patch as the admin (a user's kubectl edit).
func (x *runner) patch(ctx context.Context, key objectKey, body string) error {
	kube, p := x.w.c.Kube, []byte(body)
	return retrying(ctx, "editing "+key.String(), func(ctx context.Context) error {
		var err error
		switch key.resource {
		case "deployments":
			_, err = kube.AppsV1().Deployments(key.namespace).Patch(ctx, key.name, types.StrategicMergePatchType, p, metav1.PatchOptions{})
		case "services":
			_, err = kube.CoreV1().Services(key.namespace).Patch(ctx, key.name, types.StrategicMergePatchType, p, metav1.PatchOptions{})
		case "ingresses":
			_, err = kube.NetworkingV1().Ingresses(key.namespace).Patch(ctx, key.name, types.StrategicMergePatchType, p, metav1.PatchOptions{})
		}
		if isNotFound(err) {
			return nil // gone meanwhile: nothing to edit
		}
		return err
	})
}

// editChildren makes conflicting edits to children, as a user with kubectl
// would: replicas and image of Deployments, selectors of Services, hosts
// of Ingresses. The controllers must put them back.
func (x *runner) editChildren(ctx context.Context, r *rand.Rand) error {
	var edited []string
	for _, e := range []struct {
		resource, kind string
		n              int
		body           string
	}{
		{"deployments", "App", 5, `{"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"app","image":"chaos/edited:1"}]}}}}`},
		{"deployments", "Pipeline", 2, `{"spec":{"replicas":2}}`},
		{"services", "App", 2, `{"spec":{"selector":{"edited":"by-chaos"}}}`},
		{"ingresses", "Service", 3, `{"spec":{"rules":[{"host":"edited.chaos.example","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"edited","port":{"number":81}}}}]}}]}}`},
	} {
		children, err := x.ownedChildren(ctx, e.resource, e.kind)
		if err != nil {
			return err
		}
		for _, c := range pickN(r, children, e.n) {
			if err := x.patch(ctx, c.key, e.body); err != nil {
				return err
			}
			x.w.disturb(c.owner)
			edited = append(edited, c.key.String())
		}
	}
	x.w.logf("edited %d children: %s", len(edited), strings.Join(edited, " "))
	return nil
}

// deleteObject deletes key as the admin, with a UID precondition if given.
func deleteObject(ctx context.Context, c *framework.Cluster, key objectKey, uid *types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != nil {
		opts.Preconditions = &metav1.Preconditions{UID: uid}
	}
	switch key.resource {
	case "deployments":
		return c.Kube.AppsV1().Deployments(key.namespace).Delete(ctx, key.name, opts)
	case "services":
		return c.Kube.CoreV1().Services(key.namespace).Delete(ctx, key.name, opts)
	case "ingresses":
		return c.Kube.NetworkingV1().Ingresses(key.namespace).Delete(ctx, key.name, opts)
	case "persistentvolumeclaims":
		return c.Kube.CoreV1().PersistentVolumeClaims(key.namespace).Delete(ctx, key.name, opts)
	case "apps":
		return c.Typed.AppV1beta1().Apps(key.namespace).Delete(ctx, key.name, opts)
	case "pipelines":
		return c.Typed.PipelineV1beta1().Pipelines().Delete(ctx, key.name, opts)
	}
	return fmt.Errorf("deleting %s: unknown resource", key)
}

func (x *runner) deleteAll(ctx context.Context, keys []objectKey) error {
	for _, k := range keys {
		err := retrying(ctx, "deleting "+k.String(), func(ctx context.Context) error {
			if err := deleteObject(ctx, x.w.c, k, nil); err != nil && !isNotFound(err) {
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteChildren deletes controller-owned children of every kind.
func (x *runner) deleteChildren(ctx context.Context, r *rand.Rand) error {
	var keys []objectKey
	for _, e := range []struct {
		resource, kind string
		n              int
	}{{"deployments", "App", 3}, {"services", "App", 2}, {"ingresses", "App", 1}, {"ingresses", "Service", 3},
		{"deployments", "Pipeline", 1}, {"services", "Pipeline", 1}} {
		children, err := x.ownedChildren(ctx, e.resource, e.kind)
		if err != nil {
			return err
		}
		for _, c := range pickN(r, children, e.n) {
			keys = append(keys, c.key)
			x.w.disturb(c.owner)
		}
	}
	x.w.logf("deleting %d children: %v", len(keys), keys)
	return x.deleteAll(ctx, keys)
}

// claimGoneTimeout bounds how long deleteClaims keeps deleting the pods
// that hold a deleted claim before it carries on; a claim still there then
// shows up in the convergence check.
const claimGoneTimeout = time.Minute

// deleteClaims does what a user who wants a Pipeline's storage gone must
// do: delete the PVC, and then the pods that use it. Kubernetes keeps a
// claim that a scheduled pod uses (pvc-protection) until that pod is gone,
// so a claim deleted under running steps stays Terminating for as long as
// they run; the step Deployments' new pods are not scheduled while the
// claim is being deleted, and do not hold it. Once the claim is gone, its
// Retain volume still names the old claim's UID; the controller must create
// the claim again, release the stale claimRef, and the steps run again.
// The controller leaves running pods alone: see docs/reliability.md.
func (x *runner) deleteClaims(ctx context.Context, r *rand.Rand) error {
	claims, err := x.ownedChildren(ctx, "persistentvolumeclaims", "Pipeline")
	if err != nil {
		return err
	}
	var keys []objectKey
	for _, c := range pickN(r, claims, 2) {
		keys = append(keys, c.key)
		// Two changes: the claim, and the steps' pods.
		x.w.disturb(c.owner)
		x.w.disturb(c.owner)
	}
	x.w.logf("deleting claims %v, then the pods that use them", keys)
	for _, k := range keys {
		if err := x.deleteClaimAndPods(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// deleteClaimAndPods deletes the claim, then, until that claim is gone, the
// scheduled pods that use it.
func (x *runner) deleteClaimAndPods(ctx context.Context, k objectKey) error {
	claims, pods := x.w.c.Kube.CoreV1().PersistentVolumeClaims(k.namespace), x.w.c.Kube.CoreV1().Pods(k.namespace)
	var uid types.UID
	err := retrying(ctx, "deleting "+k.String(), func(ctx context.Context) error {
		pvc, err := claims.Get(ctx, k.name, metav1.GetOptions{})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		uid = pvc.UID
		if err := claims.Delete(ctx, k.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !isNotFound(err) {
			return err
		}
		return nil
	})
	if err != nil || uid == "" {
		return err
	}
	begin := time.Now()
	deleted := map[types.UID]bool{}
	err = wait.PollUntilContextTimeout(ctx, time.Second, claimGoneTimeout, true, func(ctx context.Context) (bool, error) {
		switch pvc, err := claims.Get(ctx, k.name, metav1.GetOptions{}); {
		case isNotFound(err) || err == nil && pvc.UID != uid:
			return true, nil
		case err != nil:
			return false, nil // the API server may be restarting
		}
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, pod := range l.Items {
			if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || deleted[pod.UID] || !usesClaim(&pod, k.name) {
				continue
			}
			podUID := pod.UID
			err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &podUID}})
			if err == nil || isNotFound(err) || apierrors.IsConflict(err) {
				deleted[pod.UID] = true
			}
		}
		return false, nil
	})
	if err != nil {
		x.w.logf("claim %s (uid %s) still there %v after its deletion, %d pods deleted: %v", k, uid, claimGoneTimeout, len(deleted), err)
		return nil
	}
	x.w.logf("claim %s (uid %s) gone %v after its deletion, %d pods deleted", k, uid, time.Since(begin).Round(100*time.Millisecond), len(deleted))
	return nil
}

// usesClaim reports whether pod mounts the claim name.
func usesClaim(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == name
	})
}

// deleteNamespace deletes a namespace with everything in it. The Apps of
// an App namespace go with it; the Pipelines' namespace is the
// controller's to create again.
func (x *runner) deleteNamespace(ctx context.Context, ns string) error {
	x.w.logf("deleting namespace %s", ns)
	// A change for every owner in it: its children go before it does, and
	// its status follows (the soak saw an App report its Deployment gone,
	// then a create refused in the terminating namespace, before the App
	// itself went).
	apps, pipelines, _, err := x.owners(ctx)
	if err != nil {
		return err
	}
	if ns == pipelineNamespace {
		// Every Pipeline loses its children and its claim.
		for _, k := range pipelines {
			x.w.disturb(k)
		}
	}
	for _, k := range apps {
		if k.namespace == ns {
			x.w.disturb(k)
		}
	}
	err = retrying(ctx, "deleting namespace "+ns, func(ctx context.Context) error {
		err := x.w.c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if isNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	x.w.mu.Lock()
	defer x.w.mu.Unlock()
	for _, o := range x.w.user {
		if o.key.namespace == ns && o.deleted.IsZero() {
			o.deleted = time.Now()
		}
	}
	if ns != pipelineNamespace {
		x.w.appNamespaces = slices.DeleteFunc(x.w.appNamespaces, func(s string) bool { return s == ns })
	}
	return nil
}

// apps lists the Apps of the live App namespaces, sorted.
func (x *runner) owners(ctx context.Context) (apps, pipelines, services []objectKey, err error) {
	x.w.mu.Lock()
	appNSs, svcNSs := slices.Clone(x.w.appNamespaces), slices.Clone(x.w.svcNamespaces)
	x.w.mu.Unlock()
	err = retrying(ctx, "listing owners", func(ctx context.Context) error {
		apps, pipelines, services = nil, nil, nil
		for _, ns := range appNSs {
			l, err := x.w.c.Typed.AppV1beta1().Apps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, a := range l.Items {
				apps = append(apps, appKey(ns, a.Name))
			}
		}
		l, err := x.w.c.Typed.PipelineV1beta1().Pipelines().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			pipelines = append(pipelines, pipelineKey(p.Name))
		}
		for _, ns := range svcNSs {
			l, err := x.w.c.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, s := range l.Items {
				if s.Labels[userLabel] == "" {
					services = append(services, serviceKey(ns, s.Name))
				}
			}
		}
		return nil
	})
	for _, l := range [][]objectKey{apps, pipelines, services} {
		slices.SortFunc(l, func(a, b objectKey) int { return strings.Compare(a.String(), b.String()) })
	}
	return apps, pipelines, services, err
}

// editOwners edits specs as users do: App replicas and image, Pipeline step
// replicas, and the ingress annotation of Services, on and off.
func (x *runner) editOwners(ctx context.Context, r *rand.Rand) error {
	apps, pipelines, services, err := x.owners(ctx)
	if err != nil {
		return err
	}
	typed := x.w.c.Typed
	var edited []string
	for _, k := range pickN(r, apps, 5) {
		replicas, image := 1+r.IntN(2), fmt.Sprintf("nginx:1.%d", 26+r.IntN(3))
		body := []byte(fmt.Sprintf(`{"spec":{"replicas":%d,"image":%q}}`, replicas, image))
		err := retrying(ctx, "editing "+k.String(), func(ctx context.Context) error {
			_, err := typed.AppV1beta1().Apps(k.namespace).Patch(ctx, k.name, types.MergePatchType, body, metav1.PatchOptions{})
			if isNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		x.w.disturbOwner(k)
		edited = append(edited, k.String())
	}
	for _, k := range pickN(r, pipelines, 2) {
		body := []byte(fmt.Sprintf(`[{"op":"replace","path":"/spec/steps/0/replicas","value":%d}]`, 1+r.IntN(2)))
		err := retrying(ctx, "editing "+k.String(), func(ctx context.Context) error {
			_, err := typed.PipelineV1beta1().Pipelines().Patch(ctx, k.name, types.JSONPatchType, body, metav1.PatchOptions{})
			if isNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		x.w.disturbOwner(k)
		edited = append(edited, k.String())
	}
	for _, k := range pickN(r, services, 3) {
		value := `"true"`
		if r.IntN(2) == 0 {
			value = "null"
		}
		body := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, ingress.AnnotationEnabled, value))
		err := retrying(ctx, "editing "+k.String(), func(ctx context.Context) error {
			_, err := x.w.c.Kube.CoreV1().Services(k.namespace).Patch(ctx, k.name, types.MergePatchType, body, metav1.PatchOptions{})
			if isNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		x.w.disturb(k)
		edited = append(edited, k.String()+"(annotation "+value+")")
	}
	x.w.logf("edited owners: %s", strings.Join(edited, " "))
	return nil
}

// deleteOwners deletes Apps, a Pipeline and annotated Services: their
// children must go (garbage collection) and nothing must come back.
func (x *runner) deleteOwners(ctx context.Context, r *rand.Rand) error {
	apps, pipelines, services, err := x.owners(ctx)
	if err != nil {
		return err
	}
	var keys []objectKey
	keys = append(keys, pickN(r, apps, 3)...)
	keys = append(keys, pickN(r, pipelines, 1)...)
	keys = append(keys, pickN(r, services, 3)...)
	x.w.logf("deleting owners %v", keys)
	return x.deleteAll(ctx, keys)
}
