package ingress

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// sync makes the Ingress of one Service match its annotations. It reads
// from the listers and writes only what differs.
func (c *Controller) sync(ctx context.Context, key controller.Key) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	svc, err := c.services.Services(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// The garbage collector removes the Ingress with its owner.
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if svc.DeletionTimestamp != nil {
		return controller.Result{}, nil
	}

	live, err := c.ingresses.Ingresses(svc.Namespace).Get(svc.Name)
	if apierrors.IsNotFound(err) {
		live = nil
	} else if err != nil {
		return controller.Result{}, err
	}

	if !wantsIngress(svc) {
		return controller.Result{}, c.deleteOwned(ctx, svc, live)
	}

	desired, err := DesiredIngress(svc, c.opts)
	if err != nil {
		// Only an edit of the Service can fix this, and that edit requeues it.
		logger.V(2).Info("Service cannot get an Ingress", "reason", err)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "InvalidIngressAnnotations", "Cannot build the Ingress: %v", err)
		return controller.Result{}, nil
	}

	switch {
	case live == nil:
		if _, err := c.client.NetworkingV1().Ingresses(svc.Namespace).Create(ctx, desired,
			metav1.CreateOptions{FieldManager: controller.FieldManager}); err != nil {
			return controller.Result{}, c.writeFailed(svc, "create", err)
		}
		logger.V(2).Info("Created Ingress")
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "CreatedIngress", "Created Ingress %s", desired.Name)
	case !controller.IsControlledBy(live, svc):
		conflict := controller.NewNotOwnedError("Ingress", live)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "IngressConflict", "Not managing the Ingress: %v", conflict)
		return controller.Result{}, conflict
	case needsUpdate(desired, live):
		if _, err := c.client.NetworkingV1().Ingresses(svc.Namespace).Update(ctx, applyDesired(desired, live),
			metav1.UpdateOptions{FieldManager: controller.FieldManager}); err != nil {
			return controller.Result{}, c.writeFailed(svc, "update", err)
		}
		logger.V(2).Info("Updated Ingress")
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "UpdatedIngress", "Updated Ingress %s to match the Service's annotations", desired.Name)
	}
	return controller.Result{}, nil
}

// deleteOwned deletes the Service's Ingress if, and only if, the Service
// controls it. The UID precondition guards against deleting a same-name
// Ingress created since the cache last saw it.
func (c *Controller) deleteOwned(ctx context.Context, svc *corev1.Service, live *networkingv1.Ingress) error {
	if live == nil || !controller.IsControlledBy(live, svc) || live.DeletionTimestamp != nil {
		return nil
	}
	err := c.client.NetworkingV1().Ingresses(live.Namespace).Delete(ctx, live.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &live.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return c.writeFailed(svc, "delete", err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted Ingress")
	c.recorder.Eventf(svc, corev1.EventTypeNormal, "DeletedIngress", "Deleted Ingress %s: the Service no longer asks for one", live.Name)
	return nil
}

// writeFailed reports a failed write. Conflicts and already-exists mean the
// cache is behind: the retry will see the newer object, so no event.
func (c *Controller) writeFailed(svc *corev1.Service, verb string, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !errors.Is(err, context.Canceled) {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "IngressWriteFailed", "Failed to %s Ingress %s: %v", verb, svc.Name, err)
	}
	return fmt.Errorf("%s Ingress %s/%s: %w", verb, svc.Namespace, svc.Name, err)
}
