package app

import (
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "defaults", opts: DefaultOptions()},
		{name: "domain and class", opts: Options{Workers: 1, IngressDomain: "apps.example.com", IngressClass: "nginx"}},
		{name: "domain with dots around", opts: Options{Workers: 1, IngressDomain: ".apps.example.com."}},
		{name: "no workers", opts: Options{}, wantErr: "--concurrent-app-syncs must be at least 1"},
		{name: "bad domain", opts: Options{Workers: 1, IngressDomain: "Apps_Example"}, wantErr: "--app-ingress-domain"},
		{name: "bad class", opts: Options{Workers: 1, IngressClass: "NGINX class"}, wantErr: "--app-ingress-class"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
