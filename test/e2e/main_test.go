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

// Package e2e is the end-to-end suite: the manager binary, installed with
// manifests/default and running as the manifests' ServiceAccount, against a
// whole cluster (kube-apiserver, kube-controller-manager, kube-scheduler and
// kwok fake nodes by default). See test/e2e/framework for the knobs.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/pkg/testing/tcpbalancer"
	"github.com/ndsl/controller-manager/test/e2e/framework"
)

var (
	// suite is the configuration read from the environment.
	suite framework.Config
	// cluster is the cluster under test.
	cluster *framework.Cluster
	// launcher runs manager processes; nil when the manager under test is
	// the in-cluster Deployment.
	launcher *framework.Launcher
	// logDir holds the managers' logs.
	logDir string
)

// setupTimeout bounds starting the cluster and installing the manifests.
const setupTimeout = 5 * time.Minute

// tokenLifetime is how long the managers' and observer's tokens live; the
// whole suite takes a few minutes.
const tokenLifetime = time.Hour

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	defer klog.Flush()
	logger := klog.Background()
	suite = framework.ConfigFromEnv()
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), setupTimeout)
	defer cancel()
	begin := time.Now()

	dir := suite.ArtifactsDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "e2e-")
		if err != nil {
			logger.Error(err, "Creating the artifacts directory")
			return 1
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	var err error
	if dir, err = filepath.Abs(dir); err == nil {
		logDir = filepath.Join(dir, "managers")
		err = os.MkdirAll(logDir, 0o755)
	}
	if err != nil {
		logger.Error(err, "Creating the artifacts directory")
		return 1
	}
	if suite.InClusterManager() && !suite.UseExistingCluster {
		logger.Error(nil, "The in-cluster manager needs an existing cluster", framework.EnvManager, suite.Manager,
			framework.EnvUseExistingCluster, os.Getenv(framework.EnvUseExistingCluster))
		return 1
	}

	var binary string
	if !suite.InClusterManager() {
		if binary, err = managerBinary(); err != nil {
			logger.Error(err, "Setting up the e2e suite")
			return 1
		}
	}
	cpDir := ""
	if suite.ArtifactsDir != "" {
		cpDir = filepath.Join(dir, "controlplane")
	}
	cluster, err = framework.Setup(ctx, suite, cpDir)
	if err != nil {
		logger.Error(err, "Setting up the e2e suite")
		if cluster != nil {
			_ = cluster.Stop()
		}
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			logger.Error(err, "Stopping the control plane")
		}
	}()

	if suite.InClusterManager() {
		err = cluster.WaitInClusterManagerAvailable(ctx, 3*time.Minute)
	} else {
		launcher, err = setupProcesses(ctx, binary, dir)
	}
	if err != nil {
		logger.Error(err, "Setting up the e2e suite")
		return 1
	}
	if launcher != nil {
		// Every test stops its own processes in its cleanup.
		defer launcher.Close()
		if !cluster.Local() {
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := cluster.RemoveObserver(ctx); err != nil {
					logger.Error(err, "Removing the observer's RBAC")
				}
			}()
		}
	}
	logger.Info("E2E suite ready", "duration", time.Since(begin).Round(time.Millisecond),
		"existingCluster", suite.UseExistingCluster, "manager", suite.Manager, "nodes", cluster.Nodes, "logs", logDir)
	return m.Run()
}

// setupProcesses installs the manifests, scales the in-cluster manager to
// zero (on kwok its pods would not run anything) and prepares a launcher
// whose processes authenticate as the manifests' ServiceAccount.
func setupProcesses(ctx context.Context, binary, dir string) (*framework.Launcher, error) {
	if err := cluster.InstallManifests(ctx); err != nil {
		return nil, err
	}
	if err := cluster.ScaleInClusterManager(ctx, 0); err != nil {
		return nil, fmt.Errorf("scaling the in-cluster manager to zero: %w", err)
	}
	kubeconfig := filepath.Join(dir, "manager.kubeconfig")
	if err := cluster.WriteServiceAccountKubeconfig(ctx, framework.ManagerNamespace, framework.ManagerServiceAccount,
		kubeconfig, tokenLifetime); err != nil {
		return nil, err
	}
	observer, err := cluster.ObserverToken(ctx, tokenLifetime)
	if err != nil {
		return nil, err
	}
	l := framework.NewLauncher(binary, kubeconfig, logDir)
	l.Args, l.Token = framework.SuiteArgs, observer
	if !cluster.Local() {
		// That API server cannot call processes on this machine: the
		// processes run controllers only, and the webhooks are removed.
		return l, cluster.RemoveWebhookConfigurations(ctx)
	}
	// The local API server calls the processes' webhooks through a balancer
	// on 127.0.0.1, standing in for the webhook Service.
	balancer, err := tcpbalancer.New()
	if err != nil {
		return nil, err
	}
	l.Webhooks = balancer
	return l, cluster.PointWebhooksAt(ctx, "https://"+balancer.Addr())
}

// managerBinary is $E2E_MANAGER_BINARY made absolute. The suite never
// compiles the manager: a cold build can outlast any setup deadline, so the
// Makefile builds it once before the tests.
func managerBinary() (string, error) {
	path := suite.ManagerBinary
	if path == "" {
		return "", fmt.Errorf("%s is not set: build the manager first and pass it in, "+
			"e.g. `make e2e` (or `make build && %s=$PWD/_output/controller-manager go test ./test/e2e`)",
			framework.EnvManagerBinary, framework.EnvManagerBinary)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", framework.EnvManagerBinary, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("%s: %w (run make build)", framework.EnvManagerBinary, err)
	} else if fi.IsDir() {
		return "", fmt.Errorf("%s: %s is a directory, not the manager binary", framework.EnvManagerBinary, abs)
	}
	return abs, nil
}
