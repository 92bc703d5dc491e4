package webhook

// The paths the manager serves its webhooks on. The manifests' webhook
// configurations and CRD conversion stanzas name the same paths.
const (
	PathMutateApps        = "/mutate/apps"
	PathValidateApps      = "/validate/apps"
	PathValidatePipelines = "/validate/pipelines"
	PathConvertApps       = "/convert/apps"
	PathConvertPipelines  = "/convert/pipelines"
)
