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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/shard"
)

// pipelineChild places a Pipeline's children in their Pipeline's shard.
var pipelineChild = shard.ControllerOwner(pipelinev1.Kind("Pipeline"))

// NewRegistry lists every controller the manager can run.
func NewRegistry() Registry {
	return Registry{
		{
			Name:    ingress.ControllerName,
			Aliases: []string{"ingress-manager"},
			Help:    "A Service annotated `ingress/http` gets an Ingress of the same name, owned by the Service.",
			New:     newIngressController,
			Role:    ingress.Role,
			Options: func(o *options.Options) controller.Options { return &o.Ingress },
			// A Service and its Ingress share a namespace.
			ShardKeys: map[string]shard.Key{"services": shard.Namespace, "ingresses": shard.Namespace},
		},
		{
			Name:    appcontroller.ControllerName,
			Help:    "An `App` (`ingress.example.com`, v1beta1 and v1) gets an owned Deployment, and optionally a Service and an Ingress, with status and conditions.",
			New:     newAppController,
			Role:    appcontroller.Role,
			Options: func(o *options.Options) controller.Options { return &o.App },
			// An App, its children and their pods share a namespace.
			ShardKeys: map[string]shard.Key{"apps": shard.Namespace, "deployments": shard.Namespace,
				"services": shard.Namespace, "ingresses": shard.Namespace, "pods": shard.Namespace},
		},
		{
			Name:    pipeline.ControllerName,
			Help:    "A cluster-scoped `Pipeline` (`distri-infer.ndsl.cn`) gets NFS model storage (PV + PVC) and a Deployment + Service per step, pinned to nodes.",
			New:     newPipelineController,
			Role:    pipeline.Role,
			Options: func(o *options.Options) controller.Options { return &o.Pipeline },
			// Pipelines are cluster-scoped: by uid, their children with them.
			// Namespaces and Nodes are read whole.
			ShardKeys: map[string]shard.Key{"pipelines": shard.UID,
				"deployments": pipelineChild, "services": pipelineChild,
				"persistentvolumeclaims": pipelineChild, "persistentvolumes": pipelineChild},
		},
		{
			Name:              cleanup.ControllerName,
			DisabledByDefault: true,
			Help: "A sweeper on a ticker: removes this manager's children, model-storage PVs included, " +
				"whose controlling owner is gone, once stale for `--cleanup-stale-period`.",
			New:     newCleanupController,
			Role:    cleanup.Role,
			Options: func(o *options.Options) controller.Options { return &o.Cleanup },
			Metrics: cleanup.Metrics,
		},
	}
}

func newIngressController(_ context.Context, cc ControllerContext) (Controller, error) {
	opts := cc.Options.Ingress
	cc.Complete(&opts.Common, ingress.ControllerName)
	client, err := cc.KubeClient(opts.Name)
	if err != nil {
		return nil, err
	}
	return ingress.NewController(
		ingressServices(cc).Core().V1().Services(),
		cc.ManagedInformerFactory().Networking().V1().Ingresses(),
		client,
		cc.EventRecorder(ingress.ControllerName),
		opts,
	)
}

// ingressServices is the factory of the Ingress controller's Services, the
// ones with an ingress/ annotation (ingress.NewServiceInformer), cut down
// by ingress.TransformService. Its input Services carry no label to select
// by: every Service is listed and watched, and the others are dropped as
// they arrive, so that the Services of a cluster the manager does not
// manage cost no memory.
func ingressServices(cc ControllerContext) informers.SharedInformerFactory {
	factory := cc.FilteredInformerFactory(ingressServicesFactoryName, informers.WithTransform(ingress.TransformService))
	// First come, first served: whoever asks this factory for Services
	// afterwards gets this informer.
	factory.InformerFor(&corev1.Service{}, ingress.NewServiceInformer)
	return factory
}

const ingressServicesFactoryName = "ingress-services"

func newCleanupController(_ context.Context, cc ControllerContext) (Controller, error) {
	opts := cc.Options.Cleanup
	cc.Complete(&opts.Common, cleanup.ControllerName)
	client, err := metadata.NewForConfig(cc.ClientConfig(cleanup.ControllerName))
	if err != nil {
		return nil, err
	}
	// Its owner Services are the Ingress controller's, the only Services
	// that own what this manager creates.
	return cleanup.NewController(
		cc.ManagedInformerFactory(),
		ingressServices(cc),
		cc.CRDInformerFactory,
		client,
		cc.EventRecorder(cleanup.ControllerName),
		opts,
	)
}

func newPipelineController(_ context.Context, cc ControllerContext) (Controller, error) {
	opts := cc.Options.Pipeline
	cc.Complete(&opts.Common, pipeline.ControllerName)
	opts.ManagerNamespace = leaseNamespace(cc.Options.Webhook.Namespace)
	kubeClient, err := cc.KubeClient(opts.Name)
	if err != nil {
		return nil, err
	}
	crdClient, err := cc.CRDClient(opts.Name)
	if err != nil {
		return nil, err
	}
	managed := cc.ManagedInformerFactory()
	c, err := pipeline.NewController(
		cc.CRDInformerFactory.Pipeline().V1().Pipelines(),
		managed.Apps().V1().Deployments(),
		managed.Core().V1().Services(),
		managed.Core().V1().PersistentVolumeClaims(),
		managed.Core().V1().PersistentVolumes(),
		cc.MetadataInformerFactory.ForResource(corev1.SchemeGroupVersion.WithResource("namespaces")),
		cc.MetadataInformerFactory.ForResource(corev1.SchemeGroupVersion.WithResource("nodes")),
		kubeClient,
		crdClient,
		cc.EventRecorder(pipeline.ControllerName),
		opts,
	)
	if err != nil {
		return nil, err
	}
	crds, pipelines, err := cc.StorageMigrationClients(opts.Name)
	if err != nil {
		return nil, err
	}
	if crds != nil { // exactly one unit migrates the stored Pipelines, under its Lease
		c.MigrateStorage(crds, pipelines)
	}
	return c, nil
}

func newAppController(_ context.Context, cc ControllerContext) (Controller, error) {
	opts := cc.Options.App
	cc.Complete(&opts.Common, appcontroller.ControllerName)
	kubeClient, err := cc.KubeClient(opts.Name)
	if err != nil {
		return nil, err
	}
	appClient, err := cc.CRDClient(opts.Name)
	if err != nil {
		return nil, err
	}
	// Only the pods of the Apps' Deployments, cut down to why they are
	// unavailable: the shared factory's pod informer would hold every pod
	// of the cluster, whole.
	pods := cc.FilteredInformerFactory(appcontroller.ControllerName+"-pods",
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = appcontroller.PodSelector().String() }),
		informers.WithTransform(appcontroller.TransformPod),
	)
	// Its children, Services included, from the selected factory: its
	// Services carry no ingress/ annotation, so the Ingress controller's
	// informer does not hold them.
	managed := cc.ManagedInformerFactory()
	c, err := appcontroller.NewController(
		cc.CRDInformerFactory.App().V1().Apps(),
		managed.Apps().V1().Deployments(),
		managed.Core().V1().Services(),
		managed.Networking().V1().Ingresses(),
		pods.Core().V1().Pods(),
		kubeClient,
		appClient,
		cc.EventRecorder(appcontroller.ControllerName),
		opts,
	)
	if err != nil {
		return nil, err
	}
	crds, apps, err := cc.StorageMigrationClients(opts.Name)
	if err != nil {
		return nil, err
	}
	if crds != nil { // exactly one unit migrates the stored Apps, under its Lease
		c.MigrateStorage(crds, apps)
	}
	return c, nil
}
