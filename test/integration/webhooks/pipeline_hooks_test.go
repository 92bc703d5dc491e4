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

package webhooks

import (
	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinecontroller "github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// pathValidatePipelinesAllowlist serves the Pipeline validator with the
// allowlists of TestPipelineAllowlistAdmission; only that test's
// configuration, which selects its labelled Pipelines, points at it, so the
// other tests see the manager's default of no allowlist.
const pathValidatePipelinesAllowlist = "/test-validate-pipelines-allowlist"

// The allowlists the allowlist webhook enforces, as --pipeline-allowed-nfs
// and --pipeline-allowed-images would give them.
var (
	allowlistNFS    = []string{"192.168.20.235:/home/aiedge"}
	allowlistImages = []string{"docker.io/library/nginx"}
)

// pipelineNamespace is the validator's DefaultNamespace, as
// --pipeline-namespace gives it.
const pipelineNamespace = "pipeline"

// registerPipelineWebhooks adds the Pipeline webhooks. The validator checks
// the requester's rights with access, as the manager's does.
func registerPipelineWebhooks(s *webhook.Server, access *webhook.AccessReviewer) {
	s.HandleAdmission(webhook.PathValidatePipelines, "pipeline-validation", pipelinecontroller.Validator{
		Options: pipelinecontroller.Options{DefaultNamespace: pipelineNamespace, AllowedNamespaces: []string{pipelinecontroller.AnyNamespace}}, Access: access,
	})
	s.HandleConversion(webhook.PathConvertPipelines, "pipeline-conversion", pipelineconversion.Converter{})
	s.HandleAdmission(pathValidatePipelinesAllowlist, "pipeline-validation-allowlist",
		pipelinecontroller.Validator{Options: pipelinecontroller.Options{AllowedNFS: allowlistNFS, AllowedImages: allowlistImages,
			DefaultNamespace: "pipeline", AllowedNamespaces: []string{pipelinecontroller.AnyNamespace}, ManagerNamespace: "ndsl-system", MaxReplicas: 10}})
}
