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
	"encoding/json"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

// withoutStaleSpec is p, read at v1, without a kept v1beta1 spec that no
// longer says what p's spec says. Pipelines are stored at v1: the spec a
// v1beta1 write kept stays on the stored object after a v1 write changes
// the spec, and every conversion ignores it from then on.
func withoutStaleSpec(t *testing.T, p *pipelinev1.Pipeline) *pipelinev1.Pipeline {
	t.Helper()
	raw, ok := p.Annotations[pipelineconversion.V1beta1SpecAnnotation]
	if !ok {
		return p
	}
	kept := &pipelinev1beta1.Pipeline{}
	if err := json.Unmarshal([]byte(raw), &kept.Spec); err != nil {
		t.Fatalf("decoding the kept v1beta1 spec of Pipeline %s: %v", p.Name, err)
	}
	says := &pipelinev1.Pipeline{}
	if err := pipelineconversion.V1beta1ToV1(kept, says); err != nil {
		t.Fatal(err)
	}
	if apiequality.Semantic.DeepEqual(says.Spec, p.Spec) {
		return p
	}
	p = p.DeepCopy()
	delete(p.Annotations, pipelineconversion.V1beta1SpecAnnotation)
	if len(p.Annotations) == 0 {
		p.Annotations = nil
	}
	return p
}
