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
		return controller.Result{}, c.syncUncached(ctx, key)
	}
	if err != nil {
		return controller.Result{}, err
	}
	if svc.DeletionTimestamp != nil {
		return controller.Result{}, nil
	}

	live, found, err := c.ingresses.Get(svc.Namespace, svc.Name)
	if err != nil {
		return controller.Result{}, err
	}

	if !wantsIngress(svc) {
		if !found {
			return controller.Result{}, nil
		}
		return controller.Result{}, c.deleteIngress(ctx, svc, live, "the Service no longer asks for one")
	}

	desired, err := desiredIngress(svc, c.opts)
	var refused *refusal
	if errors.As(err, &refused) {
		// Refused whatever the Ingress's state: one made before the change
		// (of the Service or of the flags) goes.
		logger.V(2).Info("Refusing the Service an Ingress", "reason", refused.reason)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, refused.reason, "Not serving an Ingress: %s", refused.message)
		if !found {
			return controller.Result{}, nil
		}
		return controller.Result{}, c.deleteIngress(ctx, svc, live, refused.message)
	}
	if err != nil {
		// Only an edit of the Service can fix this, and that edit requeues it.
		logger.V(2).Info("Service cannot get an Ingress", "reason", err)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "InvalidIngressAnnotations", "Cannot build the Ingress: %v", err)
		return controller.Result{}, nil
	}

	var notOwned *controller.NotOwnedError
	switch _, write, err := c.ingresses.Apply(ctx, svc, desired, live); {
	case errors.As(err, &notOwned):
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "IngressConflict", "Not managing the Ingress: %v", err)
		return controller.Result{}, err
	case err != nil:
		return controller.Result{}, c.writeFailed(svc, write.Verb(), err)
	case write == controller.Created:
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "CreatedIngress", "Created Ingress %s", svc.Name)
	case write == controller.Updated:
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "UpdatedIngress", "Updated Ingress %s to match the Service's annotations", svc.Name)
	}
	return controller.Result{}, nil
}

// syncUncached deletes the Ingress of a Service that is not in the cache
// because it lost its ingress/ annotations (the informer holds only Wanted
// Services), if it controls one. Gone instead, the garbage collector
// removes its Ingress. Only the API server tells the two apart: one GET,
// and only for a Service that controls an Ingress.
func (c *Controller) syncUncached(ctx context.Context, key controller.Key) error {
	live, found, err := c.ingresses.Get(key.Namespace, key.Name)
	if err != nil || !found {
		return err
	}
	ref := metav1.GetControllerOfNoCopy(live)
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Service" || ref.Name != key.Name {
		return nil
	}
	svc, err := c.serviceClient.Services(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading Service %s, not in the cache, which controls Ingress %s: %w", key, live.Name, err)
	case svc.UID != ref.UID || svc.DeletionTimestamp != nil:
		return nil // its owner is gone or going: the garbage collector's
	case Wanted(svc):
		return nil // the cache is behind: adding it requeues the Service
	}
	return c.deleteIngress(ctx, svc, live, "the Service no longer asks for one")
}

// deleteIngress deletes the Service's Ingress if the Service controls it,
// and says why in a Normal event.
func (c *Controller) deleteIngress(ctx context.Context, svc *corev1.Service, live *networkingv1.Ingress, why string) error {
	deleted, err := c.ingresses.Delete(ctx, svc, live)
	if err != nil {
		return c.writeFailed(svc, "delete", err)
	}
	if deleted {
		c.recorder.Eventf(svc, corev1.EventTypeNormal, "DeletedIngress", "Deleted Ingress %s: %s", live.Name, why)
	}
	return nil
}

func (c *Controller) writeFailed(svc *corev1.Service, verb string, err error) error {
	return controller.WriteFailed(c.recorder, svc, "IngressWriteFailed", verb, fmt.Sprintf("Ingress %s/%s", svc.Namespace, svc.Name), err)
}
