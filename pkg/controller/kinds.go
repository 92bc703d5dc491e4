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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
)

// The child adapters of the kinds this manager's controllers create.

// Deployments is the adapter for Deployments.
type Deployments = Children[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration]

// Services is the adapter for Services.
type Services = Children[*corev1.Service, *corev1ac.ServiceApplyConfiguration]

// Ingresses is the adapter for Ingresses.
type Ingresses = Children[*networkingv1.Ingress, *networkingv1ac.IngressApplyConfiguration]

// PersistentVolumes is the adapter for PersistentVolumes.
type PersistentVolumes = Children[*corev1.PersistentVolume, *corev1ac.PersistentVolumeApplyConfiguration]

// PersistentVolumeClaims is the adapter for PersistentVolumeClaims.
type PersistentVolumeClaims = Children[*corev1.PersistentVolumeClaim, *corev1ac.PersistentVolumeClaimApplyConfiguration]

// NewDeployments returns the Deployment adapter over informer and client.
func NewDeployments(informer appsinformers.DeploymentInformer, client kubernetes.Interface) *Deployments {
	return NewChildren("Deployment", appsv1.Resource("deployments"), informer.Informer(),
		func(namespace string) ChildClient[*appsv1.Deployment, *appsv1ac.DeploymentApplyConfiguration] {
			return client.AppsV1().Deployments(namespace)
		})
}

// NewServices returns the Service adapter over informer and client.
func NewServices(informer coreinformers.ServiceInformer, client kubernetes.Interface) *Services {
	return NewChildren("Service", corev1.Resource("services"), informer.Informer(),
		func(namespace string) ChildClient[*corev1.Service, *corev1ac.ServiceApplyConfiguration] {
			return client.CoreV1().Services(namespace)
		})
}

// NewIngresses returns the Ingress adapter over informer and client.
func NewIngresses(informer networkinginformers.IngressInformer, client kubernetes.Interface) *Ingresses {
	return NewChildren("Ingress", networkingv1.Resource("ingresses"), informer.Informer(),
		func(namespace string) ChildClient[*networkingv1.Ingress, *networkingv1ac.IngressApplyConfiguration] {
			return client.NetworkingV1().Ingresses(namespace)
		})
}

// NewPersistentVolumes returns the PersistentVolume adapter over informer
// and client.
func NewPersistentVolumes(informer coreinformers.PersistentVolumeInformer, client kubernetes.Interface) *PersistentVolumes {
	return NewChildren("PersistentVolume", corev1.Resource("persistentvolumes"), informer.Informer(),
		func(string) ChildClient[*corev1.PersistentVolume, *corev1ac.PersistentVolumeApplyConfiguration] {
			return client.CoreV1().PersistentVolumes()
		})
}

// NewPersistentVolumeClaims returns the PersistentVolumeClaim adapter over
// informer and client.
func NewPersistentVolumeClaims(informer coreinformers.PersistentVolumeClaimInformer, client kubernetes.Interface) *PersistentVolumeClaims {
	return NewChildren("PersistentVolumeClaim", corev1.Resource("persistentvolumeclaims"), informer.Informer(),
		func(namespace string) ChildClient[*corev1.PersistentVolumeClaim, *corev1ac.PersistentVolumeClaimApplyConfiguration] {
			return client.CoreV1().PersistentVolumeClaims(namespace)
		})
}
