// Package userroles checks the roles shipped for people (manifests/rbac/
// user-roles.yaml) against a real kube-apiserver with kube-controller-manager,
// whose clusterrole-aggregation controller fills the built-in view, edit and
// admin roles from them: people are bound to the built-in roles, as they are
// for Deployments, and work with Apps; Pipelines need a deliberate grant.
package userroles

import (
	"os"
	"testing"

	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{ControllerManager: true}, func(c *controlplane.ControlPlane) { cp = c }))
}
