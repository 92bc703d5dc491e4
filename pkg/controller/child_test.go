package controller

import (
	"context"
	"errors"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func newServiceChildren(t *testing.T) (*Services, *fake.Clientset, func(*corev1.Service)) {
	t.Helper()
	client := fake.NewClientset()
	informer := informers.NewSharedInformerFactory(client, 0).Core().V1().Services()
	children := NewServices(informer, client)
	cached := func(svc *corev1.Service) {
		if err := informer.Informer().GetIndexer().Add(svc); err != nil {
			t.Fatal(err)
		}
	}
	return children, client, cached
}

func ownerApp() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "owner-uid"}}
}

func desiredChildService() *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service("web", "shop").
		WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("v1").WithKind("ConfigMap").
			WithName("web").WithUID("owner-uid").WithController(true)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(map[string]string{"app": "web"}).
			WithPorts(corev1ac.ServicePort().WithPort(80).WithTargetPort(intstr.FromInt32(80)).WithProtocol(corev1.ProtocolTCP)))
}

// Creates are applies, after a read from the API; a reconcile of what the create returned sends
// nothing; an unowned same-name object is never written.
func TestChildrenApply(t *testing.T) {
	ctx := context.Background()
	children, client, cached := newServiceChildren(t)

	created, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	if err != nil || write != Created {
		t.Fatalf("create: write %v, err %v", write, err)
	}
	if n := len(client.Actions()); n != 2 || client.Actions()[0].GetVerb() != "get" || client.Actions()[1].GetVerb() != "patch" {
		t.Fatalf("create sent %v, want a read, then one apply (patch)", client.Actions())
	}
	if created.Annotations[AppliedAnnotation] == "" {
		t.Error("created child carries no applied hash")
	}

	client.ClearActions()
	cached(created)
	live, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), created)
	if err != nil || write != Unchanged || live != created {
		t.Fatalf("at rest: write %v, err %v", write, err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("a converged child cost %d requests: %v", n, client.Actions())
	}

	// A field the controller stops setting changes the hash: applied.
	fewer := desiredChildService()
	fewer.Labels = nil
	if _, write, err := children.Apply(ctx, ownerApp(), fewer, created); err != nil || write != Updated {
		t.Fatalf("changed desired fields: write %v, err %v", write, err)
	}

	client.ClearActions()
	unowned := created.DeepCopy()
	unowned.OwnerReferences = nil
	_, write, err = children.Apply(ctx, ownerApp(), desiredChildService(), unowned)
	var notOwned *NotOwnedError
	if !errors.As(err, &notOwned) || write != Unchanged {
		t.Fatalf("unowned object: write %v, err %v, want a NotOwnedError", write, err)
	}
	if deleted, err := children.Delete(ctx, ownerApp(), unowned); deleted || err != nil {
		t.Fatalf("unowned object deleted: %v %v", deleted, err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Fatalf("an unowned object was written: %v", client.Actions())
	}

	// Deletes of what the owner controls carry its UID.
	if deleted, err := children.Delete(ctx, ownerApp(), created); !deleted || err != nil {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	if _, err := client.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("child still exists after delete")
	}
}

// An unowned object the cache has not seen yet (created just before its
// would-be owner, or the cache behind) is not taken over: the create would
// be a forced apply, which updates whatever is there.
func TestChildrenApplyDoesNotTakeOverUncachedObject(t *testing.T) {
	ctx := context.Background()
	children, client, _ := newServiceChildren(t)
	user := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "user-uid"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"user": "mine"}}}
	if _, err := client.CoreV1().Services("shop").Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()

	_, write, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	var notOwned *NotOwnedError
	if !errors.As(err, &notOwned) || write != Unchanged {
		t.Fatalf("uncached unowned object: write %v, err %v, want a NotOwnedError", write, err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("the user's object was written: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	got, err := client.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Spec.Selector["user"] != "mine" || got.Annotations[AppliedAnnotation] != "" {
		t.Errorf("the user's object was changed: owners %v, selector %v, annotations %v", got.OwnerReferences, got.Spec.Selector, got.Annotations)
	}
}

// A JSON patch whose resourceVersion test fails (the 422 the API server
// builds, which drops the patch library's message) means only that the cache
// is behind: Apply turns it into a conflict, which is transient, never a
// failure for status or events (issue 12, defect 5).
func TestChildrenApplyFailedPatchTestIsAConflict(t *testing.T) {
	ctx := context.Background()
	children, client, _ := newServiceChildren(t)
	created, _, err := children.Apply(ctx, ownerApp(), desiredChildService(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another manager adds a port entry; the next apply keeps it, so the
	// lists are replaced with a JSON patch, which the server refuses.
	edited := created.DeepCopy()
	edited.Spec.Ports = append(edited.Spec.Ports, corev1.ServicePort{Port: 8080, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	if edited, err = client.CoreV1().Services("shop").Update(ctx, edited, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("patch", "services", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.PatchAction).GetPatchType() != types.JSONPatchType {
			return false, nil, nil
		}
		return true, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "",
			"testing value /metadata/resourceVersion failed: test failed", 0, false)
	})
	changed := desiredChildService()
	changed.Labels["tier"] = "web"
	_, _, err = children.Apply(ctx, ownerApp(), changed, edited)
	if !apierrors.IsConflict(err) || !IsTransient(err) {
		t.Fatalf("Apply returned %v, want a conflict", err)
	}
}
