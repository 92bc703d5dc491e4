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

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
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

	namespace := childNamespace(p, c.opts.DefaultNamespace)
	want := desiredChildren(p, namespace, c.podSecurityLevel(namespace))
	obs := observed{namespace: namespace}
	if reason, err := c.opts.refusal(p, namespace); err != nil {
		// Children written before the refusal (the flags changed at a
		// restart, or the webhook was off) are left as they are: deleting
		// them would take a serving Pipeline down on a flag change, and the
		// Warning and Degraded tell the administrator, who decides. Nothing
		// new is written for it.
		return controller.Result{}, c.refuse(ctx, p, obs, want, reason, err)
	}
	if err := c.storageOverlap(p); err != nil {
		return controller.Result{}, c.refuse(ctx, p, obs, want, pipelinev1.ReasonStorageOverlap, err)
	}
	if err := c.namespaceMissing(namespace); err != nil {
		// The namespace's creation requeues the Pipeline.
		return controller.Result{}, c.refuse(ctx, p, obs, want, pipelinev1.ReasonNamespaceNotFound, err)
	}
	// record sorts a child's error into a conflict, a failure, or a
	// transient error that is only retried.
	record := func(err error) {
		var notOwned *controller.NotOwnedError
		switch {
		case err == nil:
		case controller.IsTransient(err):
			obs.transient = append(obs.transient, err)
		case errors.As(err, &notOwned):
			obs.conflicts = append(obs.conflicts, err)
			c.recorder.Eventf(p, corev1.EventTypeWarning, pipelinev1.ReasonResourceExists, "%v; leaving it alone", err)
		default:
			obs.failures = append(obs.failures, err)
		}
	}

	namespaceReady, err := c.ensureNamespace(ctx, p, namespace)
	record(err)
	// The claim first, then the volume reserved for it by UID: the binder
	// binds a volume reserved by name only to any claim of that name, such
	// as another team's made before. A claim that is not the Pipeline's
	// gets no volume; a volume that is not gets no claim, which would bind
	// to it by name.
	obs.volume, obs.volumeErr = c.cachedVolume(p, *want.volume.GetName())
	if obs.volume != nil {
		// The claim names its volume's UID, so that a new volume changes
		// the claim: the binder binds a claim on the claim's events (or at
		// its resync, 15 s by default), not on the volume's.
		want.claim.WithAnnotations(map[string]string{AnnotationVolumeUID: string(obs.volume.UID)})
	}
	if namespaceReady && obs.volumeErr == nil {
		obs.claim, obs.claimErr = syncChild(ctx, c, p, &obs, c.claims, want.claim)
		record(obs.claimErr)
	}
	if obs.claim != nil && obs.claim.DeletionTimestamp == nil {
		// A claim created again (its namespace was) moves the volume to
		// its own UID; the binder binds them then.
		want.volume = desiredPersistentVolume(p, namespace, obs.claim.UID)
		obs.volume, obs.volumeErr = syncChild(ctx, c, p, &obs, c.volumes, want.volume)
	}
	record(obs.volumeErr)
	storageBlocker := mountBlocker(p, namespace, *want.claim.GetName(), obs)
	obs.steps = make([]observedStep, len(p.Spec.Steps))
	for i, step := range p.Spec.Steps {
		obs.steps[i] = observedStep{
			model:          step.Model,
			deploymentName: *want.deployments[i].GetName(),
			serviceName:    *want.services[i].GetName(),
			missingNodes:   c.missingNodes(stepNodes(step)),
		}
	}
	if namespaceReady {
		// Services first: a step's DST names the next step's Service, so
		// its Deployment is written only once that Service is ours.
		for i := range obs.steps {
			s := &obs.steps[i]
			s.service, s.serviceErr = syncChild(ctx, c, p, &obs, c.services, want.services[i])
			record(s.serviceErr)
		}
		for i := range obs.steps {
			s, next := &obs.steps[i], obs.steps[(i+1)%len(obs.steps)]
			if next.service == nil {
				// The Service's own error is recorded and retried.
				s.dstBlocker = dstBlocker(namespace, next)
			}
			// Pods mount only a claim and volume the Pipeline controls; a
			// Deployment written before stays as it is.
			s.storageBlocker = storageBlocker
			if s.dstBlocker != "" || s.storageBlocker != "" {
				s.deployment = c.ownDeployment(p, namespace, s.deploymentName)
				continue
			}
			s.deployment, s.deploymentErr = syncChild(ctx, c, p, &obs, c.deployments, want.deployments[i])
			record(s.deploymentErr)
		}
	}

	// Make before break: what is no longer wanted (a removed or renamed
	// step, the old namespace's children, children named by an older
	// version) goes only once everything wanted is in place, so a failed
	// move does not take the Pipeline down.
	// Nor while the steps cannot move to the wanted storage: the old claim
	// is what they mount.
	if len(obs.conflicts) == 0 && len(obs.failures) == 0 && len(obs.transient) == 0 && storageBlocker == "" {
		record(c.deleteUnwanted(ctx, p, obs, want))
	}

	errs := slices.Concat(obs.conflicts, obs.failures, obs.transient)
	if obs.created && len(errs) == 0 {
		// What this reconcile would report of the children it just created
		// (storage Pending, no replicas) is superseded at once: the reconcile
		// their events bring, after childBatchPeriod, writes the status
		// once. Anything that went wrong is written at once.
		logger.V(4).Info("Created children; the status waits for the reconcile that observes them")
		return controller.Result{}, nil
	}
	if len(obs.conflicts) == 0 && len(obs.failures) == 0 && len(obs.transient) > 0 {
		// A write that only met a moved world is retried at once: a status
		// written now would claim the generation observed while that child
		// still has the old spec.
		logger.V(2).Info("Pipeline not converged, will retry", "transient", len(obs.transient))
		return controller.Result{}, errors.Join(errs...)
	}
	status := computeStatus(p, obs, metav1.NewTime(time.Now().Truncate(time.Second)))
	if statusErr := c.updateStatus(ctx, p, status); statusErr != nil {
		errs = append(errs, statusErr)
	}
	if len(errs) > 0 {
		logger.V(2).Info("Pipeline not converged, will retry", "conflicts", len(obs.conflicts), "failures", len(obs.failures), "transient", len(obs.transient))
	}
	return controller.Result{}, errors.Join(errs...)
}

// refuse writes nothing but the status of a Pipeline that asks for what
// the manager's flags do not allow, and warns once per generation. No retry:
// only a new spec (or a restart with other flags) can change the answer.
func (c *Controller) refuse(ctx context.Context, p *pipelinev1.Pipeline, obs observed, want children, reason string, why error) error {
	obs.refused, obs.refusedReason = why, reason
	for i, step := range p.Spec.Steps {
		obs.steps = append(obs.steps, observedStep{model: step.Model,
			deploymentName: *want.deployments[i].GetName(), serviceName: *want.services[i].GetName()})
	}
	if !refusedAlready(p, reason) {
		c.recorder.Eventf(p, corev1.EventTypeWarning, reason, "%v", why)
	}
	klog.FromContext(ctx).V(2).Info("Refusing a Pipeline", "reason", reason, "namespace", obs.namespace)
	return c.updateStatus(ctx, p, computeStatus(p, obs, metav1.NewTime(time.Now().Truncate(time.Second))))
}

// refusedAlready reports whether p's status already says that this
// generation is refused for reason.
func refusedAlready(p *pipelinev1.Pipeline, reason string) bool {
	cond := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionDegraded)
	return cond != nil && cond.Reason == reason && cond.ObservedGeneration == p.Generation
}

// namespaceMissing says why a Pipeline targeting the namespace name gets
// nothing: it does not exist and the controller may not create it. A
// namespace someone deleted is not re-created behind their back.
func (c *Controller) namespaceMissing(name string) error {
	if c.opts.CreateNamespaces {
		return nil
	}
	if _, err := c.namespace(name); !apierrors.IsNotFound(err) {
		return nil // a cache error shows in ensureNamespace
	}
	return fmt.Errorf("namespace %s does not exist and the manager does not create namespaces (--pipeline-create-namespaces); "+
		"nothing is created until someone creates it", name)
}

// ensureNamespace creates the children's namespace when it is missing and
// CreateNamespaces allows it. It reports whether namespaced children can be
// written there.
func (c *Controller) ensureNamespace(ctx context.Context, p *pipelinev1.Pipeline, name string) (bool, error) {
	switch ns, err := c.namespace(name); {
	case apierrors.IsNotFound(err) && !c.opts.CreateNamespaces:
		return false, nil // deleted since namespaceMissing; its event requeues p
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading namespace %s from the cache: %w", name, err)
	case ns.GetDeletionTimestamp() != nil:
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
		return false, c.writeFailed(p, "create", "Namespace", "", name, err)
	}
	c.consistency.Wrote(p, namespacesResource, created)
	klog.FromContext(ctx).V(2).Info("Created namespace", "namespace", name)
	return true, nil
}

// namespace reads a namespace's metadata from the cache.
func (c *Controller) namespace(name string) (metav1.Object, error) {
	obj, err := c.namespaces.Get(name)
	if err != nil {
		return nil, err
	}
	return meta.Accessor(obj)
}

// missingNodes returns the nodes in names that do not exist.
func (c *Controller) missingNodes(names []string) []string {
	var missing []string
	for _, n := range names {
		if _, err := c.nodes.Get(n); apierrors.IsNotFound(err) { // metadata only
			missing = append(missing, n)
		}
	}
	return missing
}

// updateStatus writes status if it differs from what the Pipeline has.
func (c *Controller) updateStatus(ctx context.Context, p *pipelinev1.Pipeline, status pipelinev1.PipelineStatus) error {
	if apiequality.Semantic.DeepEqual(p.Status, status) {
		return nil
	}
	updated := p.DeepCopy()
	updated.Status = status
	written, err := c.crdClient.PipelineV1().Pipelines().UpdateStatus(ctx, updated,
		metav1.UpdateOptions{FieldManager: controller.FieldManager})
	if apierrors.IsNotFound(err) {
		// Deleted while it was reconciled: the deletion is on its way
		// through the informer and there is nothing left to report on.
		klog.FromContext(ctx).V(2).Info("The Pipeline was deleted before its status was written")
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating the status of Pipeline %s: %w", p.Name, err)
	}
	c.consistency.Wrote(p, pipelinesResource, written)
	return nil
}

// syncChild applies desired for the Pipeline and returns the child as last
// observed (nil when it is missing or not ours); a create sets obs.created. A same-name object the
// Pipeline does not control is never touched: that is a NotOwnedError.
func syncChild[T controller.Object, AC controller.ApplyConfiguration[AC]](ctx context.Context, c *Controller, p *pipelinev1.Pipeline,
	obs *observed, children *controller.Children[T, AC], desired AC) (T, error) {
	var none T
	namespace, name := ptr.Deref(desired.GetNamespace(), ""), ptr.Deref(desired.GetName(), "")
	live, _, err := children.Get(namespace, name) // nil when not found
	if err != nil {
		return none, err
	}
	written, write, err := children.Apply(ctx, p, desired, live)
	var notOwned *controller.NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		return none, err
	case controller.IsTransient(err):
		// Only the cache is behind: what it holds is what the status shows.
		return live, c.writeFailed(p, write.Verb(), children.Kind, namespace, name, err)
	case err != nil:
		return none, c.writeFailed(p, write.Verb(), children.Kind, namespace, name, err)
	case write != controller.Unchanged:
		c.consistency.Wrote(p, children.Resource, written)
		obs.created = obs.created || write == controller.Created
	}
	return written, nil
}

// ownDeployment is the cached Deployment name in namespace when the
// Pipeline controls it, nil otherwise.
func (c *Controller) ownDeployment(p *pipelinev1.Pipeline, namespace, name string) *appsv1.Deployment {
	d, found, err := c.deployments.Get(namespace, name)
	if err != nil || !found || !metav1.IsControlledBy(d, p) {
		return nil
	}
	return d
}

// writeFailed reports a failed write of the Pipeline's child.
func (c *Controller) writeFailed(p *pipelinev1.Pipeline, verb, kind, namespace, name string, err error) error {
	what := kind + " " + name
	if namespace != "" {
		what = kind + " " + namespace + "/" + name
	}
	return controller.WriteFailed(c.recorder, p, pipelinev1.ReasonReconcileFailed, verb, what, err)
}
