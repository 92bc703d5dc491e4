// Package writes counts the App controller's write requests against a real
// kube-apiserver WITHOUT kube-controller-manager. With the deployment
// controller running, a new Deployment's status changes a few times after it
// is created (observedGeneration, replicas...), and the App's status rightly
// follows each change with a write of its own; without it, every write
// counted here is one the App controller chose to make.
package writes

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}
