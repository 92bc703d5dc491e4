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

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/ndsl/controller-manager/controllers/pipeline"
)

// PipelineOptionsConfigMap is the name of the ConfigMap that holds the
// Pipeline allowlists for the manager's flags in manifests/manager, written
// into the Pipeline admission policy by
// manifests/components/pipeline-options (kustomize adds a hash to it).
const PipelineOptionsConfigMap = "controller-manager-pipeline-options"

// PipelineOptionsData is that ConfigMap's data for o, as manifests/manager
// writes it: each key a flag's name, lists comma-separated.
func PipelineOptionsData(o pipeline.Options) map[string]string {
	return map[string]string{
		"pipeline-namespace":          o.DefaultNamespace,
		"pipeline-allowed-namespaces": strings.Join(o.AllowedNamespaces, ","),
		"pipeline-allowed-nfs":        strings.Join(o.AllowedNFS, ","),
		"pipeline-allowed-images":     strings.Join(o.AllowedImages, ","),
		"pipeline-max-replicas":       fmt.Sprint(o.MaxReplicas),
	}
}

// PipelinePolicyVariables names, for each key of PipelineOptionsData, the
// variable of the Pipeline admission policy that holds it.
var PipelinePolicyVariables = map[string]string{
	"pipeline-namespace":          "flagNamespace",
	"pipeline-allowed-namespaces": "flagAllowedNamespaces",
	"pipeline-allowed-nfs":        "flagAllowedNFS",
	"pipeline-allowed-images":     "flagAllowedImages",
	"pipeline-max-replicas":       "flagMaxReplicas",
}

// SetPipelinePolicyFlags writes o into the Pipeline admission policy's
// flag* variables, each a CEL string literal, as the chart and
// manifests/components/pipeline-options do. Tests that run the manager
// with some allowlists give the policy the same ones through it.
func SetPipelinePolicyFlags(p *admissionregistrationv1.ValidatingAdmissionPolicy, o pipeline.Options) error {
	data := PipelineOptionsData(o)
	set := 0
	for i, v := range p.Spec.Variables {
		for flag, name := range PipelinePolicyVariables {
			if v.Name == name {
				p.Spec.Variables[i].Expression = "'" + data[flag] + "'"
				set++
			}
		}
	}
	if set != len(PipelinePolicyVariables) {
		return fmt.Errorf("ValidatingAdmissionPolicy %s has %d of the %d flag variables", p.Name, set, len(PipelinePolicyVariables))
	}
	return nil
}
