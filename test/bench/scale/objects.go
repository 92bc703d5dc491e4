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

package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
)

// ingressDomain gives the Apps' Ingresses a host, as in production; the
// managers run with --app-ingress-domain set to it.
const ingressDomain = "apps.example.com"

// benchLabel marks the cluster-scoped objects of this benchmark (Pipelines)
// with the phase that created them, so that each phase finds its own.
const benchLabel = "bench.ndsl.cn/phase"

// newApp is the i-th App of a phase: a Deployment with replicas pods, a
// Service and an Ingress.
func newApp(i int, replicas int32) *appv1.App {
	return &appv1.App{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i)},
		Spec: appv1.AppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To(replicas),
			Exposure: appv1.ExposureIngress,
			Port:     80,
		},
	}
}

// newPipeline is the i-th Pipeline of a phase: steps steps, one replica
// each, pinned round-robin to nodes, children in namespace.
func newPipeline(phase string, i, steps int, namespace string, nodes []string) *pipelinev1.Pipeline {
	p := &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("%s-pl-%04d", phase, i),
			Labels: map[string]string{benchLabel: phase},
		},
		Spec: pipelinev1.PipelineSpec{
			ListenPort: 9080,
			Namespace:  namespace,
			ModelStorage: pipelinev1.ModelStorage{
				NFS: &pipelinev1.NFSStorage{Server: "192.0.2.10", Path: "/exports/models"},
			},
		},
	}
	for s := range steps {
		p.Spec.Steps = append(p.Spec.Steps, pipelinev1.PipelineStep{
			Model:     fmt.Sprintf("model-%d", s+1),
			Image:     "nginx:1.27",
			NodeNames: []string{nodes[(i*steps+s)%len(nodes)]},
			Replicas:  ptr.To[int32](1),
			Args:      map[string]string{"listenPort": "9080"},
		})
	}
	return p
}

// pipelineChildren are the PersistentVolume, claim, and per step a
// Deployment and Service the Pipeline controller creates for a Pipeline.
type pipelineChildren struct {
	volume      *corev1.PersistentVolume
	claim       *corev1.PersistentVolumeClaim
	deployments []*appsv1.Deployment
	services    []*corev1.Service
}

// rawPipelineChildren is what the Pipeline controller creates for p (which
// was created, so it has a UID): the raw measurement writes the same objects.
func rawPipelineChildren(p *pipelinev1.Pipeline) pipelineChildren {
	var c pipelineChildren
	c.volume, c.claim, c.deployments, c.services = pipeline.DesiredChildren(p, p.Spec.Namespace)
	return c
}

// newIngressService is the i-th Service of the Ingress scenario: headless
// (no ClusterIP to allocate, see docs/benchmarks.md), without a selector
// (no EndpointSlices for kube-controller-manager to write), asking for an
// Ingress.
func newIngressService(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("svc-%05d", i),
			// A host of its own: the Ingress controller refuses a hostless
			// Ingress, and the manager runs without a default domain.
			Annotations: map[string]string{ingress.AnnotationEnabled: "true", ingress.AnnotationHost: fmt.Sprintf("svc-%05d.bench.example", i)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// rawIngress is what the Ingress controller creates for svc without a
// default domain or class (svc names its host).
func rawIngress(svc *corev1.Service) (*networkingv1.Ingress, error) {
	return ingress.DesiredIngress(svc, ingress.Options{})
}
