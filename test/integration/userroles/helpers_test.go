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

package userroles

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

const (
	appGroup      = "ingress.example.com"
	pipelineGroup = "distri-infer.ndsl.cn"
	// timeout bounds each wait: the aggregation controller and the RBAC
	// authorizer's caches react within a second on a quiet machine.
	timeout = 30 * time.Second
)

var (
	installOnce sync.Once
	installErr  error
)

// install applies the CRDs and manifests/rbac as a user would (kubectl
// apply -k), once per test binary, and waits until the built-in roles
// carry the aggregated rules.
func install(t *testing.T) {
	t.Helper()
	installOnce.Do(func() {
		ctx := context.Background()
		if installErr = framework.InstallCRDs(ctx, cp.Config); installErr != nil {
			return
		}
		root, err := controlplane.RepoRoot()
		if err != nil {
			installErr = err
			return
		}
		// The manager's namespace, which manifests/default creates and
		// manifests/rbac's ServiceAccount names.
		if _, installErr = kubectl("create", "namespace", "ndsl-system"); installErr != nil && !strings.Contains(installErr.Error(), "AlreadyExists") {
			return
		}
		if _, installErr = kubectl("apply", "-k", filepath.Join(root, "manifests", "rbac")); installErr != nil {
			return
		}
		installErr = waitAggregated(ctx)
	})
	if installErr != nil {
		t.Fatalf("installing the CRDs and manifests/rbac: %v", installErr)
	}
}

// kubectl runs the control plane's kubectl with the admin kubeconfig.
func kubectl(args ...string) (string, error) {
	path, err := controlplane.KubectlPath("")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(path, append([]string{"--kubeconfig=" + cp.KubeconfigPath}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// waitAggregated waits until view, edit and admin, as stored, grant what
// the shipped roles aggregate into them, and otherwise names what one lacks.
func waitAggregated(ctx context.Context) error {
	want := []struct {
		role   string
		grants [][3]string // group, resource, verb
	}{
		{"edit", [][3]string{{appGroup, "apps", "create"}, {appGroup, "apps/scale", "patch"}}},
		{"admin", [][3]string{{appGroup, "apps", "create"}, {appGroup, "apps/scale", "patch"}}},
		{"view", [][3]string{{appGroup, "apps", "list"}, {appGroup, "apps/scale", "get"}, {pipelineGroup, "pipelines", "list"}}},
	}
	var missing error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		// Each try gets its own deadline, so that what is missing is the
		// server's answer, not the poll's expiry.
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for _, w := range want {
			role, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, w.role, metav1.GetOptions{})
			if err != nil {
				missing = err
				return false, nil
			}
			for _, g := range w.grants {
				if !grantsVerb(role.Rules, g[0], g[1], g[2]) {
					missing = fmt.Errorf("ClusterRole %s does not grant %s on %s.%s", w.role, g[2], g[1], g[0])
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("after %s of aggregation: %w (%w)", timeout, missing, err)
	}
	return nil
}

// grantsVerb tells whether rules allow verb on resource in group.
func grantsVerb(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

// userClient is a client for Apps and Pipelines that acts as user, by
// impersonation: the user belongs to system:authenticated only.
func userClient(t *testing.T, user string) versioned.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindInNamespace binds user to the ClusterRole role in namespace ns only.
func bindInNamespace(t *testing.T, ns, role, user string) {
	t.Helper()
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := cp.Client.RbacV1().RoleBindings(ns).Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindClusterWide binds user to the ClusterRole role in every namespace
// and for cluster-scoped kinds, until the test ends.
func bindClusterWide(t *testing.T, role, user string) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + strings.ReplaceAll(role, ":", "-")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	bindings := cp.Client.RbacV1().ClusterRoleBindings()
	if _, err := bindings.Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), binding.Name, metav1.DeleteOptions{}) })
}

// allowedSoon retries a request a new binding allows until the API
// server's RBAC caches have seen the binding; Forbidden past timeout is
// a failure, and so is any other error.
func allowedSoon(t *testing.T, what string, request func(ctx context.Context) error) {
	t.Helper()
	var last error
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		// Each try gets its own deadline, so that the last one reports the
		// server's answer, not the poll's expiry.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		last = request(ctx)
		if last != nil && !apierrors.IsForbidden(last) {
			return false, last
		}
		return last == nil, nil
	})
	if last != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// forbidden fails the test unless err is Forbidden.
func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}
