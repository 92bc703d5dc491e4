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
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	appconversion "github.com/ndsl/controller-manager/apis/app/conversion"
	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	pipelinecontroller "github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// WebhookContext is what a webhook's constructor may use.
type WebhookContext struct {
	Options    *options.Options
	KubeConfig *rest.Config
	// Context bounds what the webhooks run beside their handlers (the
	// Pipeline webhooks' informer); nil runs nothing.
	Context context.Context
	// pipelines is the Pipeline webhooks' one list of stored Pipelines.
	pipelines *storedPipelineList
}

// WebhookRegistration is one webhook the manager serves. Exactly one of
// Admission and Conversion is set.
type WebhookRegistration struct {
	// Path is one of the webhook.Path* constants, the one the manifests name.
	Path string
	// Name labels the webhook's metrics and logs, e.g. "app-validation".
	Name       string
	Admission  func(WebhookContext) (webhook.AdmissionHandler, error)
	Conversion func(WebhookContext) (webhook.Converter, error)
}

// webhookRegistrations is every webhook the manager serves, on every
// replica. Each API adds its entries here; the handlers live beside the API's
// controller (controllers/<name>/admission.go) and its types.
func webhookRegistrations() []WebhookRegistration {
	return []WebhookRegistration{{
		Path: webhook.PathMutateApps, Name: "app-defaulting",
		Admission: func(wc WebhookContext) (webhook.AdmissionHandler, error) {
			return appcontroller.Defaulter{Options: wc.Options.AppAdmission}, nil
		},
	}, {
		Path: webhook.PathValidateApps, Name: "app-validation",
		Admission: func(wc WebhookContext) (webhook.AdmissionHandler, error) {
			access, err := accessReviewer(wc)
			if err != nil {
				return nil, err
			}
			return appcontroller.Validator{Access: access}, nil
		},
	}, {
		Path: webhook.PathConvertApps, Name: "app-conversion",
		Conversion: func(WebhookContext) (webhook.Converter, error) {
			return appconversion.Converter{}, nil
		},
	}, {
		Path: webhook.PathValidatePipelines, Name: "pipeline-validation",
		Admission: func(wc WebhookContext) (webhook.AdmissionHandler, error) {
			o := wc.Options.Pipeline
			access, err := accessReviewer(wc)
			if err != nil {
				return nil, err
			}
			list, err := storedPipelines(wc)
			if err != nil {
				return nil, err
			}
			o.ManagerNamespace = leaseNamespace(wc.Options.Webhook.Namespace) // as the controller's
			return pipelinecontroller.Validator{Options: o, Access: access, ListPipelines: list}, nil
		},
	}, {
		Path: webhook.PathValidatePipelineOverlaps, Name: "pipeline-overlaps",
		Admission: func(wc WebhookContext) (webhook.AdmissionHandler, error) {
			list, err := storedPipelines(wc)
			if err != nil {
				return nil, err
			}
			return pipelinecontroller.OverlapValidator{ListPipelines: list}, nil
		},
	}, {
		Path: webhook.PathConvertPipelines, Name: "pipeline-conversion",
		Conversion: func(WebhookContext) (webhook.Converter, error) {
			return pipelineconversion.Converter{}, nil
		},
	}}
}

// accessReviewer asks the API server whether a requester may write what
// their object makes the manager write. No client-side rate limit: each
// review stands for a request the API server is admitting, which its own
// priority and fairness already bounds.
func accessReviewer(wc WebhookContext) (*webhook.AccessReviewer, error) {
	if wc.KubeConfig == nil {
		return nil, errors.New("the access checks need the manager's client config")
	}
	cfg := rest.CopyConfig(wc.KubeConfig)
	cfg.QPS, cfg.RateLimiter = -1, nil
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the SubjectAccessReview client: %w", err)
	}
	return &webhook.AccessReviewer{Client: client.AuthorizationV1().SubjectAccessReviews()}, nil
}

// registerWebhooks builds every registration's handler and adds it to s.
func registerWebhooks(s *webhook.Server, wc WebhookContext, regs []WebhookRegistration) error {
	for _, r := range regs {
		if r.Path == "" || r.Name == "" {
			return fmt.Errorf("webhook registration %+v needs a path and a name", r)
		}
		switch {
		case r.Admission != nil && r.Conversion == nil:
			h, err := r.Admission(wc)
			if err != nil {
				return fmt.Errorf("building webhook %s: %w", r.Name, err)
			}
			s.HandleAdmission(r.Path, r.Name, h)
		case r.Conversion != nil && r.Admission == nil:
			c, err := r.Conversion(wc)
			if err != nil {
				return fmt.Errorf("building webhook %s: %w", r.Name, err)
			}
			s.HandleConversion(r.Path, r.Name, c)
		default:
			return errors.New("webhook registration " + r.Name + " needs exactly one of Admission and Conversion")
		}
	}
	return nil
}
