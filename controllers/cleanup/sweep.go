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

package cleanup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// candidate is an object found stale by one sweep.
type candidate struct {
	kind   trackedKind
	obj    metav1.Object
	reason string
	// owner is the controller found gone in the cache, re-checked against
	// the API server before removal.
	owner metav1.OwnerReference
}

var managedSelector = labels.SelectorFromSet(labels.Set{controller.ManagedByLabel: controller.ManagedByValue})

// sweep finds stale objects in the caches and removes those stale for
// longer than the stale period. The key is ignored.
func (c *Controller) sweep(ctx context.Context, _ controller.Key) (controller.Result, error) {
	logger := klog.FromContext(ctx)
	start := c.clock.Now()
	defer func() { sweepDuration.Observe(c.clock.Since(start).Seconds()) }()
	sweepsTotal.Inc()

	candidates, recovered, err := c.findStale()
	if err != nil {
		return controller.Result{}, err
	}
	counts := map[string]int{}
	for _, k := range append(dependentKinds, pvKind) {
		counts[k.kind] = 0
	}
	for _, cand := range candidates {
		counts[cand.kind.kind]++
	}
	for kind, n := range counts {
		staleObjects.WithLabelValues(kind).Set(float64(n))
	}

	due, unrecorded := c.track(candidates, start)
	var errs []error
	for _, cand := range due {
		if err := c.remove(ctx, cand); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.opts.DryRun { // a dry run writes nothing
		for _, cand := range unrecorded {
			if err := c.writeStaleness(ctx, cand, &start); err != nil {
				errs = append(errs, err)
			}
		}
		for _, cand := range recovered {
			if err := c.writeStaleness(ctx, cand, nil); err != nil {
				errs = append(errs, err)
			}
		}
	}
	logger.V(2).Info("Sweep done", "stale", len(candidates), "due", len(due), "recorded", len(unrecorded), "recovered", len(recovered), "dryRun", c.opts.DryRun)
	if len(errs) > 0 {
		return controller.Result{}, fmt.Errorf("%d writes of the sweep (removals, stale-since records) failed, first: %w", len(errs), errs[0])
	}
	return controller.Result{}, nil
}

// findStale lists this manager's objects from the caches and returns the
// stale ones, and those no longer stale that still carry a stale-since time.
func (c *Controller) findStale() (stale, recovered []candidate, err error) {
	for _, k := range append(dependentKinds, pvKind) {
		objs, err := c.dependents[k].List(managedSelector)
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s from the cache: %w", k.resource.Resource, err)
		}
		for _, o := range objs {
			obj, err := meta.Accessor(o)
			if err != nil || obj.GetDeletionTimestamp() != nil {
				continue
			}
			if _, recorded := obj.GetAnnotations()[StaleSinceAnnotation]; recorded &&
				(!sweepable(obj) || orphanReason(obj, c.lookupOwner) == "") {
				recovered = append(recovered, candidate{kind: k, obj: obj})
				continue
			}
			if !sweepable(obj) {
				continue
			}
			// A PV is judged by its Pipeline like any child, never by its
			// claim: one created before its claim (quota, a conflict, a
			// terminating namespace) is Available or Released with its
			// Pipeline alive: it is the Pipeline controller's to repair.
			if reason := orphanReason(obj, c.lookupOwner); reason != "" {
				stale = append(stale, candidate{kind: k, obj: obj, reason: reason, owner: *metav1.GetControllerOfNoCopy(obj)})
			}
		}
	}
	return stale, recovered, nil
}

// track returns the candidates stale for the whole period, and those not due
// yet whose stale-since time is not recorded on the object yet. The time on
// the object is the one that counts (see StaleSinceAnnotation); memory
// serves only a dry run, which writes nothing, and its report-once.
func (c *Controller) track(candidates []candidate, now time.Time) (due, unrecorded []candidate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[types.UID]staleEntry, len(candidates))
	for _, cand := range candidates {
		uid := cand.obj.GetUID()
		entry, ok := c.staleSince[uid]
		if !ok {
			entry = staleEntry{since: now}
		}
		since, recorded := staleSinceOf(cand.obj)
		switch {
		case !recorded:
			since = entry.since
		case since.After(now):
			since = now // written by a clock ahead of this one
		}
		switch {
		case now.Sub(since) >= c.opts.StalePeriod:
			if !(c.opts.DryRun && entry.reported) {
				due = append(due, cand)
				entry.reported = true
			}
		case !recorded:
			unrecorded = append(unrecorded, cand)
		}
		seen[uid] = entry
	}
	c.staleSince = seen
	return due, unrecorded
}

// remove deletes one stale object, guarded by a UID precondition so that a
// new object of the same name is never hit. In dry-run mode it only reports.
func (c *Controller) remove(ctx context.Context, cand candidate) error {
	logger := klog.FromContext(ctx)
	ns, name, uid := cand.obj.GetNamespace(), cand.obj.GetName(), cand.obj.GetUID()
	ref := objectRef(cand.kind, ns, name, uid)

	// The caches may lag: make sure the owner is really gone.
	if alive, err := c.ownerAlive(ctx, cand.owner, ns); err != nil || alive {
		return err
	}
	removedTotal.WithLabelValues(cand.kind.kind, fmt.Sprint(c.opts.DryRun)).Inc()
	if c.opts.DryRun {
		logger.Info("Would remove stale object (dry run)", "kind", cand.kind.kind, "object", klog.KRef(ns, name), "reason", cand.reason)
		c.recorder.Eventf(ref, corev1.EventTypeNormal, "WouldRemoveStale", "Dry run: would remove %s %s: %s", cand.kind.kind, name, cand.reason)
		return nil
	}
	// The resourceVersion precondition refuses the delete if the object
	// changed since the cache saw it (its owner reference removed by an
	// orphaning delete, the keep annotation added): the next sweep judges it
	// again.
	rv := cand.obj.GetResourceVersion()
	err := c.client.Resource(cand.kind.resource).Namespace(ns).Delete(ctx, name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, replaced or changed since the cache saw it
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", cand.kind.kind, klog.KRef(ns, name), err)
	}
	c.mu.Lock()
	delete(c.staleSince, uid)
	c.mu.Unlock()
	logger.Info("Removed stale object", "kind", cand.kind.kind, "object", klog.KRef(ns, name), "reason", cand.reason)
	c.recorder.Eventf(ref, corev1.EventTypeNormal, "RemovedStale", "Removed %s %s: %s", cand.kind.kind, name, cand.reason)
	return nil
}

// lookupOwner finds an owner in the caches.
func (c *Controller) lookupOwner(ref metav1.OwnerReference, namespace string) (types.UID, bool, bool) {
	gk, known := ownerGroupKind(ref)
	if !known {
		return "", false, false
	}
	lister := c.owners[gk]
	var obj any
	var err error
	if ownerKinds[gk].clusterScoped {
		obj, err = lister.Get(ref.Name)
	} else {
		obj, err = lister.ByNamespace(namespace).Get(ref.Name)
	}
	if err != nil {
		return "", false, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false, true
	}
	return m.GetUID(), true, true
}

// ownerAlive asks the API server whether the owner still exists with the
// referenced UID. One GET per removal, never a LIST.
func (c *Controller) ownerAlive(ctx context.Context, ref metav1.OwnerReference, namespace string) (bool, error) {
	gk, known := ownerGroupKind(ref)
	if !known {
		return true, nil
	}
	o := ownerKinds[gk]
	if o.clusterScoped {
		namespace = ""
	}
	owner, err := c.client.Resource(o.resource).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking owner %s %s: %w", ref.Kind, ref.Name, err)
	}
	return owner.UID == ref.UID, nil
}

func ownerGroupKind(ref metav1.OwnerReference) (schema.GroupKind, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{}, false
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	_, known := ownerKinds[gk]
	return gk, known
}
