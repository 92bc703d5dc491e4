package app

import (
	"context"

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
