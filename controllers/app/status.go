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
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// observed is what a reconcile saw and did: the App's children as they are
// after its writes (nil when missing or not the App's), and the errors of
// the writes that failed.
type observed struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	ingress    *networkingv1.Ingress
	// pods are the App's pods, as TransformPod keeps them.
	pods []*corev1.Pod
	errs []error
	// ingressHostRequired is an Ingress asked for and refused: the manager
	// has no domain to give it a host.
	ingressHostRequired bool
}

// ingressHostRequiredMessage says why an App without a host gets no Ingress.
const ingressHostRequiredMessage = "No Ingress: the manager runs without --app-ingress-domain, which gives an App's Ingress its host, " +
	"and an Ingress without a host would catch every request no other Ingress of its class matches. " +
	"The App's Service still serves it inside the cluster; ask the administrator for a domain, or set enable_ingress to false"

// newlyRefused reports whether status, and not old, says the App's Ingress
// is refused for want of a host: the Warning goes out once, not per resync.
func newlyRefused(old, status appv1.AppStatus) bool {
	refused := func(s appv1.AppStatus) bool {
		return meta.IsStatusConditionPresentAndEqual(s.Conditions, appv1.ConditionDegraded, metav1.ConditionTrue) &&
			meta.FindStatusCondition(s.Conditions, appv1.ConditionDegraded).Reason == appv1.ReasonIngressHostRequired
	}
	return refused(status) && !refused(old)
}

// missing names the children the App asks for that it does not have.
func (o observed) missing(app *appv1.App) []string {
	var names []string
	if o.deployment == nil {
		names = append(names, "Deployment "+app.Name)
	}
	if app.Spec.WantsService() && o.service == nil {
		names = append(names, "Service "+app.Name)
	}
	if app.Spec.WantsIngress() && o.ingress == nil {
		names = append(names, "Ingress "+app.Name)
	}
	return names
}

// isResourceExists reports whether err is a same-name object this App does
// not control, seen in the cache.
func isResourceExists(err error) bool {
	var notOwned *controller.NotOwnedError
	return errors.As(err, &notOwned)
}

// appStatus computes the App's status from what the reconcile observed.
// Conditions whose status did not change keep their lastTransitionTime, so
// an unchanged world yields an unchanged status; now stamps the others.
func appStatus(app *appv1.App, obs observed, now metav1.Time) appv1.AppStatus {
	status := appv1.AppStatus{
		ObservedGeneration: app.Generation,
		URL:                ingressURL(obs.ingress),
		Conditions:         slices.Clone(app.Status.Conditions),
	}
	// Unset replicas are whatever the Deployment's owner of them says.
	desired := ptr.Deref(app.Spec.Replicas, 1)
	status.Selector = labels.SelectorFromSet(selectorLabels(app)).String()
	if d := obs.deployment; d != nil {
		status.Replicas = d.Status.Replicas
		status.ReadyReplicas = d.Status.ReadyReplicas
		status.AvailableReplicas = d.Status.AvailableReplicas
		if app.Spec.Replicas == nil {
			desired = ptr.Deref(d.Spec.Replicas, 1)
		}
		// A legacy Deployment's selector, while it lives.
		if selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && d.Spec.Selector != nil {
			status.Selector = selector.String()
		}
	}

	set := func(conditionType string, s metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type:               conditionType,
			Status:             s,
			Reason:             reason,
			Message:            message,
			ObservedGeneration: app.Generation,
			LastTransitionTime: now,
		})
	}

	available := fmt.Sprintf("%d of %d replicas available", status.AvailableReplicas, desired)
	switch missing := obs.missing(app); {
	case obs.ingressHostRequired:
		// Not Ready: Ready means every child asked for exists.
		set(appv1.ConditionReady, metav1.ConditionFalse, appv1.ReasonIngressHostRequired, ingressHostRequiredMessage)
	case len(missing) > 0:
		set(appv1.ConditionReady, metav1.ConditionFalse, appv1.ReasonResourceMissing,
			"Missing "+strings.Join(missing, ", "))
	case status.AvailableReplicas < desired:
		// Why, as far as the pods tell: the same words for as long as the
		// same problems hold, so that pod updates alone write nothing.
		message := available
		if problems := podProblems(obs.pods); problems != "" {
			message += ": " + problems
		}
		set(appv1.ConditionReady, metav1.ConditionFalse, appv1.ReasonReplicasUnavailable, message)
	default:
		set(appv1.ConditionReady, metav1.ConditionTrue, appv1.ReasonAvailable, available)
	}

	progressing, reason, message := rollout(obs.deployment, app.Name)
	set(appv1.ConditionProgressing, progressing, reason, message)

	var conflicts, failures []string
	for _, err := range obs.errs {
		switch {
		case controller.IsTransient(err):
			// Retried with backoff; reporting it would flap the status.
		case isResourceExists(err):
			conflicts = append(conflicts, err.Error())
		default:
			failures = append(failures, err.Error())
		}
	}
	switch {
	case len(conflicts) > 0:
		set(appv1.ConditionDegraded, metav1.ConditionTrue, appv1.ReasonResourceExists,
			strings.Join(append(conflicts, failures...), "; "))
	case len(failures) > 0:
		set(appv1.ConditionDegraded, metav1.ConditionTrue, appv1.ReasonReconcileFailed,
			strings.Join(failures, "; "))
	case obs.ingressHostRequired:
		set(appv1.ConditionDegraded, metav1.ConditionTrue, appv1.ReasonIngressHostRequired, ingressHostRequiredMessage)
	default:
		set(appv1.ConditionDegraded, metav1.ConditionFalse, appv1.ReasonAsExpected, "")
	}
	return status
}

// rollout says whether the Deployment is rolling out, as `kubectl rollout
// status` judges it. Messages carry no counts, so that a rollout's progress
// alone does not rewrite the status.
func rollout(d *appsv1.Deployment, name string) (metav1.ConditionStatus, string, string) {
	if d == nil {
		return metav1.ConditionFalse, appv1.ReasonResourceMissing, "Deployment " + name + " does not exist"
	}
	// Until the deployment controller observes a new spec, its status is the
	// old spec's: the replicas are as good as not updated. One message for
	// both, so that its first look at a new Deployment writes nothing.
	const notUpdated = "Waiting for replicas to be updated"
	if d.Generation > d.Status.ObservedGeneration {
		return metav1.ConditionTrue, appv1.ReasonRollingOut, notUpdated
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return metav1.ConditionFalse, appv1.ReasonProgressDeadlineExceeded, c.Message
		}
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	switch {
	case d.Status.UpdatedReplicas < replicas:
		return metav1.ConditionTrue, appv1.ReasonRollingOut, notUpdated
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return metav1.ConditionTrue, appv1.ReasonRollingOut, "Waiting for old replicas to terminate"
	case d.Status.AvailableReplicas < d.Status.UpdatedReplicas:
		return metav1.ConditionTrue, appv1.ReasonRollingOut, "Waiting for updated replicas to become available"
	}
	return metav1.ConditionFalse, appv1.ReasonRolloutComplete, "The Deployment is up to date"
}
