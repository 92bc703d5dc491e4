// Package webhook tests the manager's webhook server and certificate
// management with the real kube-apiserver calling it: the webhook
// configurations and a test CRD's conversion name a URL on 127.0.0.1 (a
// balancer over the replicas, standing in for the Service), and the manager
// issues the certificates and keeps the caBundles.
package webhook

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
