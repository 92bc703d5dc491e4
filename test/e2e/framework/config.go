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
	"os"
	"strings"
)

// Environment variables that configure the suite.
const (
	// EnvUseExistingCluster set to "true" runs the suite against the cluster
	// of $KUBECONFIG instead of starting a local control plane.
	EnvUseExistingCluster = "E2E_USE_EXISTING_CLUSTER"
	// EnvManager says where the manager under test runs: "process" (the
	// default) runs two processes of the binary here; "deployment" uses the
	// manifests' Deployment already running in the cluster (make e2e-kind).
	EnvManager = "E2E_MANAGER"
	// EnvManagerBinary is the manager binary to run (make build); required
	// unless the manager is the in-cluster Deployment.
	EnvManagerBinary = "E2E_MANAGER_BINARY"
	// EnvArtifacts is a directory that keeps the manager and control plane
	// logs after the run; empty uses a temporary directory removed at the end.
	EnvArtifacts = "E2E_ARTIFACTS"
)

// Where the manager under test runs.
const (
	ManagerProcess    = "process"
	ManagerDeployment = "deployment"
)

// Config is the suite's configuration, read from the environment.
type Config struct {
	// UseExistingCluster: the cluster of Kubeconfig, not a local control plane.
	UseExistingCluster bool
	// Kubeconfig is $KUBECONFIG, used only with UseExistingCluster.
	Kubeconfig string
	// Manager is ManagerProcess or ManagerDeployment.
	Manager string
	// ManagerBinary is the binary to run as processes.
	ManagerBinary string
	// ArtifactsDir keeps logs; empty: a temporary directory.
	ArtifactsDir string
}

// ConfigFromEnv reads the Config from the environment variables above.
func ConfigFromEnv() Config {
	c := Config{
		UseExistingCluster: strings.EqualFold(os.Getenv(EnvUseExistingCluster), "true"),
		Kubeconfig:         os.Getenv("KUBECONFIG"),
		Manager:            os.Getenv(EnvManager),
		ManagerBinary:      os.Getenv(EnvManagerBinary),
		ArtifactsDir:       os.Getenv(EnvArtifacts),
	}
	if c.Manager == "" {
		c.Manager = ManagerProcess
	}
	return c
}

// InClusterManager reports whether the manager under test is the
// Deployment in the cluster rather than local processes.
func (c Config) InClusterManager() bool {
	return c.Manager == ManagerDeployment
}
