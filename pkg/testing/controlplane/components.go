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

package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// startEtcd runs a single-member etcd on loopback ports.
func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	build := func() (component, error) {
		ports, err := FreePorts(2)
		if err != nil {
			return component{}, err
		}
		cp.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return component{name: etcdName, path: cp.bins.etcd, args: []string{
			"--name=controlplane",
			"--data-dir=" + filepath.Join(cp.Dir, etcdDataDir),
			"--listen-client-urls=" + cp.EtcdURL,
			"--advertise-client-urls=" + cp.EtcdURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=controlplane=" + peerURL,
			"--unsafe-no-fsync=" + strconv.FormatBool(!cp.opts.Fsync),
		}}, nil
	}
	ready := func(ctx context.Context) error {
		return httpOK(ctx, cp.probe, cp.EtcdURL+"/health", `"health":"true"`)
	}
	_, err := cp.startAndWait(ctx, etcdStartTimeout, build, ready)
	return err
}

// startAPIServer runs kube-apiserver on etcd, with static-token admin
// authentication and RBAC, and writes the admin kubeconfig.
func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	build := func() (component, error) {
		ports, err := FreePorts(1)
		if err != nil {
			return component{}, err
		}
		server := fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		cp.Config = tokenConfig(server, AdminToken)
		if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
			return component{}, err
		}
		return component{name: apiserverName, path: cp.bins.apiserver, args: append([]string{
			"--etcd-servers=" + cp.EtcdURL,
			"--cert-dir=" + filepath.Join(cp.Dir, apiserverCertDir),
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--bind-address=127.0.0.1",
			// Else it advertises a host interface's address, and fails on a
			// machine without one. A loopback address is invalid in Endpoints,
			// so nothing maintains the kubernetes Service's; nothing here uses them.
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			"--service-cluster-ip-range=10.96.0.0/12",
			"--service-account-issuer=https://localhost",
			"--service-account-key-file=" + cp.saPub,
			"--service-account-signing-key-file=" + cp.saKey,
			"--token-auth-file=" + cp.tokenFile,
			"--authorization-mode=RBAC",
			// Pods can be created without kube-controller-manager's token controller.
			"--disable-admission-plugins=ServiceAccount",
			"--allow-privileged=true",
			// Close open watches at shutdown instead of waiting up to the 60s
			// request timeout for them, so Stop and RestartAPIServer are quick.
			"--shutdown-watch-termination-grace-period=2s",
		}, append(cp.auditArgs(), cp.opts.APIServerArgs...)...)}, nil
	}
	c, err := cp.startAndWait(ctx, apiserverStartTimeout, build, cp.apiserverReady)
	if err != nil {
		return err
	}
	cp.apiserver = c
	cp.KubeconfigPath = filepath.Join(cp.Dir, adminKubeconfigFile)
	if err := WriteKubeconfig(cp.KubeconfigPath, cp.Config.Host, AdminToken); err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	return nil
}

// apiserverReady holds once /readyz passes and the default namespace exists.
func (cp *ControlPlane) apiserverReady(ctx context.Context) error {
	// /readyz is open to anonymous users (system:public-info-viewer).
	if err := httpOK(ctx, cp.probe, cp.Config.Host+"/readyz", "ok"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cp.probe.Timeout)
	defer cancel()
	_, err := cp.Client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
	return err
}

// startControllerManager runs kube-controller-manager with every controller.
// It is ready once its serviceaccount controller has created default/default.
func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	build := func() (component, error) {
		return component{name: controllerManagerName, path: cp.bins.controllerManager, args: append([]string{
			"--kubeconfig=" + cp.KubeconfigPath,
			"--leader-elect=false",
			"--controllers=*",
			"--service-account-private-key-file=" + cp.saKey,
			"--use-service-account-credentials=false",
			"--secure-port=0",
		}, cp.opts.ControllerManagerArgs...)}, nil
	}
	ready := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, cp.probe.Timeout)
		defer cancel()
		_, err := cp.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}
	_, err := cp.startAndWait(ctx, addonStartTimeout, build, ready)
	return err
}

// startScheduler runs kube-scheduler. It gets a serving port only so that its
// /readyz can be polled.
func (cp *ControlPlane) startScheduler(ctx context.Context) error {
	var readyz string
	build := func() (component, error) {
		ports, err := FreePorts(1)
		if err != nil {
			return component{}, err
		}
		readyz = fmt.Sprintf("https://127.0.0.1:%d/readyz", ports[0])
		return component{name: schedulerName, path: cp.bins.scheduler, args: []string{
			"--kubeconfig=" + cp.KubeconfigPath,
			"--authentication-kubeconfig=" + cp.KubeconfigPath,
			"--authorization-kubeconfig=" + cp.KubeconfigPath,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
		}}, nil
	}
	ready := func(ctx context.Context) error { return httpOK(ctx, cp.probe, readyz, "ok") }
	_, err := cp.startAndWait(ctx, addonStartTimeout, build, ready)
	return err
}

// startKwok runs kwok (default stages of v0.7.0), managing only Nodes annotated
// kwok.x-k8s.io/node=fake. It serves /readyz only so that it can be polled.
func (cp *ControlPlane) startKwok(ctx context.Context) error {
	var readyz string
	build := func() (component, error) {
		ports, err := FreePorts(1)
		if err != nil {
			return component{}, err
		}
		readyz = fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[0])
		return component{name: kwokName, path: cp.bins.kwok,
			args: []string{
				"--kubeconfig=" + cp.KubeconfigPath,
				"--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
				"--manage-nodes-with-label-selector=",
				"--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
				"--disregard-status-with-label-selector=",
				"--cidr=10.244.0.1/16",
				"--node-ip=10.244.0.1",
				"--node-lease-duration-seconds=40",
				"--server-address=127.0.0.1:" + strconv.Itoa(ports[0]),
			},
			// kwok always reads ~/.kwok/kwok.yaml if it exists; keep a user's
			// configuration out of the tests.
			env: []string{"HOME=" + filepath.Join(cp.Dir, kwokHomeDir)},
		}, nil
	}
	ready := func(ctx context.Context) error { return httpOK(ctx, cp.probe, readyz, "") }
	_, err := cp.startAndWait(ctx, addonStartTimeout, build, ready)
	return err
}
