package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// sync makes the children of one Pipeline match its spec and then writes
// the status it observed, whether or not every write succeeded. It reads
// from the listers, once they hold its previous writes, and writes only what
// differs.
func (c *Controller) sync(ctx context.Context, key controller.Key) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	// Acting before the caches hold the last reconcile's writes would write
	// them a second time.
	if err := c.consistency.Check(ctx, key); err != nil {
		return controller.Result{}, err
	}
	p, err := c.pipelines.Get(key.Name)
	if apierrors.IsNotFound(err) {
		// The garbage collector removes the children with their owner.
		c.consistency.Clear(key, "")
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if p.DeletionTimestamp != nil {
		return controller.Result{}, nil
	}

	namespace := targetNamespace(p, c.opts.DefaultNamespace)
	want := desiredChildren(p, namespace)
	obs := observed{namespace: namespace}
	// record sorts a child's error into a conflict or a failure.
	record := func(err error) {
		var notOwned *controller.NotOwnedError
		switch {
		case err == nil:
		case errors.As(err, &notOwned):
			obs.conflicts = append(obs.conflicts, err)
			c.recorder.Eventf(p, corev1.EventTypeWarning, pipelinev1beta1.ReasonResourceExists, "%v; leaving it alone", err)
		default:
			obs.failures = append(obs.failures, err)
		}
	}

	obs.volume, obs.volumeErr = syncChild(ctx, c, p, c.volumeOps(), want.volume)
	record(obs.volumeErr)

	namespaceReady, err := c.ensureNamespace(ctx, p, namespace)
	record(err)
	if namespaceReady {
		obs.claim, obs.claimErr = syncChild(ctx, c, p, c.claimOps(), want.claim)
		record(obs.claimErr)
	}
	for i, step := range p.Spec.Steps {
		s := observedStep{
			model:          step.Model,
			deploymentName: want.deployments[i].Name,
			serviceName:    want.services[i].Name,
			missingNodes:   c.missingNodes(stepLocations(step)),
		}
		if namespaceReady {
			s.deployment, s.deploymentErr = syncChild(ctx, c, p, c.deploymentOps(), want.deployments[i])
			record(s.deploymentErr)
			s.service, s.serviceErr = syncChild(ctx, c, p, c.serviceOps(), want.services[i])
			record(s.serviceErr)
		}
		obs.steps = append(obs.steps, s)
	}

	// Make before break: what is no longer wanted (a removed or renamed
	// step, the old namespace's children) goes only once everything wanted
	// is in place, so a failed move does not take the Pipeline down.
	if len(obs.conflicts) == 0 && len(obs.failures) == 0 {
		record(deleteUnwanted(ctx, c, p, c.volumeOps(), want))
		record(deleteUnwanted(ctx, c, p, c.claimOps(), want))
		record(deleteUnwanted(ctx, c, p, c.deploymentOps(), want))
		record(deleteUnwanted(ctx, c, p, c.serviceOps(), want))
	}

	status := computeStatus(p, obs, metav1.NewTime(time.Now().Truncate(time.Second)))
	statusErr := c.updateStatus(ctx, p, status)
	errs := append(obs.conflicts, obs.failures...)
	if statusErr != nil {
		errs = append(errs, statusErr)
	}
	if len(errs) > 0 {
		logger.V(2).Info("Pipeline not converged, will retry", "conflicts", len(obs.conflicts), "failures", len(obs.failures))
	}
	return controller.Result{}, errors.Join(errs...)
}

// ensureNamespace creates the children's namespace when it is missing. It
// reports whether namespaced children can be written there.
func (c *Controller) ensureNamespace(ctx context.Context, p *pipelinev1beta1.Pipeline, name string) (bool, error) {
	switch ns, err := c.namespaces.Get(name); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading namespace %s from the cache: %w", name, err)
	case ns.DeletionTimestamp != nil:
		return false, fmt.Errorf("namespace %s is being deleted; children will be created once it is gone", name)
	default:
		return true, nil
	}
	created, err := c.kubeClient.CoreV1().Namespaces().Create(ctx, desiredNamespace(name),
		metav1.CreateOptions{FieldManager: controller.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return true, nil // the cache is behind; a terminating one shows in the writes
	}
	if err != nil {
		return false, c.writeFailed(p, "create", kindNamespace, desiredNamespace(name), err)
	}
	c.consistency.Wrote(p, namespacesResource, created)
	klog.FromContext(ctx).V(2).Info("Created namespace", "namespace", name)
	return true, nil
}

// missingNodes returns the nodes in names that do not exist.
func (c *Controller) missingNodes(names []string) []string {
	var missing []string
	for _, n := range names {
		if _, err := c.nodes.Get(n); apierrors.IsNotFound(err) {
			missing = append(missing, n)
		}
	}
	return missing
}

// updateStatus writes status if it differs from what the Pipeline has.
func (c *Controller) updateStatus(ctx context.Context, p *pipelinev1beta1.Pipeline, status pipelinev1beta1.PipelineStatus) error {
	if apiequality.Semantic.DeepEqual(p.Status, status) {
		return nil
	}
	updated := p.DeepCopy()
	updated.Status = status
	written, err := c.crdClient.PipelineV1beta1().Pipelines().UpdateStatus(ctx, updated,
		metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if err != nil {
		return fmt.Errorf("updating the status of Pipeline %s: %w", p.Name, err)
	}
	c.consistency.Wrote(p, pipelinesResource, written)
	return nil
}

// childOps is what syncChild and deleteUnwanted need to know about one kind
// of child: how to read it from the cache and how to write it.
type childOps[T metav1.Object] struct {
	kind        string
	resource    schema.GroupResource
	get         func(namespace, name string) (T, error)
	list        func(selector labels.Selector) ([]T, error)
	create      func(ctx context.Context, obj T) (T, error)
	update      func(ctx context.Context, obj T) (T, error)
	delete      func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	needsUpdate func(desired, live T) bool
	merge       func(desired, live T) T
}

// syncChild creates desired if it is missing, updates it if it drifted in a
// field the controller sets, and returns the child as last observed (zero
// when it is missing or not ours). A same-name object the Pipeline does not
// control is never touched: that is a NotOwnedError.
func syncChild[T metav1.Object](ctx context.Context, c *Controller, p *pipelinev1beta1.Pipeline, ops childOps[T], desired T) (T, error) {
	var none T
	logger := klog.FromContext(ctx).WithValues("kind", ops.kind, "child", klog.KObj(desired))
	live, found, err := lookup(ops, desired.GetNamespace(), desired.GetName())
	switch {
	case err != nil:
		return none, err
	case !found:
		created, err := ops.create(ctx, desired)
		if err != nil {
			return none, c.writeFailed(p, "create", ops.kind, desired, err)
		}
		c.consistency.Wrote(p, ops.resource, created)
		logger.V(2).Info("Created child")
		return created, nil
	case !controller.IsControlledBy(live, p):
		return none, controller.NewNotOwnedError(ops.kind, live)
	case live.GetDeletionTimestamp() != nil:
		// Someone deleted it; its delete event brings the Pipeline back
		// to create a new one.
		return live, nil
	case ops.needsUpdate(desired, live):
		updated, err := ops.update(ctx, ops.merge(desired, live))
		if err != nil {
			return live, c.writeFailed(p, "update", ops.kind, desired, err)
		}
		c.consistency.Wrote(p, ops.resource, updated)
		logger.V(2).Info("Updated child to match the Pipeline")
		return updated, nil
	default:
		return live, nil
	}
}

// deleteUnwanted deletes the children of kind that the Pipeline controls
// but no longer wants, found by the pipeline label. The UID precondition
// keeps a same-name object created since the cache saw ours safe.
func deleteUnwanted[T metav1.Object](ctx context.Context, c *Controller, p *pipelinev1beta1.Pipeline, ops childOps[T], want children) error {
	selector := labels.SelectorFromSet(labels.Set{LabelPipeline: pipelineLabelValue(p.Name)})
	objs, err := ops.list(selector)
	if err != nil {
		return fmt.Errorf("listing %ss of Pipeline %s from the cache: %w", ops.kind, p.Name, err)
	}
	wanted := want.names(ops.kind)
	var errs []error
	for _, obj := range objs {
		ref := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if wanted[ref] || !controller.IsControlledBy(obj, p) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		uid := obj.GetUID()
		err := ops.delete(ctx, ref.Namespace, ref.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &uid},
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, c.writeFailed(p, "delete", ops.kind, obj, err))
			continue
		}
		c.consistency.Deleted(p, ops.resource, obj)
		klog.FromContext(ctx).V(2).Info("Deleted child the Pipeline no longer wants", "kind", ops.kind, "child", klog.KObj(obj))
	}
	return errors.Join(errs...)
}

// lookup reads a child from the cache.
func lookup[T metav1.Object](ops childOps[T], namespace, name string) (T, bool, error) {
	var none T
	obj, err := ops.get(namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return none, false, nil
	case err != nil:
		return none, false, fmt.Errorf("reading %s %s/%s from the cache: %w", ops.kind, namespace, name, err)
	}
	return obj, true, nil
}

// names are the namespace/names of the wanted children of kind.
func (w children) names(kind string) map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	add := func(o metav1.Object) {
		out[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = true
	}
	switch kind {
	case kindVolume:
		add(w.volume)
	case kindClaim:
		add(w.claim)
	case kindDeployment:
		for _, d := range w.deployments {
			add(d)
		}
	case kindService:
		for _, s := range w.services {
			add(s)
		}
	}
	return out
}

// writeFailed reports a failed write. Conflicts and already-exists mean the
// cache is behind: the retry will see the newer object, so no event.
func (c *Controller) writeFailed(p *pipelinev1beta1.Pipeline, verb, kind string, obj metav1.Object, err error) error {
	what := kind + " " + obj.GetName()
	if obj.GetNamespace() != "" {
		what = kind + " " + obj.GetNamespace() + "/" + obj.GetName()
	}
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !errors.Is(err, context.Canceled) {
		c.recorder.Eventf(p, corev1.EventTypeWarning, pipelinev1beta1.ReasonReconcileFailed, "Failed to %s %s: %v", verb, what, err)
	}
	return fmt.Errorf("%s %s: %w", verb, what, err)
}

func (c *Controller) volumeOps() childOps[*corev1.PersistentVolume] {
	client := c.kubeClient.CoreV1().PersistentVolumes()
	return childOps[*corev1.PersistentVolume]{
		kind:     kindVolume,
		resource: volumesResource,
		get:      func(_, name string) (*corev1.PersistentVolume, error) { return c.volumes.Get(name) },
		list:     c.volumes.List,
		create: func(ctx context.Context, obj *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
			return client.Create(ctx, obj, metav1.CreateOptions{FieldManager: controller.FieldManager})
		},
		update: func(ctx context.Context, obj *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
			return client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		},
		delete: func(ctx context.Context, _, name string, opts metav1.DeleteOptions) error {
			return client.Delete(ctx, name, opts)
		},
		needsUpdate: volumeNeedsUpdate,
		merge:       mergeVolume,
	}
}

func (c *Controller) claimOps() childOps[*corev1.PersistentVolumeClaim] {
	return childOps[*corev1.PersistentVolumeClaim]{
		kind:     kindClaim,
		resource: claimsResource,
		get: func(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
			return c.claims.PersistentVolumeClaims(namespace).Get(name)
		},
		list: c.claims.List,
		create: func(ctx context.Context, obj *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
			return c.kubeClient.CoreV1().PersistentVolumeClaims(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: controller.FieldManager})
		},
		update: func(ctx context.Context, obj *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
			return c.kubeClient.CoreV1().PersistentVolumeClaims(obj.Namespace).Update(ctx, obj, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		},
		delete: func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
			return c.kubeClient.CoreV1().PersistentVolumeClaims(namespace).Delete(ctx, name, opts)
		},
		needsUpdate: claimNeedsUpdate,
		merge:       mergeClaim,
	}
}

func (c *Controller) deploymentOps() childOps[*appsv1.Deployment] {
	return childOps[*appsv1.Deployment]{
		kind:     kindDeployment,
		resource: deploymentsResource,
		get: func(namespace, name string) (*appsv1.Deployment, error) {
			return c.deployments.Deployments(namespace).Get(name)
		},
		list: c.deployments.List,
		create: func(ctx context.Context, obj *appsv1.Deployment) (*appsv1.Deployment, error) {
			return c.kubeClient.AppsV1().Deployments(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: controller.FieldManager})
		},
		update: func(ctx context.Context, obj *appsv1.Deployment) (*appsv1.Deployment, error) {
			return c.kubeClient.AppsV1().Deployments(obj.Namespace).Update(ctx, obj, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		},
		delete: func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
			return c.kubeClient.AppsV1().Deployments(namespace).Delete(ctx, name, opts)
		},
		needsUpdate: deploymentNeedsUpdate,
		merge:       mergeDeployment,
	}
}

func (c *Controller) serviceOps() childOps[*corev1.Service] {
	return childOps[*corev1.Service]{
		kind:     kindService,
		resource: servicesResource,
		get: func(namespace, name string) (*corev1.Service, error) {
			return c.services.Services(namespace).Get(name)
		},
		list: c.services.List,
		create: func(ctx context.Context, obj *corev1.Service) (*corev1.Service, error) {
			return c.kubeClient.CoreV1().Services(obj.Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: controller.FieldManager})
		},
		update: func(ctx context.Context, obj *corev1.Service) (*corev1.Service, error) {
			return c.kubeClient.CoreV1().Services(obj.Namespace).Update(ctx, obj, metav1.UpdateOptions{FieldManager: controller.FieldManager})
		},
		delete: func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
			return c.kubeClient.CoreV1().Services(namespace).Delete(ctx, name, opts)
		},
		needsUpdate: serviceNeedsUpdate,
		merge:       mergeService,
	}
}
