package app

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	appv1beta1 "github.com/ndsl/controller-manager/apis/app/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

var (
	createOptions = metav1.CreateOptions{FieldManager: controller.FieldManager}
	applyOptions  = metav1.ApplyOptions{FieldManager: controller.FieldManager, Force: true}
	patchOptions  = metav1.PatchOptions{FieldManager: controller.FieldManager}
	updateOptions = metav1.UpdateOptions{FieldManager: controller.FieldManager}
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

	var obs observed
	if obs.deployment, err = c.syncDeployment(ctx, app); err != nil {
		obs.errs = append(obs.errs, err)
	}
	if obs.service, err = c.syncService(ctx, app); err != nil {
		obs.errs = append(obs.errs, err)
	}
	if obs.ingress, err = c.syncIngress(ctx, app, obs.service != nil); err != nil {
		obs.errs = append(obs.errs, err)
	}

	// The status says what happened, failures included.
	status := appStatus(app, obs, metav1.NewTime(c.now()))
	if err := c.updateStatus(ctx, app, status); err != nil {
		obs.errs = append(obs.errs, err)
	}
	return controller.Result{}, errors.Join(obs.errs...)
}

// syncDeployment creates the App's Deployment or repairs its drift, and
// returns it as it now is; nil when it is missing or not the App's.
func (c *Controller) syncDeployment(ctx context.Context, app *appv1beta1.App) (*appsv1.Deployment, error) {
	const kind = "Deployment"
	apply := desiredDeployment(app)
	want, err := typed[appsv1.Deployment](apply)
	if err != nil {
		return nil, err
	}
	client := c.kubeClient.AppsV1().Deployments(app.Namespace)

	live, err := c.deployments.Deployments(app.Namespace).Get(app.Name)
	switch {
	case apierrors.IsNotFound(err):
		created, err := client.Create(ctx, want, createOptions)
		if err != nil {
			return nil, c.writeFailed(app, "create", kind, err)
		}
		c.created(ctx, app, kind, deploymentsResource, created)
		return created, nil
	case err != nil:
		return nil, fmt.Errorf("reading Deployment %s/%s from the cache: %w", app.Namespace, app.Name, err)
	case !controller.IsControlledBy(live, app):
		return nil, c.notOwned(app, kind, live)
	}

	changed := false
	if containerPortsDiffer(want, live) {
		patch, err := containerPortsPatch(want, live)
		if err != nil {
			return nil, err
		}
		if live, err = client.Patch(ctx, app.Name, types.JSONPatchType, patch, patchOptions); err != nil {
			return nil, c.writeFailed(app, "update", kind, err)
		}
		c.consistency.Wrote(app, deploymentsResource, live)
		changed = true
	}
	if deploymentDrifted(want, live) {
		if live, err = client.Apply(ctx, apply, applyOptions); err != nil {
			return nil, c.writeFailed(app, "update", kind, err)
		}
		c.consistency.Wrote(app, deploymentsResource, live)
		changed = true
	}
	if changed {
		c.updated(ctx, app, kind)
	}
	return live, nil
}

// syncService creates, repairs or deletes the App's Service, as
// enable_service asks, and returns it as it now is; nil when the App does
// not have one.
func (c *Controller) syncService(ctx context.Context, app *appv1beta1.App) (*corev1.Service, error) {
	const kind = "Service"
	client := c.kubeClient.CoreV1().Services(app.Namespace)
	live, err := c.services.Services(app.Namespace).Get(app.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Service %s/%s from the cache: %w", app.Namespace, app.Name, err)
	}
	if apierrors.IsNotFound(err) {
		live = nil
	}

	if !app.Spec.EnableService {
		if live == nil {
			return nil, nil
		}
		return nil, c.deleteOwned(ctx, app, kind, servicesResource, live, client.Delete)
	}

	apply := desiredService(app)
	want, err := typed[corev1.Service](apply)
	if err != nil {
		return nil, err
	}
	switch {
	case live == nil:
		created, err := client.Create(ctx, want, createOptions)
		if err != nil {
			return nil, c.writeFailed(app, "create", kind, err)
		}
		c.created(ctx, app, kind, servicesResource, created)
		return created, nil
	case !controller.IsControlledBy(live, app):
		return nil, c.notOwned(app, kind, live)
	}

	changed := false
	if servicePortsDiffer(want, live) {
		patch, err := servicePortsPatch(want, live)
		if err != nil {
			return nil, err
		}
		if live, err = client.Patch(ctx, app.Name, types.JSONPatchType, patch, patchOptions); err != nil {
			return nil, c.writeFailed(app, "update", kind, err)
		}
		c.consistency.Wrote(app, servicesResource, live)
		changed = true
	}
	if serviceDrifted(want, live) {
		if live, err = client.Apply(ctx, apply, applyOptions); err != nil {
			return nil, c.writeFailed(app, "update", kind, err)
		}
		c.consistency.Wrote(app, servicesResource, live)
		changed = true
	}
	if changed {
		c.updated(ctx, app, kind)
	}
	return live, nil
}

// syncIngress creates, repairs or deletes the App's Ingress, as
// enable_ingress asks, and returns it as it now is; nil when the App does
// not have one. It creates none while the App's Service is not the App's:
// the Ingress would route to someone else's pods.
func (c *Controller) syncIngress(ctx context.Context, app *appv1beta1.App, haveService bool) (*networkingv1.Ingress, error) {
	const kind = "Ingress"
	client := c.kubeClient.NetworkingV1().Ingresses(app.Namespace)
	live, err := c.ingresses.Ingresses(app.Namespace).Get(app.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading Ingress %s/%s from the cache: %w", app.Namespace, app.Name, err)
	}
	if apierrors.IsNotFound(err) {
		live = nil
	}

	if !app.Spec.EnableIngress {
		if live == nil {
			return nil, nil
		}
		return nil, c.deleteOwned(ctx, app, kind, ingressesResource, live, client.Delete)
	}

	apply := desiredIngress(app, c.opts)
	want, err := typed[networkingv1.Ingress](apply)
	if err != nil {
		return nil, err
	}
	switch {
	case live == nil && !haveService:
		klog.FromContext(ctx).V(2).Info("Not creating the Ingress until the App has its Service")
		return nil, nil
	case live == nil:
		created, err := client.Create(ctx, want, createOptions)
		if err != nil {
			return nil, c.writeFailed(app, "create", kind, err)
		}
		c.created(ctx, app, kind, ingressesResource, created)
		return created, nil
	case !controller.IsControlledBy(live, app):
		return nil, c.notOwned(app, kind, live)
	case ingressDrifted(want, live):
		if live, err = client.Apply(ctx, apply, applyOptions); err != nil {
			return nil, c.writeFailed(app, "update", kind, err)
		}
		c.consistency.Wrote(app, ingressesResource, live)
		c.updated(ctx, app, kind)
	}
	return live, nil
}

// deleteOwned deletes a child the App no longer asks for if, and only if,
// the App controls it. The UID precondition guards against deleting a
// same-name object created since the cache last saw the child.
func (c *Controller) deleteOwned(ctx context.Context, app *appv1beta1.App, kind string, resource schema.GroupResource,
	live metav1.Object, deleteFn func(context.Context, string, metav1.DeleteOptions) error) error {
	if !controller.IsControlledBy(live, app) || live.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := live.GetUID()
	err := deleteFn(ctx, live.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.writeFailed(app, "delete", kind, err)
	}
	c.consistency.Deleted(app, resource, live)
	klog.FromContext(ctx).V(2).Info("Deleted child", "kind", kind)
	c.recorder.Eventf(app, corev1.EventTypeNormal, "Deleted"+kind, "Deleted %s %s: the App no longer asks for it", kind, live.GetName())
	return nil
}

// updateStatus writes status if, and only if, it differs from the App's.
func (c *Controller) updateStatus(ctx context.Context, app *appv1beta1.App, status appv1beta1.AppStatus) error {
	if apiequality.Semantic.DeepEqual(app.Status, status) {
		return nil
	}
	updated := app.DeepCopy()
	updated.Status = status
	// Optimistic concurrency: a conflict means the App changed since it was
	// read, and the status computed from it is already stale.
	result, err := c.appClient.AppV1beta1().Apps(app.Namespace).UpdateStatus(ctx, updated, updateOptions)
	if err != nil {
		return c.writeFailed(app, "update status of", "App", err)
	}
	c.consistency.Wrote(app, appsResource, result)
	klog.FromContext(ctx).V(4).Info("Updated status")
	return nil
}

func (c *Controller) created(ctx context.Context, app *appv1beta1.App, kind string, resource schema.GroupResource, obj metav1.Object) {
	c.consistency.Wrote(app, resource, obj)
	klog.FromContext(ctx).V(2).Info("Created child", "kind", kind)
	c.recorder.Eventf(app, corev1.EventTypeNormal, "Created"+kind, "Created %s %s", kind, obj.GetName())
}

func (c *Controller) updated(ctx context.Context, app *appv1beta1.App, kind string) {
	klog.FromContext(ctx).V(2).Info("Repaired child", "kind", kind)
	c.recorder.Eventf(app, corev1.EventTypeNormal, "Updated"+kind, "Updated %s %s to match the App", kind, app.Name)
}

// notOwned reports a same-name object the App does not control: it is left
// alone, and the error retries the App with backoff.
func (c *Controller) notOwned(app *appv1beta1.App, kind string, live metav1.Object) error {
	err := controller.NewNotOwnedError(kind, live)
	c.recorder.Eventf(app, corev1.EventTypeWarning, appv1beta1.ReasonResourceExists, "Not managing %s %s: %v", kind, live.GetName(), err)
	return err
}

// writeFailed reports a failed write. Conflicts and already-exists mean the
// cache is behind: the retry sees the newer object and reports it, so they
// get no event of their own.
func (c *Controller) writeFailed(app *appv1beta1.App, verb, kind string, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !errors.Is(err, context.Canceled) {
		c.recorder.Eventf(app, corev1.EventTypeWarning, "WriteFailed", "Failed to %s %s %s: %v", verb, kind, app.Name, err)
	}
	return fmt.Errorf("%s %s %s/%s: %w", verb, kind, app.Namespace, app.Name, err)
}
