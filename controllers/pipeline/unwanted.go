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

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// deleteUnwanted deletes the children the Pipeline controls but no longer
// wants, unless that can reduce what it serves: while a Deployment no longer
// wanted still has available replicas, everything unwanted stays until every
// step's new Deployment has its replicas available. The old Services stay
// with the old Deployments: the old steps' DSTs name them.
func (c *Controller) deleteUnwanted(ctx context.Context, p *pipelinev1.Pipeline, obs observed, want children) error {
	volumes, err := unwanted(c.volumes, p, []*corev1ac.PersistentVolumeApplyConfiguration{want.volume})
	if err != nil {
		return err
	}
	claims, err := unwanted(c.claims, p, []*corev1ac.PersistentVolumeClaimApplyConfiguration{want.claim})
	if err != nil {
		return err
	}
	deployments, err := unwanted(c.deployments, p, want.deployments)
	if err != nil {
		return err
	}
	services, err := unwanted(c.services, p, want.services)
	if err != nil {
		return err
	}
	if len(volumes)+len(claims)+len(deployments)+len(services) == 0 {
		return nil
	}
	if !mayReplace(obs.steps, deployments, len(volumes)+len(claims) > 0) {
		klog.FromContext(ctx).V(2).Info("Keeping the children no longer wanted until the new steps are available",
			"deployments", len(deployments), "services", len(services))
		return nil
	}
	return errors.Join(
		deleteAll(ctx, c, p, c.volumes, volumes),
		deleteAll(ctx, c, p, c.claims, claims),
		deleteAll(ctx, c, p, c.deployments, deployments),
		deleteAll(ctx, c, p, c.services, services),
	)
}

// mayReplace reports whether deleting the old Deployments, and oldStorage
// (whether there is an old volume and claim), cannot reduce availability:
// every step's Deployment has all its replicas available, or the old ones
// serve nothing anyway (no available replica). Old storage waits for every
// step: a step rolls onto a new claim in place, and its old pods mount the
// old claim until the rollout is done.
func mayReplace(steps []observedStep, old []*appsv1.Deployment, oldStorage bool) bool {
	newAvailable := true
	for _, s := range steps {
		if s.deployment == nil || !deploymentAvailable(s.deployment) {
			newAvailable = false
			break
		}
	}
	if newAvailable || oldStorage {
		return newAvailable
	}
	for _, d := range old {
		if d.Status.AvailableReplicas > 0 {
			return false
		}
	}
	return true
}

// deploymentAvailable reports whether a Deployment has rolled out its
// current spec and has every replica it asks for available, as its cached
// status says.
func deploymentAvailable(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	return d.DeletionTimestamp == nil && s.ObservedGeneration >= d.Generation &&
		s.UpdatedReplicas >= want && s.AvailableReplicas >= want
}

// unwanted lists the cached children of one kind that the Pipeline
// controls but are not in want, from the index of children by controller.
// Of those, only the ones with the Pipeline's label count, which every
// version of the controller has written: one whose label was taken away is
// left alone, as it always was.
func unwanted[T controller.Object, AC controller.ApplyConfiguration[AC]](children *controller.Children[T, AC], p *pipelinev1.Pipeline, want []AC) ([]T, error) {
	objs, err := children.ListControlledBy(p)
	if err != nil {
		return nil, err
	}
	wanted := map[types.NamespacedName]bool{}
	for _, w := range want {
		wanted[types.NamespacedName{Namespace: ptr.Deref(w.GetNamespace(), ""), Name: ptr.Deref(w.GetName(), "")}] = true
	}
	label := pipelineLabelValue(p.Name)
	var out []T
	for _, obj := range objs {
		if !wanted[types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}] && obj.GetLabels()[LabelPipeline] == label {
			out = append(out, obj)
		}
	}
	return out, nil
}

// deleteAll deletes objs, children of one kind, each with a UID
// precondition.
func deleteAll[T controller.Object, AC controller.ApplyConfiguration[AC]](ctx context.Context, c *Controller, p *pipelinev1.Pipeline,
	children *controller.Children[T, AC], objs []T) error {
	var errs []error
	for _, obj := range objs {
		deleted, err := children.Delete(ctx, p, obj)
		if err != nil {
			errs = append(errs, c.writeFailed(p, "delete", children.Kind, obj.GetNamespace(), obj.GetName(), err))
			continue
		}
		if deleted {
			c.consistency.Deleted(p, children.Resource, obj)
		}
	}
	return errors.Join(errs...)
}
