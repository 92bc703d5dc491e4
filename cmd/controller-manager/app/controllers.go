package app

import (
	"context"

	"k8s.io/client-go/metadata"

	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/controllers/ingress"
)

// NewRegistry lists every controller the manager can run.
func NewRegistry() Registry {
	return Registry{
		{
			Name:    ingress.ControllerName,
			Aliases: []string{"ingress-manager"},
			New:     newIngressController,
		},
		{
			Name:              cleanup.ControllerName,
			DisabledByDefault: true,
			New:               newCleanupController,
		},
	}
}

func newIngressController(ctx context.Context, cc ControllerContext) (Controller, error) {
	client, err := cc.KubeClient(ingress.ControllerName)
	if err != nil {
		return nil, err
	}
	return ingress.NewController(ctx,
		cc.InformerFactory.Core().V1().Services(),
		cc.InformerFactory.Networking().V1().Ingresses(),
		client,
		cc.EventRecorder(ingress.ControllerName),
		cc.Options.Ingress,
	)
}

func newCleanupController(_ context.Context, cc ControllerContext) (Controller, error) {
	client, err := metadata.NewForConfig(cc.ClientConfig(cleanup.ControllerName))
	if err != nil {
		return nil, err
	}
	return cleanup.NewController(
		cc.MetadataInformerFactory,
		cc.InformerFactory.Core().V1().PersistentVolumes(),
		client,
		cc.EventRecorder(cleanup.ControllerName),
		cc.Options.Cleanup,
	), nil
}
