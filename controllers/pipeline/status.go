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
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// observed is what one reconcile saw and did: the children as they are after
// its writes (nil when missing or not the Pipeline's), and what went wrong.
type observed struct {
	namespace string
	volume    *corev1.PersistentVolume
	claim     *corev1.PersistentVolumeClaim
	// volumeErr and claimErr say why volume or claim is nil, when a write
	// failed or the object is not ours.
	volumeErr, claimErr error
	steps               []observedStep // in step order
	// conflicts are NotOwnedErrors: same-name objects that are not ours.
	conflicts []error
	// failures are writes that failed for another reason.
	failures []error
	// transient are errors that only say the cache was behind (conflicts,
	// objects that already exist): retried, never reported in status.
	transient []error
	// refused says why nothing was written: the namespace, storage or an
	// image is not allowed; refusedReason is the matching condition reason.
	refused       error
	refusedReason string
	// created reports that the reconcile created a child.
	created bool
}

type observedStep struct {
	model          string
	deploymentName string
	serviceName    string
	deployment     *appsv1.Deployment
	service        *corev1.Service
	// deploymentErr and serviceErr say why deployment or service is nil.
	deploymentErr, serviceErr error
	// missingNodes are the step's locations that name no Node.
	missingNodes []string
	// dstBlocker, when not empty, says why the Deployment was not written:
	// the next step's Service, which its DST would name, is not the
	// Pipeline's, and what is in the way.
	dstBlocker string
	// storageBlocker, when not empty, says why the Deployment was not
	// written: the claim it would mount, or the volume that claim binds
	// to, is not the Pipeline's (mountBlocker).
	storageBlocker string
}

// dstBlocker describes why next's Service is not the Pipeline's: the
// object in its way and who controls it, or why it could not be written.
func dstBlocker(namespace string, next observedStep) string {
	var notOwned *controller.NotOwnedError
	if errors.As(next.serviceErr, &notOwned) {
		return notOwned.Error()
	}
	return absent(fmt.Sprintf("Service %s/%s", namespace, next.serviceName), next.serviceErr)
}

// maxListed bounds how many problems a condition message lists.
const maxListed = 5

// computeStatus is the status of p given what a reconcile observed. Condition
// transition times are kept while a condition's status does not change, so
// that an unchanged world gives an equal status and no write.
func computeStatus(p *pipelinev1.Pipeline, obs observed, now metav1.Time) pipelinev1.PipelineStatus {
	status := pipelinev1.PipelineStatus{
		ObservedGeneration: p.Generation,
		Conditions:         append([]metav1.Condition(nil), p.Status.Conditions...),
		Storage:            storageStatus(p, obs),
	}
	for _, s := range obs.steps {
		// v1beta1 readers see the phases as detailPhase and their number
		// as stepCount (apis/pipeline/conversion).
		st := pipelinev1.StepStatus{Model: s.model, DeploymentName: s.deploymentName, DeploymentPhase: deploymentPhase(s), ServiceName: s.serviceName}
		if s.deployment != nil {
			st.Replicas = ptr.Deref(s.deployment.Spec.Replicas, 1)
			st.ReadyReplicas = s.deployment.Status.ReadyReplicas
		}
		status.Steps = append(status.Steps, st)
	}

	storage := storageCondition(obs, status.Storage)
	steps := stepsCondition(obs)
	degraded := degradedCondition(obs)
	ready := metav1.Condition{Type: pipelinev1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: pipelinev1.ReasonReady, Message: "The storage is bound and every step has its replicas ready"}
	switch {
	case degraded.Status == metav1.ConditionTrue:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, degraded.Reason, degraded.Message
	case storage.Status != metav1.ConditionTrue:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, pipelinev1.ReasonStorageNotReady, storage.Message
	case steps.Status != metav1.ConditionTrue:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, pipelinev1.ReasonStepsNotReady, steps.Message
	}
	for _, cond := range []metav1.Condition{ready, storage, steps, degraded} {
		cond.ObservedGeneration = p.Generation
		cond.LastTransitionTime = now
		meta.SetStatusCondition(&status.Conditions, cond)
	}
	status.Models = modelsOf(p)
	status.Phase = phaseOf(status.Conditions)
	return status
}

func storageStatus(p *pipelinev1.Pipeline, obs observed) *pipelinev1.StorageStatus {
	name := storageName(p, obs.namespace)
	s := &pipelinev1.StorageStatus{PVName: name, PVCName: name}
	if obs.volume != nil {
		s.PVPhase = obs.volume.Status.Phase
	}
	if obs.claim != nil {
		s.PVCPhase = obs.claim.Status.Phase
	}
	return s
}

func storageCondition(obs observed, s *pipelinev1.StorageStatus) metav1.Condition {
	cond := metav1.Condition{Type: pipelinev1.ConditionStorageReady, Status: metav1.ConditionFalse, Reason: pipelinev1.ReasonPending}
	claim := fmt.Sprintf("PersistentVolumeClaim %s/%s", obs.namespace, s.PVCName)
	switch {
	// The claim is written first: what blocks it is what the storage waits for.
	case obs.claim == nil && obs.claimErr != nil:
		cond.Message = absent(claim, obs.claimErr)
	case obs.volume == nil:
		cond.Message = absent("PersistentVolume "+s.PVName, obs.volumeErr)
	case obs.claim == nil:
		cond.Message = absent(claim, obs.claimErr)
	case obs.claim.DeletionTimestamp != nil:
		cond.Message = claim + " is being deleted"
	case s.PVCPhase == corev1.ClaimBound && s.PVPhase == corev1.VolumeBound:
		cond.Status, cond.Reason = metav1.ConditionTrue, pipelinev1.ReasonBound
		cond.Message = fmt.Sprintf("%s is bound to PersistentVolume %s", claim, s.PVName)
	default:
		cond.Message = fmt.Sprintf("%s is %s, PersistentVolume %s is %s", claim, phaseOrUnknown(string(s.PVCPhase)), s.PVName, phaseOrUnknown(string(s.PVPhase)))
	}
	return cond
}

func phaseOrUnknown(phase string) string {
	if phase == "" {
		return "without a phase yet"
	}
	return phase
}

func stepsCondition(obs observed) metav1.Condition {
	var notReady, notes []string
	for i, s := range obs.steps {
		step := fmt.Sprintf("step %d (%s)", i+1, s.model)
		deployment := fmt.Sprintf("Deployment %s/%s", obs.namespace, s.deploymentName)
		var problem string
		switch d := s.deployment; {
		case s.storageBlocker != "":
			problem = fmt.Sprintf("%s is not written while the storage it would mount is not this Pipeline's: %s", deployment, s.storageBlocker)
		case s.dstBlocker != "":
			problem = fmt.Sprintf("%s is not written while its DST would name a Service that is not this Pipeline's: %s", deployment, s.dstBlocker)
		case d == nil:
			problem = absent(deployment, s.deploymentErr)
		case d.DeletionTimestamp != nil:
			problem = deployment + " is being deleted"
		case !deploymentReady(d):
			problem = fmt.Sprintf("%d/%d replicas ready", d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 1))
			// Pods the API server refuses (PodSecurity, a quota) never show
			// up; the Deployment says why.
			if c := replicaFailure(d); c != "" {
				problem += ": " + c
			}
		case s.service == nil:
			// The previous step's DST names it: without it the chain is broken.
			problem = absent(fmt.Sprintf("Service %s/%s", obs.namespace, s.serviceName), s.serviceErr)
		}
		if len(s.missingNodes) > 0 {
			missing := fmt.Sprintf("pinned to missing node(s) %s", strings.Join(s.missingNodes, ", "))
			if problem == "" {
				notes = append(notes, step+" is "+missing)
			} else {
				problem += ", " + missing
			}
		}
		if problem != "" {
			notReady = append(notReady, step+": "+problem)
		}
	}
	if len(notReady) == 0 {
		msg := fmt.Sprintf("All %d steps have their replicas ready", len(obs.steps))
		if len(notes) > 0 {
			msg += "; " + joinLimited(notes)
		}
		return metav1.Condition{Type: pipelinev1.ConditionStepsReady, Status: metav1.ConditionTrue,
			Reason: pipelinev1.ReasonStepsAvailable, Message: msg}
	}
	return metav1.Condition{Type: pipelinev1.ConditionStepsReady, Status: metav1.ConditionFalse,
		Reason: pipelinev1.ReasonStepsNotReady, Message: joinLimited(notReady)}
}

// absent is a short account of why the child what (kind and name) is not
// there as one of ours: err is what its write returned, nil when there was
// nothing to write (it is missing and the namespace is not ready).
func absent(what string, err error) string {
	var notOwned *controller.NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		return what + " is not controlled by this Pipeline"
	case err != nil && !controller.IsTransient(err):
		return err.Error()
	default:
		return what + " does not exist"
	}
}

// deploymentReady reports whether a Deployment has rolled out its current
// spec and all its replicas are ready, as kubectl rollout status decides.
// replicaFailure is the message of the Deployment's ReplicaFailure
// condition, empty unless it is True.
func replicaFailure(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

func deploymentReady(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	return s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas == want && s.Replicas == want && s.ReadyReplicas >= want
}

func degradedCondition(obs observed) metav1.Condition {
	cond := metav1.Condition{Type: pipelinev1.ConditionDegraded, Status: metav1.ConditionFalse,
		Reason: pipelinev1.ReasonAsExpected, Message: "Every child is as the Pipeline asks"}
	var msgs []string
	for _, err := range append(append([]error(nil), obs.conflicts...), obs.failures...) {
		msgs = append(msgs, err.Error())
	}
	switch {
	case obs.refused != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, obs.refusedReason, obs.refused.Error()
		return cond
	case len(obs.conflicts) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, pipelinev1.ReasonResourceExists
	case len(obs.failures) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, pipelinev1.ReasonReconcileFailed
	default:
		return cond
	}
	cond.Message = joinLimited(msgs)
	return cond
}

// joinLimited joins the first maxListed items and counts the rest.
func joinLimited(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:maxListed], "; "), len(items)-maxListed)
}
