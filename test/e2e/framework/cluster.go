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

package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	appv1 "github.com/ndsl/controller-manager/apis/app/v1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
)

// What manifests/default installs and the suite relies on.
const (
	// ManagerNamespace holds the manager's ServiceAccount, Deployment and Lease.
	ManagerNamespace = "ndsl-system"
	// ManagerServiceAccount is the ServiceAccount the manager runs as.
	ManagerServiceAccount = "controller-manager"
	// ManagerDeploymentName is the manifests' Deployment of the manager.
	ManagerDeploymentName = "controller-manager"
	// LeaseName is the manager's default --leader-elect-resource-name.
	LeaseName = "controller-manager"
)

// The suite's own objects for reading the managers' protected endpoints.
const (
	observerNamespace = "ndsl-e2e"
	observerName      = "observer"
	observerRole      = "ndsl-e2e:observer"
)

// FakeNodeNames are the kwok Nodes of a local cluster.
var FakeNodeNames = []string{"kwok-node-1", "kwok-node-2", "kwok-node-3"}

// pollInterval is how often the harness checks a condition.
const pollInterval = 200 * time.Millisecond

// Cluster is the cluster under test and admin clients for it.
type Cluster struct {
	// Config is an admin client config.
	Config *rest.Config
	// KubeconfigPath is the admin kubeconfig, for kubectl.
	KubeconfigPath string
	Kube           kubernetes.Interface
	// Typed is a clientset for the project's own APIs (App, Pipeline).
	Typed versioned.Interface
	// ControlPlane is the local control plane; nil on an existing cluster.
	ControlPlane *controlplane.ControlPlane
	// Nodes are schedulable Nodes for Pipeline steps to be pinned to.
	Nodes []string
	// FakeNodes: every one of Nodes is a kwok node, whose "pods" run any image
	// and mount any volume (a real node needs the NFS server of the samples).
	FakeNodes bool

	repoRoot string
	kubectl  string
}

// Setup brings up the cluster cfg describes: a local control plane with
// kube-controller-manager, kube-scheduler, kwok and three fake Nodes, with its
// state under dir (empty: a temporary directory); or the cluster of
// cfg.Kubeconfig.
func Setup(ctx context.Context, cfg Config, dir string) (*Cluster, error) {
	if !cfg.UseExistingCluster {
		return SetupLocal(ctx, controlplane.Options{ControllerManager: true, Scheduler: true, Kwok: true, Dir: dir})
	}
	if cfg.Kubeconfig == "" {
		return nil, fmt.Errorf("%s=true needs $KUBECONFIG", EnvUseExistingCluster)
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	c.KubeconfigPath = cfg.Kubeconfig
	if c.Config, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig); err != nil {
		return nil, fmt.Errorf("loading $KUBECONFIG: %w", err)
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	return c.connect(ctx)
}

// newCluster finds the repository and kubectl: the local one, else PATH's.
func newCluster() (*Cluster, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{repoRoot: root}
	if c.kubectl, err = controlplane.KubectlPath(""); err != nil {
		var lookErr error
		if c.kubectl, lookErr = exec.LookPath("kubectl"); lookErr != nil {
			return nil, fmt.Errorf("no kubectl: %w", err)
		}
	}
	return c, nil
}

// connect builds the clients for c.Config and finds the Nodes; on failure
// it stops what c started.
func (c *Cluster) connect(ctx context.Context) (*Cluster, error) {
	var err error
	if c.Kube, err = kubernetes.NewForConfig(c.Config); err == nil {
		c.Typed, err = versioned.NewForConfig(c.Config)
	}
	if err == nil {
		err = c.findNodes(ctx)
	}
	if err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// findNodes creates the fake Nodes of a local cluster, or picks the Ready,
// schedulable and untainted Nodes of an existing one.
func (c *Cluster) findNodes(ctx context.Context) error {
	if c.ControlPlane != nil {
		if err := c.ControlPlane.CreateFakeNodes(ctx, FakeNodeNames...); err != nil {
			return err
		}
		c.Nodes, c.FakeNodes = FakeNodeNames, true
		return nil
	}
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	c.FakeNodes = true
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || !controlplane.NodeReady(&n) || hasBlockingTaint(&n) {
			continue
		}
		c.Nodes = append(c.Nodes, n.Name)
		c.FakeNodes = c.FakeNodes && n.Annotations[controlplane.FakeNodeAnnotation] == "fake"
	}
	if len(c.Nodes) == 0 {
		return errors.New("the cluster has no Ready, schedulable, untainted node")
	}
	return nil
}

func hasBlockingTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// Node returns the i-th schedulable node, cycling when there are fewer.
func (c *Cluster) Node(i int) string {
	return c.Nodes[i%len(c.Nodes)]
}

// Local reports whether the cluster is the local control plane.
func (c *Cluster) Local() bool { return c.ControlPlane != nil }

// Stop stops the local control plane; an existing cluster is left as it is.
func (c *Cluster) Stop() error {
	if c.ControlPlane == nil {
		return nil
	}
	return c.ControlPlane.Stop()
}

// RepoRoot is the repository's root directory.
func (c *Cluster) RepoRoot() string { return c.repoRoot }

// Kubectl runs the suite's kubectl as the admin and returns its output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	cmd.Dir = c.repoRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// InstallManifests applies manifests/default and
// manifests/pipeline-namespace with kubectl, as make deploy does, and waits
// until the CRDs are established.
func (c *Cluster) InstallManifests(ctx context.Context) error {
	for _, dir := range []string{"manifests/default", "manifests/pipeline-namespace"} {
		if _, err := c.Kubectl(ctx, "apply", "-k", dir); err != nil {
			return err
		}
	}
	crds, err := controlplane.CRDs()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var names []string
	for _, crd := range crds {
		names = append(names, crd.Name)
	}
	if err := controlplane.WaitForCRDs(ctx, client, time.Minute, names...); err != nil {
		return err
	}
	return c.WaitAppAdmission(ctx, appv1.SchemeGroupVersion.Version)
}

// WaitAppAdmission waits until the API server admits an App through
// version. At v1beta1 that needs the conversion webhook (Apps are stored
// at v1), and the App defaulting policy refuses every one ("Resource kind
// ... not found") until it has read a new CRD's schema, up to 5 s after
// the CRD is served; InstallManifests, which runs before any manager, waits
// for v1 (the CRD served, the validating policies loaded), and the tests
// create v1beta1 Apps with retries (createApp), as they must anyway until a
// manager has written the caBundles.
func (c *Cluster) WaitAppAdmission(ctx context.Context, version string) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": appv1.SchemeGroupVersion.Group + "/" + version, "kind": "App",
		"metadata": map[string]any{"name": "admission-probe"},
		"spec":     map[string]any{"image": "nginx:1.27"},
	}}
	if version == "v1beta1" {
		// A Service, which the inverted enable_ingress needs.
		probe.Object["spec"].(map[string]any)["enable_service"] = true
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	apps := dyn.Resource(appv1.SchemeGroupVersion.WithResource("apps").GroupResource().WithVersion(version)).Namespace(metav1.NamespaceDefault)
	var last error
	err = wait.PollUntilContextTimeout(ctx, pollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := apps.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || ctx.Err() == nil {
			last = err // not the deadline's own error, which would hide why
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to admit Apps through %s: %w (last: %v)", version, err, last)
	}
	return nil
}

// ScaleInClusterManager scales the manifests' Deployment and waits until the
// Deployment controller has caught up and no pod of it is counted.
func (c *Cluster) ScaleInClusterManager(ctx context.Context, replicas int32) error {
	if _, err := c.Kubectl(ctx, "scale", "deployment/"+ManagerDeploymentName, "-n", ManagerNamespace,
		fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, pollInterval, time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ManagerNamespace).Get(ctx, ManagerDeploymentName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == replicas, nil
	})
}

// WaitInClusterManagerAvailable waits until the manifests' Deployment has all
// its replicas available (make e2e-kind deploys it before the suite runs).
func (c *Cluster) WaitInClusterManagerAvailable(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		d, err := c.Kube.AppsV1().Deployments(ManagerNamespace).Get(ctx, ManagerDeploymentName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		last = fmt.Sprintf("%d/%d available", d.Status.AvailableReplicas, want)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == want && want > 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for Deployment %s/%s to be available: %w (%s)", ManagerNamespace, ManagerDeploymentName, err, last)
	}
	return nil
}

// ServiceAccountToken returns a token of the existing ServiceAccount
// namespace/name from the TokenRequest API.
func (c *Cluster) ServiceAccountToken(ctx context.Context, namespace, name string, lifetime time.Duration) (string, error) {
	seconds := int64(lifetime / time.Second)
	tr, err := c.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// WriteServiceAccountKubeconfig writes to path a kubeconfig for the cluster
// that authenticates with a fresh token of ServiceAccount namespace/name.
func (c *Cluster) WriteServiceAccountKubeconfig(ctx context.Context, namespace, name, path string, lifetime time.Duration) error {
	token, err := c.ServiceAccountToken(ctx, namespace, name, lifetime)
	if err != nil {
		return err
	}
	cluster := &clientcmdapi.Cluster{
		Server:                   c.Config.Host,
		CertificateAuthorityData: c.Config.CAData,
		CertificateAuthority:     c.Config.CAFile,
		InsecureSkipTLSVerify:    c.Config.Insecure,
		TLSServerName:            c.Config.ServerName,
	}
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["e2e"] = cluster
	kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kubeconfig.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name}
	kubeconfig.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*kubeconfig, path)
}

// ObserverToken creates a ServiceAccount allowed to GET the managers'
// /debug/controllers and /metrics (served over HTTPS behind TokenReview and
// SubjectAccessReview) and returns a token of it.
func (c *Cluster) ObserverToken(ctx context.Context, lifetime time.Duration) (string, error) {
	objects := []func() error{
		func() error {
			_, err := c.Kube.CoreV1().Namespaces().Create(ctx,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: observerNamespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Kube.CoreV1().ServiceAccounts(observerNamespace).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: observerName}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: observerRole},
				Rules: []rbacv1.PolicyRule{{
					NonResourceURLs: []string{"/debug/controllers", "/metrics"}, Verbs: []string{"get"},
				}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: observerRole},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: observerRole},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: observerNamespace, Name: observerName}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating the observer's RBAC: %w", err)
		}
	}
	return c.ServiceAccountToken(ctx, observerNamespace, observerName, lifetime)
}

// RemoveObserver deletes what ObserverToken created.
func (c *Cluster) RemoveObserver(ctx context.Context) error {
	return errors.Join(
		ignoreNotFound(c.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, observerRole, metav1.DeleteOptions{})),
		ignoreNotFound(c.Kube.RbacV1().ClusterRoles().Delete(ctx, observerRole, metav1.DeleteOptions{})),
		ignoreNotFound(c.Kube.CoreV1().Namespaces().Delete(ctx, observerNamespace, metav1.DeleteOptions{})),
	)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// LeaseHolder returns the holder identity of the manager's Lease, "" when
// it is free or missing.
func (c *Cluster) LeaseHolder(ctx context.Context) (string, error) {
	lease, err := c.Kube.CoordinationV1().Leases(ManagerNamespace).Get(ctx, LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}
