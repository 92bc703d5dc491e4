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
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// Where the load lives. Pipelines use the manager's default target
// namespace, the only one a namespace allow-list admits by default.
const (
	appNamespacePrefix     = "chaos-apps-"
	serviceNamespacePrefix = "chaos-svc-"
	pipelineNamespace      = "pipeline"
	appsPerNamespace       = 25
	servicesPerNamespace   = 50
	userLabel              = "chaos.ndsl.cn/user-owned"
)

// objectKey names an object as the audit log does.
type objectKey struct{ resource, namespace, name string }

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.resource + "/" + k.name
	}
	return k.resource + "/" + k.namespace + "/" + k.name
}

// userObject is an object a user owns, which the managers must never
// modify, while it exists.
type userObject struct {
	key              objectKey
	created, deleted time.Time // deleted zero: still there
}

// world is what the suite created and did, as far as the invariants need it.
type world struct {
	c   *framework.Cluster
	cfg config

	mu            sync.Mutex
	appNamespaces []string
	svcNamespaces []string
	user          []*userObject
	blockers      []*userObject
	// disturbed counts, per owner (apps/ns/name, pipelines/name,
	// services/ns/name), the suite's actions that change what it should
	// report: spec edits, child edits and deletions, blockers.
	disturbed map[objectKey]int
	actions   map[faultKind]int
	// pipelineSteps is each Pipeline's number of steps at creation.
	pipelineSteps []struct {
		key   objectKey
		steps int
	}
	// rollouts are the rollout clients' counts, one per rollout step;
	// rolloutApps numbers the rollouts, for the names of their Apps.
	rollouts    []clientCounts
	rolloutApps int
	// certNames are the extra certificate names the cert-flags steps gave.
	certNames []string
	log       []string
}

func newWorld(c *framework.Cluster, cfg config) *world {
	return &world{c: c, cfg: cfg, disturbed: map[objectKey]int{}, actions: map[faultKind]int{}}
}

func (w *world) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, fmt.Sprintf("%s "+format, append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...))
}

func (w *world) disturb(owner objectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.disturbed[owner]++
}

// disturbOwner records a spec edit of an owner: two changes, since the
// rollout it starts scales a new ReplicaSet up and the old one down.
func (w *world) disturbOwner(owner objectKey) {
	w.disturb(owner)
	w.disturb(owner)
}

func (w *world) addUser(key objectKey, blocker bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := &userObject{key: key, created: time.Now()}
	w.user = append(w.user, o)
	if blocker {
		w.blockers = append(w.blockers, o)
	}
}

// retrying runs f until it succeeds or a minute passes: the API server may
// be restarting.
func retrying(ctx context.Context, what string, f func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w (last error: %v)", what, err, last)
	}
	return nil
}

func appKey(ns, name string) objectKey     { return objectKey{"apps", ns, name} }
func pipelineKey(name string) objectKey    { return objectKey{"pipelines", "", name} }
func serviceKey(ns, name string) objectKey { return objectKey{"services", ns, name} }
func namespaceCount(n, per int) int        { return (n + per - 1) / per }
func userMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{userLabel: "true"}}
}

// createLoad creates the namespaces, the user's own objects (bystanders and
// blockers, the latter before their owners), the Apps, annotated Services
// and Pipelines.
func (w *world) createLoad(ctx context.Context, r *rand.Rand) error {
	kube, typed := w.c.Kube, w.c.Typed
	for i := range namespaceCount(w.cfg.apps, appsPerNamespace) {
		w.appNamespaces = append(w.appNamespaces, fmt.Sprintf("%s%d", appNamespacePrefix, i))
	}
	for i := range namespaceCount(w.cfg.services, servicesPerNamespace) {
		w.svcNamespaces = append(w.svcNamespaces, fmt.Sprintf("%s%d", serviceNamespacePrefix, i))
	}
	for _, ns := range append(append([]string{pipelineNamespace}, w.appNamespaces...), w.svcNamespaces...) {
		// The install made the Pipelines' namespace already (manifests/pipeline-namespace).
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !(ns == pipelineNamespace && apierrors.IsAlreadyExists(err)) {
			return err
		}
		// Bystanders: a user's Deployment, Service and Ingress beside the
		// managers' children, never theirs to touch.
		if err := w.createUserObjects(ctx, ns, "user-"+ns, false, true, true); err != nil {
			return err
		}
	}

	// Blockers: same-name unowned objects, there before their owners.
	blockedApps := map[int]bool{}
	for _, i := range r.Perm(w.cfg.apps)[:min(w.cfg.blockers, w.cfg.apps)] {
		blockedApps[i] = true
	}
	blockedServices := map[int]bool{}
	for _, i := range r.Perm(w.cfg.services)[:min(w.cfg.blockers, w.cfg.services)] {
		blockedServices[i] = true
	}

	for i := range w.cfg.apps {
		ns, name := w.appNamespaces[i/appsPerNamespace], fmt.Sprintf("app-%03d", i)
		if blockedApps[i] {
			if err := w.createUserObjects(ctx, ns, name, true, false, false); err != nil {
				return err
			}
			w.disturb(appKey(ns, name))
		}
		app := &appv1beta1.App{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1),
				EnableService: i%2 == 0, EnableIngress: i%4 == 0},
		}
		if _, err := typed.AppV1beta1().Apps(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating App %s/%s: %w", ns, name, err)
		}
	}
	for i := range w.cfg.services {
		ns, name := w.svcNamespaces[i/servicesPerNamespace], fmt.Sprintf("svc-%03d", i)
		if blockedServices[i] {
			if err := w.createUserObjects(ctx, ns, name, false, false, true); err != nil {
				return err
			}
			w.disturb(serviceKey(ns, name))
		}
		svc := annotatedService(name)
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s/%s: %w", ns, name, err)
		}
	}
	for i := range w.cfg.pipelines {
		p := newPipeline(fmt.Sprintf("pl-%02d", i), w.c.Node(i), w.c.Node(i+1))
		if _, err := typed.PipelineV1beta1().Pipelines().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Pipeline %s: %w", p.Name, err)
		}
		w.pipelineSteps = append(w.pipelineSteps, struct {
			key   objectKey
			steps int
		}{pipelineKey(p.Name), len(p.Spec.Steps)})
	}
	return nil
}

// createUserObjects creates the user's Deployment, Service and Ingress
// called name in ns, as asked, and records them; blocker ones are removed
// later by releaseBlockers.
func (w *world) createUserObjects(ctx context.Context, ns, name string, deployment, service, ing bool) error {
	kube := w.c.Kube
	blocker := name != "user-"+ns
	if deployment {
		labels := map[string]string{userLabel: "true", "user-app": name}
		d := &appsv1.Deployment{ObjectMeta: userMeta(name), Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "user", Image: "user/own:1"}}}},
		}}
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the user's Deployment %s/%s: %w", ns, name, err)
		}
		w.addUser(objectKey{"deployments", ns, name}, blocker)
	}
	if service {
		svc := &corev1.Service{ObjectMeta: userMeta(name), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the user's Service %s/%s: %w", ns, name, err)
		}
		w.addUser(objectKey{"services", ns, name}, blocker)
	}
	if ing {
		in := &networkingv1.Ingress{ObjectMeta: userMeta(name), Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "user", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if _, err := kube.NetworkingV1().Ingresses(ns).Create(ctx, in, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the user's Ingress %s/%s: %w", ns, name, err)
		}
		w.addUser(objectKey{"ingresses", ns, name}, blocker)
	}
	return nil
}

// releaseBlockers deletes every blocker still there.
func (w *world) releaseBlockers(ctx context.Context) error {
	w.mu.Lock()
	blockers := w.blockers
	w.mu.Unlock()
	for _, b := range blockers {
		err := retrying(ctx, "deleting blocker "+b.key.String(), func(ctx context.Context) error {
			err := deleteObject(ctx, w.c, b.key, nil)
			if isNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		w.mu.Lock()
		b.deleted = time.Now()
		w.mu.Unlock()
	}
	w.logf("released %d blockers", len(blockers))
	return nil
}

// annotatedService is a headless Service (no ClusterIP to allocate) that asks
// the Ingress controller for an Ingress.
func annotatedService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{ingress.AnnotationEnabled: "true"}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"svc": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
}

// newPipeline has two steps of one replica pinned to two (fake) nodes.
func newPipeline(name, node1, node2 string) *pipelinev1beta1.Pipeline {
	size := resource.MustParse("1Gi")
	return &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps: []pipelinev1beta1.PipelineStep{
				{Model: "detect", Image: "nginx:1.27", Location: node1, Replicas: ptr.To[int32](1), Args: map[string]string{"listenPort": "9080"}},
				{Model: "classify", Image: "nginx:1.27", Location: node2, Replicas: ptr.To[int32](1)},
			},
			ModelStorage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeNFS, Size: &size,
				CSIParameter: map[string]string{"server": "10.0.0.1", "share": "/models"}},
		},
	}
}
