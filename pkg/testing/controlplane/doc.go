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

// Package controlplane runs a real, local Kubernetes control plane for
// integration tests, e2e tests, benchmarks and `make run`: etcd and
// kube-apiserver, and optionally kube-controller-manager, kube-scheduler and
// kwok (fake kubelets), each as a child process on loopback ports.
//
// The binaries are built from Go modules by hack/build-controlplane.sh into
// version-keyed directories under hack/bin (see Options.BinDir).
//
// Children run in their own process groups and are killed as groups by
// ControlPlane.Stop; they are also started with a parent-death signal, so a
// test binary that crashes or is killed does not leak daemons.
//
// Options.ControllerManagerArgs adds kube-controller-manager flags (e.g. a
// quick HPA sync); subpackage podmetrics stands in for metrics-server, so
// that its HPA controller scales on metrics a test decides.
//
// A TestMain that needs a control plane is three lines:
//
//	var cp *controlplane.ControlPlane
//
//	func TestMain(m *testing.M) {
//		os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
//	}
package controlplane
