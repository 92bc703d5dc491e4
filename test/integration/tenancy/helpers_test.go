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

package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
)

// timeout bounds every wait for the manager or the API server.
const timeout = 90 * time.Second

// team is a user and its clients; admin is the cluster administrator.
type team struct {
	user string
	kube kubernetes.Interface
	crd  versioned.Interface
}

var admin, teamA, teamB team

// Roles the teams are bound to: the built-in edit in their own namespaces
// and the shared one, the shipped Pipeline author role and read access to
// every Pipeline, both cluster-wide as the author role's comment asks.
const (
	pipelineAuthorRole = "ndsl-controller-manager:pipeline-author"
	pipelineViewerRole = "ndsl-controller-manager:pipeline-viewer"
)

// setupTeams builds the clients and binds both teams.
func setupTeams(ctx context.Context) error {
	var err error
	if admin, err = newTeam(""); err != nil {
		return err
	}
	if teamA, err = newTeam("team-a"); err != nil {
		return err
	}
	if teamB, err = newTeam("team-b"); err != nil {
		return err
	}
	for _, tm := range []team{teamA, teamB} {
		for _, role := range []string{pipelineAuthorRole, pipelineViewerRole} {
			binding := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: tm.user + "-" + strings.ReplaceAll(role, ":", "-")},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tm.user}},
			}
			if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("binding %s to %s: %w", tm.user, role, err)
			}
		}
		if err := bindEdit(ctx, sharedNamespace, tm.user); err != nil {
			return err
		}
	}
	return nil
}

// newTeam builds clients acting as user by impersonation (a member of
// system:authenticated only); "" is the administrator.
func newTeam(user string) (team, error) {
	cfg := rest.CopyConfig(cp.Config)
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return team{}, err
	}
	crd, err := versioned.NewForConfig(cfg)
	if err != nil {
		return team{}, err
	}
	return team{user: user, kube: kube, crd: crd}, nil
}

// bindEdit binds user to the built-in edit role in ns and waits until the
// authorizer lets the user create Deployments and Apps there.
func bindEdit(ctx context.Context, ns, user string) error {
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding %s to edit in %s: %w", user, ns, err)
	}
	return pollUntil(ctx, timeout, func(ctx context.Context) (bool, error) {
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"},
			{Namespace: ns, Verb: "create", Group: appv1beta1.SchemeGroupVersion.Group, Resource: "apps"},
		} {
			review, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &attrs},
			}, metav1.CreateOptions{})
			if err != nil || !review.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	})
}

// teamNamespace creates a namespace of tm's own, for one test.
func teamNamespace(t *testing.T, tm team) string {
	t.Helper()
	ctx := context.Background()
	ns, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: tm.user + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bindEdit(ctx, ns.Name, tm.user); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// uniqueName is prefix with a random suffix: every test has its own names.
func uniqueName(prefix string) string {
	return prefix + "-" + utilrand.String(6)
}

// newPipeline is a Pipeline of steps in namespace ("" the default one) on
// share of the allowed NFS server.
func newPipeline(name, namespace, share string, steps ...pipelinev1beta1.PipelineStep) *pipelinev1beta1.Pipeline {
	return &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pipelinev1beta1.PipelineSpec{
			Namespace: namespace,
			Steps:     steps,
			ModelStorage: pipelinev1beta1.ModelStorage{
				Type: pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{
					pipelinev1beta1.CSIParameterServer: nfsServer,
					pipelinev1beta1.CSIParameterShare:  share,
				},
			},
		},
	}
}

// step serves model with an allowed image.
func step(model string) pipelinev1beta1.PipelineStep {
	return pipelinev1beta1.PipelineStep{Model: model, Image: stepImage, Location: node}
}

// newApp is an App with a Service, and an Ingress when ingress.
func newApp(name string, ingress bool) *appv1beta1.App {
	return &appv1beta1.App{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appv1beta1.AppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1),
			EnableService: true, EnableIngress: ingress},
	}
}

// createPipeline creates p as tm and fails the test when that is refused.
func createPipeline(t *testing.T, tm team, p *pipelinev1beta1.Pipeline) *pipelinev1beta1.Pipeline {
	t.Helper()
	created, err := tm.crd.PipelineV1beta1().Pipelines().Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s creating its own Pipeline %s: %v", tm.user, p.Name, err)
	}
	t.Cleanup(func() {
		_ = admin.crd.PipelineV1beta1().Pipelines().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	return created
}

// attemptPipeline creates p as the attacker tm: it returns nil when the API
// refused it (logging why), else the stored Pipeline.
func attemptPipeline(t *testing.T, tm team, p *pipelinev1beta1.Pipeline) *pipelinev1beta1.Pipeline {
	t.Helper()
	created, err := tm.crd.PipelineV1beta1().Pipelines().Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Logf("refused, as it may be: %v", err)
		return nil
	}
	t.Cleanup(func() {
		_ = admin.crd.PipelineV1beta1().Pipelines().Delete(context.Background(), p.Name, metav1.DeleteOptions{})
	})
	return created
}

// pipelineObserved reports whether the controller has computed the
// status of the Pipeline's current generation.
func pipelineObserved(ctx context.Context, name string) (bool, error) {
	p, err := admin.crd.PipelineV1beta1().Pipelines().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return p.Status.ObservedGeneration == p.Generation, nil
}

// harmlessOnceObserved waits until observed says the manager has acted
// on the attack, failing the test at once whenever harm finds a bad
// outcome, and looks for one once more after.
func harmlessOnceObserved(t *testing.T, observed func(context.Context) (bool, error), harm func(context.Context) error) {
	t.Helper()
	var bad, last error
	err := pollUntil(context.Background(), timeout, func(ctx context.Context) (bool, error) {
		if bad = harm(ctx); bad != nil {
			return true, nil
		}
		ok, err := observed(ctx)
		last = err
		return ok, nil
	})
	if bad == nil && err == nil {
		bad = harm(context.Background())
	}
	if bad != nil {
		t.Fatal(bad)
	}
	if err != nil {
		t.Fatalf("the manager never acted on the attempt within %s (last error: %v)", timeout, last)
	}
}

// controlledBy reports whether uid is obj's controller.
func controlledBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
}

// nothingControlledIn reports the first Deployment, Service or claim in ns
// that the Pipeline uid controls.
func nothingControlledIn(ctx context.Context, ns string, uid types.UID) error {
	deployments, err := admin.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil // a list error is no harm; the next poll retries
	}
	for i := range deployments.Items {
		if controlledBy(&deployments.Items[i], uid) {
			return fmt.Errorf("the Pipeline got Deployment %s/%s", ns, deployments.Items[i].Name)
		}
	}
	services, err := admin.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range services.Items {
		if controlledBy(&services.Items[i], uid) {
			return fmt.Errorf("the Pipeline got Service %s/%s", ns, services.Items[i].Name)
		}
	}
	claims, err := admin.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range claims.Items {
		if controlledBy(&claims.Items[i], uid) {
			return fmt.Errorf("the Pipeline got PersistentVolumeClaim %s/%s", ns, claims.Items[i].Name)
		}
	}
	return nil
}

// refusedOrHarmless: a refused attempt is fine; an admitted one must leave
// nothing the Pipeline controls in ns once the controller has seen it.
func refusedOrHarmless(t *testing.T, attempt *pipelinev1beta1.Pipeline, ns string) {
	t.Helper()
	if attempt == nil {
		return
	}
	harmlessOnceObserved(t,
		func(ctx context.Context) (bool, error) { return pipelineObserved(ctx, attempt.Name) },
		func(ctx context.Context) error { return nothingControlledIn(ctx, ns, attempt.UID) })
}

// warningAbout reports whether a Warning Event about the object kind/name
// in ns has been recorded.
func warningAbout(ctx context.Context, ns, kind, name string) (bool, error) {
	events, err := admin.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// refused fails the test unless err is an answer of the API refusing the
// request (not a conflict, which is no answer at all).
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: admitted, want refused", what)
		return
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		t.Errorf("%s: %v, want a refusal", what, err)
		return
	}
	t.Logf("%s: refused: %v", what, err)
}

func pollUntil(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
}
