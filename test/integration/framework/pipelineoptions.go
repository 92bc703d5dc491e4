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
	"fmt"
	"strings"

	"github.com/ndsl/controller-manager/controllers/pipeline"
)

// PipelineOptionsConfigMap is the name of the ConfigMap that holds the
// Pipeline allowlists for the manager's flags and the Pipeline admission
// policy (manifests/manager; kustomize adds a hash to it).
const PipelineOptionsConfigMap = "controller-manager-pipeline-options"

// PipelineOptionsData is that ConfigMap's data for o, as the chart and
// manifests/manager write it: each key a flag's name, lists
// comma-separated. Tests that run the manager with some allowlists give
// the policy the same ones through it.
func PipelineOptionsData(o pipeline.Options) map[string]string {
	return map[string]string{
		"pipeline-namespace":          o.DefaultNamespace,
		"pipeline-allowed-namespaces": strings.Join(o.AllowedNamespaces, ","),
		"pipeline-allowed-nfs":        strings.Join(o.AllowedNFS, ","),
		"pipeline-allowed-images":     strings.Join(o.AllowedImages, ","),
		"pipeline-max-replicas":       fmt.Sprint(o.MaxReplicas),
	}
}
