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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ndsl/controller-manager/pkg/controller"
)

// PodSecurityLevel is the PodSecurity standard a step's pods are built to pass.
type PodSecurityLevel string

const (
	// PodSecurityBaseline keeps the image's user, root included (the
	// samples' nginx), and hardens what needs no help from the image.
	PodSecurityBaseline PodSecurityLevel = "baseline"
	// PodSecurityRestricted adds runAsNonRoot and drops every capability:
	// the image must name a non-root user (a numeric USER), or the kubelet
	// refuses to start the container.
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// PodSecurityEnforceLabel is PodSecurity admission's namespace label. A
// namespace enforcing restricted gets restricted step pods whatever
// --pipeline-pod-security says: baseline ones would be refused there.
const PodSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"

// validatePodSecurity checks the --pipeline-pod-security value.
func validatePodSecurity(l PodSecurityLevel) error {
	switch l {
	case "", PodSecurityBaseline, PodSecurityRestricted:
		return nil
	}
	return fmt.Errorf("--pipeline-pod-security must be %q or %q, got %q", PodSecurityBaseline, PodSecurityRestricted, l)
}

// podSecurityLevel is the level of the step pods in namespace: restricted
// when the flag or the namespace's enforce label asks for it. A namespace
// not yet in the cache (the controller is about to create it, unlabelled)
// gets the flag's level.
func (c *Controller) podSecurityLevel(namespace string) PodSecurityLevel {
	if c.opts.PodSecurity == PodSecurityRestricted {
		return PodSecurityRestricted
	}
	if ns, err := c.namespace(namespace); err == nil && enforcesRestricted(ns) {
		return PodSecurityRestricted
	}
	return PodSecurityBaseline
}

func enforcesRestricted(ns metav1.Object) bool {
	return ns.GetLabels()[PodSecurityEnforceLabel] == string(PodSecurityRestricted)
}

// podSecurityContext is the step pod's security context. Seccomp
// RuntimeDefault passes restricted whatever the image; runAsNonRoot only at
// restricted, and no runAsUser at any level: overriding the image's own
// user would break images whose files belong to it.
func podSecurityContext(level PodSecurityLevel) *corev1ac.PodSecurityContextApplyConfiguration {
	sc := corev1ac.PodSecurityContext().
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
	if level == PodSecurityRestricted {
		sc.WithRunAsNonRoot(true)
	}
	return sc
}

// containerSecurityContext is the model server's security context. No
// privilege escalation at every level: a root image still runs and may
// still switch users (nginx's workers). Dropping every capability only at
// restricted: a root image like nginx needs CHOWN, SETUID and SETGID.
func containerSecurityContext(level PodSecurityLevel) *corev1ac.SecurityContextApplyConfiguration {
	sc := corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false)
	if level == PodSecurityRestricted {
		sc.WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
	}
	return sc
}

// namespaceEnforceHandler enqueues the Pipelines targeting a namespace
// whose enforce label turns restricted or stops being so, and those of a
// namespace created restricted; other namespace changes are not theirs.
// The initial list is left out: every Pipeline is synced at start anyway.
func namespaceEnforceHandler(q controller.Queue, pipelinesIn func(ns metav1.Object) []controller.Key) cache.ResourceEventHandlerDetailedFuncs {
	enqueue := func(ns metav1.Object) {
		for _, key := range pipelinesIn(ns) {
			q.Add(key)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if ns, ok := obj.(metav1.Object); ok && !isInInitialList && enforcesRestricted(ns) {
				enqueue(ns)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(metav1.Object)
			n, okNew := newObj.(metav1.Object)
			if okOld && okNew && enforcesRestricted(o) != enforcesRestricted(n) {
				enqueue(n)
			}
		},
	}
}
