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

package ingress

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/pkg/controller"
)

func service(annotations map[string]string, ports ...int32) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: "shop", Name: "web", UID: "svc-uid", Annotations: annotations,
	}}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Port: p})
	}
	return s
}

func TestWantsIngress(t *testing.T) {
	for value, want := range map[string]bool{"": true, "true": true, "yes": true, "false": false} {
		if got := wantsIngress(service(map[string]string{AnnotationEnabled: value})); got != want {
			t.Errorf("%s=%q: wants = %v, want %v", AnnotationEnabled, value, got, want)
		}
	}
	if wantsIngress(service(nil)) {
		t.Error("Service without the annotation wants an Ingress")
	}
}

func TestDesiredIngress(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		opts        Options
		ports       []int32
		wantHost    string
		wantClass   string // "" means nil
		wantPath    networkingv1.PathType
		wantTLS     string
		wantErr     string
		// wantRefusal is the reason of the refusal wantErr is, if one.
		wantRefusal  string
		externalName string
	}{
		{name: "defaults from flags", opts: Options{DefaultDomain: "example.com", DefaultClass: "nginx"}, ports: []int32{8080, 9090},
			wantHost: "web.shop.example.com", wantClass: "nginx", wantPath: networkingv1.PathTypePrefix},
		{name: "host annotation, no domain, no class", ports: []int32{80}, annotations: map[string]string{AnnotationHost: "shop.test"},
			wantHost: "shop.test", wantPath: networkingv1.PathTypePrefix},
		{name: "no host at all", ports: []int32{80}, wantErr: "no host", wantRefusal: ReasonHostRequired},
		{name: "ExternalName", ports: []int32{80}, opts: Options{DefaultDomain: "example.com"}, externalName: "db.other.svc.cluster.local",
			wantErr: "ExternalName (db.other.svc.cluster.local)", wantRefusal: ReasonExternalName},
		{name: "host not allowed", ports: []int32{80}, opts: Options{DefaultDomain: "example.com", AllowedHosts: []string{"apps.example.com"}},
			wantErr: `host "web.shop.example.com" is not allowed`, wantRefusal: ReasonHostNotAllowed},
		{name: "host allowed", ports: []int32{80}, opts: Options{DefaultDomain: "apps.example.com", AllowedHosts: []string{"apps.example.com"}},
			wantHost: "web.shop.apps.example.com", wantPath: networkingv1.PathTypePrefix},
		{name: "annotations override flags", ports: []int32{80}, opts: Options{DefaultDomain: "example.com", DefaultClass: "nginx"},
			annotations: map[string]string{AnnotationHost: "shop.test", AnnotationClass: "traefik", AnnotationPathType: "Exact", AnnotationTLSSecret: "shop-tls"},
			wantHost:    "shop.test", wantClass: "traefik", wantPath: networkingv1.PathTypeExact, wantTLS: "shop-tls"},
		{name: "bad path type", ports: []int32{80}, annotations: map[string]string{AnnotationPathType: "Regex"}, wantErr: "must be Prefix, Exact or ImplementationSpecific"},
		{name: "no ports", wantErr: "no ports"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := service(tc.annotations, tc.ports...)
			if tc.externalName != "" {
				svc.Spec.Type, svc.Spec.ExternalName = corev1.ServiceTypeExternalName, tc.externalName
			}
			ing, err := DesiredIngress(svc, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				gotReason := ""
				var refused *refusal
				if errors.As(err, &refused) {
					gotReason = refused.reason
				}
				if gotReason != tc.wantRefusal {
					t.Errorf("refusal reason = %q, want %q", gotReason, tc.wantRefusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ing.Name != "web" || ing.Namespace != "shop" {
				t.Errorf("name = %s/%s", ing.Namespace, ing.Name)
			}
			if !metav1.IsControlledBy(ing, svc) {
				t.Error("Ingress is not controlled by its Service")
			}
			if ing.Labels[controller.ManagedByLabel] != controller.ManagedByValue {
				t.Error("managed-by label missing")
			}
			rule := ing.Spec.Rules[0]
			if rule.Host != tc.wantHost {
				t.Errorf("host = %q, want %q", rule.Host, tc.wantHost)
			}
			path := rule.HTTP.Paths[0]
			if path.Path != "/" || *path.PathType != tc.wantPath {
				t.Errorf("path = %s %s", path.Path, *path.PathType)
			}
			if b := path.Backend.Service; b.Name != "web" || b.Port.Number != tc.ports[0] {
				t.Errorf("backend = %s:%d, want web:%d", b.Name, b.Port.Number, tc.ports[0])
			}
			gotClass := ""
			if ing.Spec.IngressClassName != nil {
				gotClass = *ing.Spec.IngressClassName
			}
			if gotClass != tc.wantClass {
				t.Errorf("class = %q, want %q", gotClass, tc.wantClass)
			}
			gotTLS := ""
			if len(ing.Spec.TLS) == 1 {
				gotTLS = ing.Spec.TLS[0].SecretName
				if tc.wantHost != "" && ing.Spec.TLS[0].Hosts[0] != tc.wantHost {
					t.Errorf("TLS hosts = %v", ing.Spec.TLS[0].Hosts)
				}
			}
			if gotTLS != tc.wantTLS {
				t.Errorf("TLS secret = %q, want %q", gotTLS, tc.wantTLS)
			}
		})
	}
}

// The controller applies only when the cached Ingress lacks a field it
// sets; the API server's apply merges and keeps the rest.
func TestUpToDate(t *testing.T) {
	svc := service(nil, 80)
	desired, err := desiredIngress(svc, Options{DefaultDomain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	live, err := DesiredIngress(svc, Options{DefaultDomain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	upToDate := func(ing *networkingv1.Ingress) bool {
		t.Helper()
		ok, err := controller.UpToDate(desired, ing)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	same := live.DeepCopy()
	same.Labels["someone-else"] = "added"              // not ours: no drift
	same.Annotations = map[string]string{"note": "hi"} // not ours: no drift
	class := "defaulted-by-admission"
	same.Spec.IngressClassName = &class // desired leaves the class to the cluster
	if !upToDate(same) {
		t.Error("fields this controller does not set counted as drift")
	}

	drifted := live.DeepCopy()
	drifted.Spec.Rules[0].Host = "hand.edited"
	if upToDate(drifted) {
		t.Error("hand-edited host not detected")
	}

	noLabel := live.DeepCopy()
	delete(noLabel.Labels, controller.ManagedByLabel)
	if upToDate(noLabel) {
		t.Error("missing managed-by label not detected")
	}
}

func TestAllowHost(t *testing.T) {
	allowed := []string{"apps.example.com", "*.wild.example.com"}
	for _, tc := range []struct {
		host    string
		allowed []string
		want    string // "" is allowed, else part of the error
	}{
		{host: "anything.example.org"},
		{host: "*.example.org", want: "--ingress-allowed-hosts is empty"},
		{host: "apps.example.com", allowed: allowed},
		{host: "shop.apps.example.com", allowed: allowed},
		{host: "Shop.Apps.Example.com", allowed: allowed},
		{host: "a.b.apps.example.com", allowed: allowed},
		{host: "evilapps.example.com", allowed: allowed, want: `host "evilapps.example.com" is not allowed by --ingress-allowed-hosts (apps.example.com, *.wild.example.com)`},
		{host: "example.com", allowed: allowed, want: "not allowed"},
		{host: "apps.example.com.evil.org", allowed: allowed, want: "not allowed"},
		{host: "*.apps.example.com", allowed: allowed, want: `wildcard host "*.apps.example.com" is not allowed: it needs an entry *.<domain>`},
		// *.D: every host below D, wildcards included, not D itself.
		{host: "shop.wild.example.com", allowed: allowed},
		{host: "*.wild.example.com", allowed: allowed},
		{host: "*.team.wild.example.com", allowed: allowed},
		{host: "wild.example.com", allowed: allowed, want: "not allowed"},
		{host: "*.example.com", allowed: allowed, want: "wildcard host"},
		{host: "*.evilwild.example.com", allowed: allowed, want: "wildcard host"},
	} {
		err := allowHost(tc.host, tc.allowed)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("allowHost(%q, %v) = %v, want allowed", tc.host, tc.allowed, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("allowHost(%q, %v) = %v, want an error containing %q", tc.host, tc.allowed, err, tc.want)
		}
	}
}

func TestValidateAllowedHosts(t *testing.T) {
	good := Options{AllowedHosts: []string{"apps.example.com", "*.team.example.com", "internal"}}
	if err := good.Validate(); err != nil {
		t.Errorf("valid entries refused: %v", err)
	}
	bad := Options{AllowedHosts: []string{"ok.example.com", "Apps.Example.com", "*", "*.*.example.com", "", "a.*.example.com"}}
	err := bad.Validate()
	want := `--ingress-allowed-hosts: "Apps.Example.com", "*", "*.*.example.com", "", "a.*.example.com": each entry is a lowercase DNS name`
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Validate() = %v, want one line starting %q", err, want)
	}
}
