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

package pipeline

import pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"

// The validating webhook judges every request as v1beta1 (decodePipeline),
// so that its field paths are v1beta1's. These are the controller's rules
// (childNamespace, modelDir, tooManyReplicas) for a v1beta1 Pipeline.

// targetNamespace is where the v1beta1 Pipeline's namespaced children live.
func targetNamespace(p *pipelinev1beta1.Pipeline, defaultNamespace string) string {
	return namespaceOr(p.Spec.Namespace, defaultNamespace)
}

// storageDir is the directory the v1beta1 Pipeline's volume mounts, ""
// without an NFS share.
func storageDir(p *pipelinev1beta1.Pipeline) string {
	return shareDir(p.Spec.ModelStorage.NFSShare(), p.Name)
}

// replicasRefusal says why the v1beta1 step may not run: it asks for more
// replicas than maxReplicas.
func replicasRefusal(maxReplicas int32, step pipelinev1beta1.PipelineStep) error {
	return tooManyReplicas(maxReplicas, step.Model, step.Replicas)
}
