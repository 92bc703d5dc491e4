package app

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/webhook"
)

// Every registration builds and its paths are distinct (a duplicate panics).
func TestWebhookRegistrationsBuild(t *testing.T) {
	s := webhook.NewServer()
	regs := webhookRegistrations()
	if err := registerWebhooks(s, WebhookContext{Options: options.NewOptions()}, regs); err != nil {
		t.Fatal(err)
	}
	if len(s.Paths()) != len(regs) {
		t.Errorf("%d paths served for %d registrations", len(s.Paths()), len(regs))
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
