package webhooks

import (
	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinecontroller "github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// registerPipelineWebhooks adds the Pipeline webhooks.
func registerPipelineWebhooks(s *webhook.Server) {
	s.HandleAdmission(webhook.PathValidatePipelines, "pipeline-validation", pipelinecontroller.Validator{})
	s.HandleConversion(webhook.PathConvertPipelines, "pipeline-conversion", pipelineconversion.Converter{})
}
