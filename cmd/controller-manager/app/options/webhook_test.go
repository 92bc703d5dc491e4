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

package options

import (
	"strings"
	"testing"
	"time"
)

func TestWebhookOptionsValidate(t *testing.T) {
	if err := DefaultWebhookOptions().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	off := DefaultWebhookOptions()
	off.Enabled, off.Port = false, -1
	if err := off.Validate(); err != nil {
		t.Errorf("disabled webhooks are not validated: %v", err)
	}
	for name, mutate := range map[string]func(*WebhookOptions){
		"port":          func(o *WebhookOptions) { o.Port = 70000 },
		"secret":        func(o *WebhookOptions) { o.SecretName = "" },
		"validity":      func(o *WebhookOptions) { o.CertValidity = 0 },
		"negative ca":   func(o *WebhookOptions) { o.CAValidity = -time.Hour },
		"empty service": func(o *WebhookOptions) { o.ServiceName = "" },
	} {
		o := DefaultWebhookOptions()
		mutate(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	files := DefaultWebhookOptions()
	files.CertDir, files.SecretName = "/certs", ""
	if err := files.Validate(); err != nil {
		t.Errorf("with --webhook-cert-dir the Secret is not needed: %v", err)
	}
}

func TestWebhookFlags(t *testing.T) {
	o := NewOptions()
	fss := o.Flags(nil, nil)
	fs := fss.FlagSet("all")
	AddAll(fs, fss)
	if err := fs.Parse([]string{"--webhooks=false", "--webhook-port=0", "--webhook-cert-extra-names=127.0.0.1,localhost", "--webhook-ca-validity=1h"}); err != nil {
		t.Fatal(err)
	}
	w := o.Webhook
	if w.Enabled || w.Port != 0 || strings.Join(w.ExtraNames, ",") != "127.0.0.1,localhost" || w.CAValidity != time.Hour {
		t.Errorf("parsed %+v", w)
	}
	if got := DefaultWebhookOptions().ServiceDNSNames("ndsl-system")[0]; got != "controller-manager-webhook.ndsl-system.svc" {
		t.Errorf("first DNS name %q", got)
	}
}
