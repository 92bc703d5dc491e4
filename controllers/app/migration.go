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
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
)

// A Deployment's selector is immutable, so an App whose Deployment an
// older manager created on another selector (LegacyInstanceLabel) gets a
// new Deployment, without its Service ever losing its ready endpoints.
// Decided afresh from the cache at every sync:
//
//  1. The legacy Deployment keeps its selector and gets the new pod
//     template labels (the legacy ones kept, since its selector needs
//     them); the Service keeps the legacy selector while that rolls out.
//  2. Once it has fully rolled out, every pod carries AppLabel: the
//     Service moves to the new selector, with the same endpoints.
//  3. Once the cached Service has the new selector, the legacy
//     Deployment's old, empty ReplicaSets are deleted and the Deployment
//     itself with PropagationPolicy Orphan: its current ReplicaSet and
//     pods stay and keep serving.
//  4. The next sync creates the Deployment on the new selector, which
//     adopts the orphaned ReplicaSet (it carries AppLabel) and rolls out
//     the final template, without the legacy label.

// selectors is which selectors an App's children get in this sync.
type selectors struct {
	// deployment is the Deployment's selector, whose labels its pod
	// template carries besides childLabels.
	deployment map[string]string
	// service is the Service's selector.
	service map[string]string
	// replaceDeployment says the legacy Deployment is ready to go (step 3).
	replaceDeployment bool
}

// newSelectors is the selectors of an App with no legacy Deployment.
func newSelectors(app *appv1.App) selectors {
	return selectors{deployment: selectorLabels(app), service: selectorLabels(app)}
}

// selectorsOf decides the selectors from the App's cached Deployment and
// Service (nil when missing). Children the App does not control count as
// missing: they are never written anyway.
func selectorsOf(app *appv1.App, d *appsv1.Deployment, svc *corev1.Service) selectors {
	sel := newSelectors(app)
	if d == nil || !metav1.IsControlledBy(d, app) || d.Spec.Selector == nil || onSelector(d.Spec.Selector, sel.deployment) {
		return sel
	}
	// A legacy Deployment: its selector stays while it lives.
	sel.deployment = maps.Clone(d.Spec.Selector.MatchLabels)
	serviceMoved := svc != nil && metav1.IsControlledBy(svc, app) && maps.Equal(svc.Spec.Selector, sel.service)
	ready := rolledOutWithAppLabel(d, app)
	switch {
	case serviceMoved:
		// Never back: the Service's pods all carry AppLabel already.
		sel.replaceDeployment = ready
	case ready:
		// Step 2; an App without a Service of its own has nothing to wait for.
		sel.replaceDeployment = svc == nil || !metav1.IsControlledBy(svc, app)
	default:
		sel.service = maps.Clone(sel.deployment)
	}
	return sel
}

// onSelector reports whether selector is exactly matchLabels want.
func onSelector(selector *metav1.LabelSelector, want map[string]string) bool {
	return len(selector.MatchExpressions) == 0 && maps.Equal(selector.MatchLabels, want)
}

// rolledOutWithAppLabel reports whether every pod of d is of its latest
// template, available, and that template carries the App's AppLabel, as
// the Deployment's status says.
func rolledOutWithAppLabel(d *appsv1.Deployment, app *appv1.App) bool {
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	return d.Spec.Template.Labels[AppLabel] == app.Name &&
		d.Status.ObservedGeneration == d.Generation &&
		d.Status.UpdatedReplicas == replicas &&
		d.Status.Replicas == replicas &&
		d.Status.AvailableReplicas == replicas
}

// replaceLegacyDeployment is step 3: it deletes the legacy Deployment d's
// old ReplicaSets, which carry no AppLabel and would be orphaned for good,
// then d with PropagationPolicy Orphan, so that its current ReplicaSet and
// pods outlive it. Both deletes carry a UID precondition. Nothing is done
// while d is already being deleted.
func (c *Controller) replaceLegacyDeployment(ctx context.Context, app *appv1.App, d *appsv1.Deployment) error {
	if d.DeletionTimestamp != nil {
		return nil
	}
	// A read from the API server, made once per App in its life: no cache
	// of ReplicaSets is worth keeping for it.
	rss, err := c.kube.AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String(),
	})
	if err != nil {
		return fmt.Errorf("listing the ReplicaSets of the legacy Deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	for i := range rss.Items {
		rs := &rss.Items[i]
		if !metav1.IsControlledBy(rs, d) || rs.Labels[AppLabel] == app.Name || rs.DeletionTimestamp != nil {
			continue // adopted by the new Deployment, or not d's
		}
		if ptr.Deref(rs.Spec.Replicas, 1) != 0 || rs.Status.Replicas != 0 {
			// The cached Deployment status was behind: retried, not reported.
			return apierrors.NewConflict(appsv1.Resource("replicasets"), rs.Name,
				fmt.Errorf("old ReplicaSet of the legacy Deployment %s/%s still has pods", d.Namespace, d.Name))
		}
		err := c.kube.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: ptr.To(rs.UID)},
			PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return c.writeFailed(app, "delete", "ReplicaSet", err)
		}
	}
	err = c.kube.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: ptr.To(d.UID)},
		PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan),
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.writeFailed(app, "delete", "Deployment", err)
	}
	c.consistency.Deleted(app, c.deployments.Resource, d)
	klog.FromContext(ctx).V(2).Info("Deleted the legacy Deployment, orphaning its pods", "deployment", klog.KObj(d), "selector", d.Spec.Selector.MatchLabels)
	c.recorder.Eventf(app, corev1.EventTypeNormal, "ReplacingDeployment",
		"Replacing Deployment %s, whose selector %s cannot change, with one on %s; its pods keep serving",
		d.Name, labels.SelectorFromSet(d.Spec.Selector.MatchLabels), labels.SelectorFromSet(selectorLabels(app)))
	return nil
}
