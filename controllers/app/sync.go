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

package app

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/klog/v2"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// sync makes one App's children match its spec and its status match what
// was observed. It reads from the listers and writes only what differs: a
// reconcile of a converged App makes no request at all.
func (c *Controller) sync(ctx context.Context, key controller.Key) (controller.Result, error) {
	// The events of the last reconcile's own writes requeue the App; acting
	// before the caches hold those writes would write them a second time.
	if err := c.consistency.Check(ctx, key); err != nil {
		return controller.Result{}, err
	}

	app, err := c.apps.Apps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.consistency.Clear(key, "")
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, fmt.Errorf("reading App %s from the cache: %w", key, err)
	}
	if app.DeletionTimestamp != nil {
		// The garbage collector deletes the children with their owner.
		return controller.Result{}, nil
	}

	// Which selectors the children get: a legacy Deployment's decide.
	liveDeployment, _, err := c.deployments.Get(app.Namespace, app.Name)
	if err != nil {
		return controller.Result{}, err
	}
	liveService, _, err := c.services.Get(app.Namespace, app.Name)
	if err != nil {
		return controller.Result{}, err
	}
	sel := selectorsOf(app, liveDeployment, liveService)

	var obs observed
	var writes childWrites
	if sel.replaceDeployment {
		obs.deployment = liveDeployment
		if err := c.replaceLegacyDeployment(ctx, app, liveDeployment); err != nil {
			obs.errs = append(obs.errs, err)
		}
	} else if obs.deployment, err = syncChild(ctx, c, app, &writes, c.deployments, true, true, func(app *appv1.App) *appsv1ac.DeploymentApplyConfiguration {
		return desiredDeployment(app, sel)
	}); err != nil {
		obs.errs = append(obs.errs, err)
	}
	if obs.service, err = syncChild(ctx, c, app, &writes, c.services, app.Spec.WantsService(), true, func(app *appv1.App) *corev1ac.ServiceApplyConfiguration {
		return desiredService(app, sel)
	}); err != nil {
		obs.errs = append(obs.errs, err)
	}
	// No Ingress is created while the App's Service is not the App's: it
	// would route to someone else's pods.
	ingressOf := func(app *appv1.App) *networkingv1ac.IngressApplyConfiguration {
		return desiredIngress(app, c.opts)
	}
	// Nor without a host: it would catch every request of its class. A
	// hostless one an earlier version made goes, told by the Warning below.
	obs.ingressHostRequired = app.Spec.WantsIngress() && ingressHost(app, c.opts.IngressDomain) == ""
	ingressWrites := &writes
	if obs.ingressHostRequired {
		ingressWrites = &childWrites{}
	}
	if obs.ingress, err = syncChild(ctx, c, app, ingressWrites, c.ingresses, app.Spec.WantsIngress() && !obs.ingressHostRequired, obs.service != nil, ingressOf); err != nil {
		obs.errs = append(obs.errs, err)
	}

	if obs.deployment != nil {
		// The Deployment's own selector: a legacy one's pods lack AppLabel.
		selector, err := metav1.LabelSelectorAsSelector(obs.deployment.Spec.Selector)
		if err != nil {
			return controller.Result{}, fmt.Errorf("reading the selector of Deployment %s: %w", key, err)
		}
		if obs.pods, err = appPods(c.pods, app, selector); err != nil {
			return controller.Result{}, fmt.Errorf("reading the pods of App %s from the cache: %w", key, err)
		}
	}

	if app.Status.ObservedGeneration == 0 {
		// A new App's children are what its creation asked for, and its
		// first status says they are there: no Event. Every later create,
		// update and delete is news (a child deleted by hand, a changed
		// spec, drift corrected) and is recorded.
		writes.created = nil
	}
	writes.record(c.recorder, app)

	// A write that only met a moved world (a conflict, a Lease not fresh)
	// is retried at once: a status written now would claim the generation
	// observed while that child still has the old spec. Real failures are
	// written, with the transient ones beside them kept out of the message.
	if len(obs.errs) > 0 && allTransient(obs.errs) {
		return controller.Result{}, errors.Join(obs.errs...)
	}

	// The status says what happened, failures included.
	status := appStatus(app, obs, metav1.NewTime(c.now()))
	if newlyRefused(app.Status, status) {
		c.recorder.Event(app, corev1.EventTypeWarning, appv1.ReasonIngressHostRequired, ingressHostRequiredMessage)
	}
	if err := c.updateStatus(ctx, app, status); err != nil {
		obs.errs = append(obs.errs, err)
	}
	return controller.Result{}, errors.Join(obs.errs...)
}

// allTransient reports whether every error only says the world moved under
// the reconcile (controller.IsTransient).
func allTransient(errs []error) bool {
	for _, err := range errs {
		if !controller.IsTransient(err) {
			return false
		}
	}
	return true
}

// syncChild applies the App's child of one kind, or deletes it when the App
// no longer asks for it (wanted), and returns it as it now is: nil when it
// is missing or not the App's. mayCreate false leaves a missing child
// missing. What it wrote goes to writes, for the reconcile's one event.
func syncChild[T controller.Object, AC controller.ApplyConfiguration[AC]](ctx context.Context, c *Controller, app *appv1.App, writes *childWrites,
	children *controller.Children[T, AC], wanted, mayCreate bool, desired func(*appv1.App) AC) (T, error) {
	var none T
	live, found, err := children.Get(app.Namespace, app.Name)
	switch {
	case err != nil:
		return none, err
	case !wanted && found:
		deleted, err := children.Delete(ctx, app, live)
		if err != nil {
			return none, c.writeFailed(app, "delete", children.Kind, err)
		}
		if deleted {
			c.consistency.Deleted(app, children.Resource, live)
			writes.deleted = append(writes.deleted, children.Kind)
		}
		return none, nil
	case !wanted:
		return none, nil
	case !found && !mayCreate:
		klog.FromContext(ctx).V(2).Info("Not creating the child yet", "kind", children.Kind)
		return none, nil
	}

	written, write, err := children.Apply(ctx, app, desired(app), live)
	var notOwned *controller.NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		// Left alone; the error retries the App with backoff.
		c.recorder.Eventf(app, corev1.EventTypeWarning, appv1.ReasonResourceExists, "Not managing %s %s: %v", children.Kind, app.Name, err)
		return none, err
	case controller.IsTransient(err):
		// Only the cache is behind: what it holds is what the status shows.
		return live, c.writeFailed(app, write.Verb(), children.Kind, err)
	case err != nil:
		return none, c.writeFailed(app, write.Verb(), children.Kind, err)
	case write == controller.Created:
		c.consistency.Wrote(app, children.Resource, written)
		writes.created = append(writes.created, children.Kind)
	case write == controller.Updated:
		c.consistency.Wrote(app, children.Resource, written)
		writes.updated = append(writes.updated, children.Kind)
	}
	return written, nil
}

// updateStatus writes status if, and only if, it differs from the App's.
func (c *Controller) updateStatus(ctx context.Context, app *appv1.App, status appv1.AppStatus) error {
	if apiequality.Semantic.DeepEqual(app.Status, status) {
		return nil
	}
	updated := app.DeepCopy()
	updated.Status = status
	// Optimistic concurrency: a conflict means the App changed since it was
	// read, and the status computed from it is already stale.
	result, err := c.crdClient.AppV1().Apps(app.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if apierrors.IsNotFound(err) {
		// Deleted while it was reconciled: the deletion is on its way
		// through the informer and there is nothing left to report on.
		klog.FromContext(ctx).V(2).Info("The App was deleted before its status was written")
		return nil
	}
	if err != nil {
		return c.writeFailed(app, "update status of", "App", err)
	}
	c.consistency.Wrote(app, appsResource, result)
	klog.FromContext(ctx).V(4).Info("Updated status")
	return nil
}

// writeFailed reports a failed write of the App's child of kind.
func (c *Controller) writeFailed(app *appv1.App, verb, kind string, err error) error {
	return controller.WriteFailed(c.recorder, app, "WriteFailed", verb, fmt.Sprintf("%s %s/%s", kind, app.Namespace, app.Name), err)
}
