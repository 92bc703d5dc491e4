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

// Package coexistence runs the manager in a shared cluster: beside Helm
// releases, Argo CD, HPAs, sidecar injectors, kubectl and other teams'
// Pipelines, against the real kube-apiserver, kube-controller-manager
// (garbage collector, deployment, replicaset, endpointslice and HPA
// controllers), kube-scheduler and kwok. It tests behaviour (who selects,
// owns and writes what), not the names of labels, so that it holds for any
// labelling that keeps the manager to its own objects.
package coexistence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane/podmetrics"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// Nodes kwok fakes: one for Apps and other tools' pods, and the locations
// of the Pipeline steps.
const (
	appNode  = "coexist-node"
	gpuNodeA = "coexist-gpu-a"
	gpuNodeB = "coexist-gpu-b"
)

// metricsNamespace holds the ExternalName Service of the metrics stand-in.
const metricsNamespace = "coexist-metrics"

var (
	cp *controlplane.ControlPlane
	// metrics serves metrics.k8s.io to the HPA controller.
	metrics *podmetrics.Server
	// manager is the one manager of the suite (App and Pipeline
	// controllers); its Writes count what it writes, by path.
	manager *framework.Manager
	// setupErr is why the suite could not be set up; every test fails with it.
	setupErr error
)

// The HPA controller syncs every second so that scaling is quick; the
// other controllers keep their defaults.
var controllerManagerArgs = []string{"--horizontal-pod-autoscaler-sync-period=1s"}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

// runMain is controlplane.RunMain with the suite's setup, and a teardown
// that stops the manager and the metrics stand-in before the control plane.
func runMain(m *testing.M) int {
	defer klog.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	cp, err = controlplane.Start(ctx, controlplane.Options{
		ControllerManager: true, ControllerManagerArgs: controllerManagerArgs, Scheduler: true, Kwok: true,
	})
	if err != nil {
		klog.ErrorS(err, "Starting the control plane for the tests")
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			klog.ErrorS(err, "Stopping the control plane")
		}
	}()
	setupErr = setupSuite(ctx)
	defer func() {
		if manager != nil {
			_ = manager.Stop()
		}
		if metrics != nil {
			_ = metrics.Close()
		}
	}()
	return m.Run()
}

// setupSuite installs the CRDs, registers the metrics stand-in, creates the
// fake nodes and starts the manager; the stand-in and the manager stop with
// the test binary's control plane.
func setupSuite(ctx context.Context) error {
	if err := framework.InstallCRDs(ctx, cp.Config); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	if err := cp.CreateFakeNodes(ctx, appNode, gpuNodeA, gpuNodeB); err != nil {
		return err
	}
	var err error
	if metrics, err = podmetrics.Start(ctx, cp.Client); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metricsNamespace}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", metricsNamespace, err)
	}
	if err := metrics.Register(ctx, cp.Config, metricsNamespace); err != nil {
		return err
	}
	// The manager outlives ctx, which bounds the setup only.
	manager, err = framework.RunManager(klog.NewContext(context.Background(), klog.Background()), cp.Config, app.NewRegistry(), func(o *options.Options) {
		o.Generic.Controllers = []string{appcontroller.ControllerName, pipeline.ControllerName}
		o.Generic.ShutdownTimeout = 10 * time.Second
		o.Pipeline.AllowedNamespaces = []string{pipeline.AnyNamespace}
	})
	return err
}

// requireSuite fails the test when the suite could not be set up.
func requireSuite(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("setting up the suite: %v", setupErr)
	}
	if manager == nil {
		t.Fatal(errors.New("no manager"))
	}
}
