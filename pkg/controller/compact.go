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

package controller

import (
	"maps"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
)

// Compact is the informers' transform: TrimManagedFields, then one copy of
// each string that repeats across cached objects (namespaces, label and
// annotation keys and values, owner kinds, field managers, a Deployment's
// pod template), where the decoder gives every object its own. A
// Deployment's template labels, when equal to its labels (as this manager
// writes them), share their map. Every value stays equal: only the memory
// behind it is shared, which is safe because cached objects are read-only.
func Compact(obj any) (any, error) {
	obj, err := TrimManagedFields(obj)
	if err != nil {
		return obj, err
	}
	target := obj
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		target = tombstone.Obj
	}
	accessor, err := meta.Accessor(target)
	if err != nil {
		return obj, nil
	}
	compactMeta(accessor)
	switch o := target.(type) {
	case *appsv1.Deployment:
		compactDeployment(o)
	case *corev1.Service:
		o.Spec.Selector = internedMap(o.Spec.Selector)
		for i := range o.Spec.Ports {
			o.Spec.Ports[i].Name = intern(o.Spec.Ports[i].Name)
		}
	case *corev1.Pod:
		for _, statuses := range [][]corev1.ContainerStatus{o.Status.InitContainerStatuses, o.Status.ContainerStatuses} {
			for i := range statuses {
				statuses[i].Name, statuses[i].Image = intern(statuses[i].Name), intern(statuses[i].Image)
			}
		}
	}
	return obj, nil
}

// intern returns the one shared copy of s.
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// internedMap is m with shared keys and values, m itself when empty.
func internedMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

func compactMeta(m metav1.Object) {
	m.SetNamespace(intern(m.GetNamespace()))
	m.SetLabels(internedMap(m.GetLabels()))
	m.SetAnnotations(internedMap(m.GetAnnotations()))
	refs := m.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind, refs[i].Name = intern(refs[i].APIVersion), intern(refs[i].Kind), intern(refs[i].Name)
	}
	fields := m.GetManagedFields()
	for i := range fields {
		fields[i].Manager, fields[i].APIVersion, fields[i].FieldsType = intern(fields[i].Manager), intern(fields[i].APIVersion), intern(fields[i].FieldsType)
	}
}

func compactDeployment(d *appsv1.Deployment) {
	if d.Spec.Selector != nil {
		d.Spec.Selector.MatchLabels = internedMap(d.Spec.Selector.MatchLabels)
	}
	template := &d.Spec.Template
	if maps.Equal(template.Labels, d.Labels) {
		template.Labels = d.Labels
	} else {
		template.Labels = internedMap(template.Labels)
	}
	template.Annotations = internedMap(template.Annotations)
	spec := &template.Spec
	spec.RestartPolicy, spec.DNSPolicy, spec.SchedulerName = intern(spec.RestartPolicy), intern(spec.DNSPolicy), intern(spec.SchedulerName)
	for _, containers := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range containers {
			c := &containers[i]
			c.Name, c.Image, c.ImagePullPolicy = intern(c.Name), intern(c.Image), intern(c.ImagePullPolicy)
			c.TerminationMessagePath, c.TerminationMessagePolicy = intern(c.TerminationMessagePath), intern(c.TerminationMessagePolicy)
			for j := range c.Ports {
				c.Ports[j].Name, c.Ports[j].Protocol = intern(c.Ports[j].Name), intern(c.Ports[j].Protocol)
			}
		}
	}
	d.Spec.Strategy.Type = intern(d.Spec.Strategy.Type)
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		for _, v := range []*intstr.IntOrString{ru.MaxSurge, ru.MaxUnavailable} {
			if v != nil {
				v.StrVal = intern(v.StrVal)
			}
		}
	}
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		c.Type, c.Status, c.Reason, c.Message = intern(c.Type), intern(c.Status), intern(c.Reason), intern(c.Message)
	}
}
