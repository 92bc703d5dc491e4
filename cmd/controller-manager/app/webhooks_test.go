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

package app

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	pipelinecontroller "github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/testing/controlplane"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// Every registration builds and its paths are distinct (a duplicate panics).
func TestWebhookRegistrationsBuild(t *testing.T) {
	s := webhook.NewServer()
	regs := webhookRegistrations()
	wc := WebhookContext{Options: options.NewOptions(), KubeConfig: &rest.Config{Host: "https://127.0.0.1:1"}}
	if err := registerWebhooks(s, wc, regs); err != nil {
		t.Fatal(err)
	}
	if len(s.Paths()) != len(regs) {
		t.Errorf("%d paths served for %d registrations", len(s.Paths()), len(regs))
	}
}

// The validators check the requester's rights; the Pipeline's in the
// namespace of --pipeline-namespace when spec.namespace is empty.
func TestValidatorsCheckRights(t *testing.T) {
	opts := options.NewOptions()
	opts.Pipeline.DefaultNamespace = "models"
	wc := WebhookContext{Options: opts, KubeConfig: &rest.Config{Host: "https://127.0.0.1:1"}}
	checked := 0
	for _, r := range webhookRegistrations() {
		if r.Path != webhook.PathValidatePipelines && r.Path != webhook.PathValidateApps {
			continue
		}
		checked++
		h, err := r.Admission(wc)
		if err != nil {
			t.Fatal(err)
		}
		switch v := h.(type) {
		case pipelinecontroller.Validator:
			if v.Access == nil || v.Options.DefaultNamespace != "models" {
				t.Errorf("pipeline validator %#v: want an access checker and DefaultNamespace models", v)
			}
		case appcontroller.Validator:
			if v.Access == nil {
				t.Errorf("app validator %#v: want an access checker", v)
			}
		default:
			t.Errorf("%s: a %T", r.Name, h)
		}
		if _, err := r.Admission(WebhookContext{Options: opts}); err == nil {
			t.Errorf("%s built without a client config", r.Name)
		}
	}
	if checked != 2 {
		t.Errorf("%d validators found, want 2", checked)
	}
}

func TestRegisterWebhooksRejectsBadEntries(t *testing.T) {
	admit := func(WebhookContext) (webhook.AdmissionHandler, error) {
		return webhook.AdmissionFunc(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return webhook.Allowed()
		}), nil
	}
	convert := func(WebhookContext) (webhook.Converter, error) {
		return webhook.ConverterFunc(func(_ context.Context, o *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
			return o, nil
		}), nil
	}
	for name, r := range map[string]WebhookRegistration{
		"neither": {Path: "/a", Name: "a"},
		"both":    {Path: "/a", Name: "a", Admission: admit, Conversion: convert},
		"no path": {Name: "a", Admission: admit},
		"no name": {Path: "/a", Admission: admit},
	} {
		if err := registerWebhooks(webhook.NewServer(), WebhookContext{}, []WebhookRegistration{r}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := webhook.NewServer()
	if err := registerWebhooks(s, WebhookContext{}, []WebhookRegistration{
		{Path: webhook.PathValidateApps, Name: "v", Admission: admit},
		{Path: webhook.PathConvertApps, Name: "c", Conversion: convert},
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.Paths(); !slices.Equal(got, []string{webhook.PathConvertApps, webhook.PathValidateApps}) {
		t.Errorf("paths %v", got)
	}
}

// The manifests name exactly the paths the manager serves: a path named but
// not served fails every matching request (failurePolicy Fail), a path
// served but not named is dead code.
func TestManifestsNameTheRegisteredWebhooks(t *testing.T) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "manifests", "default", "webhook-conversion-*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "manifests", "webhook", "mutating.yaml"), filepath.Join(root, "manifests", "webhook", "validating.yaml"))
	named := map[string]string{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		collectServicePaths(t, obj.Object, filepath.Base(file), named)
	}
	// The component admission-webhooks repoints the Pipeline webhook with a
	// JSON patch.
	patch := filepath.Join(root, "manifests", "components", "admission-webhooks", "validating.yaml")
	data, err := os.ReadFile(patch)
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Op, Path string
		Value    any
	}
	if err := yaml.Unmarshal(data, &ops); err != nil {
		t.Fatalf("%s: %v", patch, err)
	}
	for _, op := range ops {
		if path, ok := op.Value.(string); ok && strings.HasSuffix(op.Path, "/clientConfig/service/path") {
			named[path] = "components/admission-webhooks/validating.yaml"
		}
	}
	served := map[string]bool{}
	for _, r := range webhookRegistrations() {
		served[r.Path] = true
		if _, ok := named[r.Path]; !ok {
			t.Errorf("webhook %s is served on %s, which no manifest names", r.Name, r.Path)
		}
	}
	for path, file := range named {
		if !served[path] {
			t.Errorf("%s names %s, which the manager does not serve", file, path)
		}
	}
}

// collectServicePaths finds every clientConfig.service.path under v.
func collectServicePaths(t *testing.T, v any, file string, into map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if cc, ok := v["clientConfig"].(map[string]any); ok {
			svc, _ := cc["service"].(map[string]any)
			path, _ := svc["path"].(string)
			if path == "" {
				t.Errorf("%s: a clientConfig without service.path: %v", file, cc)
			}
			into[path] = file
		}
		for _, child := range v {
			collectServicePaths(t, child, file, into)
		}
	case []any:
		for _, child := range v {
			collectServicePaths(t, child, file, into)
		}
	}
}
