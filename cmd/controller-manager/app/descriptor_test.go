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
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
)

func testRegistry() Registry {
	noop := func(context.Context, ControllerContext) (Controller, error) { return nil, nil }
	return Registry{
		{Name: "app", New: noop},
		{Name: "ingress", Aliases: []string{"ingress-manager"}, New: noop},
		{Name: "pipeline", New: noop},
		{Name: "cleanup", DisabledByDefault: true, New: noop},
	}
}

func TestEnabledControllers(t *testing.T) {
	cases := []struct {
		name      string
		requested []string
		want      []string
		wantErr   string
	}{
		{name: "star enables defaults only", requested: []string{"*"}, want: []string{"app", "ingress", "pipeline"}},
		{name: "star plus disabled-by-default", requested: []string{"*", "cleanup"}, want: []string{"app", "ingress", "pipeline", "cleanup"}},
		{name: "star minus one", requested: []string{"*", "-app"}, want: []string{"ingress", "pipeline"}},
		{name: "explicit list without star", requested: []string{"ingress", "cleanup"}, want: []string{"ingress", "cleanup"}},
		{name: "nothing", requested: nil, want: nil},
		{name: "only disables", requested: []string{"-app"}, want: nil},
		{name: "first mention wins (enable first)", requested: []string{"app", "-app"}, want: []string{"app"}},
		{name: "first mention wins (disable first)", requested: []string{"-app", "*", "app"}, want: []string{"ingress", "pipeline"}},
		{name: "alias resolves", requested: []string{"ingress-manager"}, want: []string{"ingress"}},
		{name: "disabling an alias disables the canonical", requested: []string{"-ingress-manager", "*"}, want: []string{"app", "pipeline"}},
		{name: "alias and canonical share first-mention", requested: []string{"-ingress-manager", "ingress"}, want: nil},
		{name: "unknown name", requested: []string{"*", "nope"}, wantErr: `unknown controller "nope" in --controllers; known controllers: app, cleanup, ingress, pipeline`},
		{name: "unknown disabled name", requested: []string{"-nope"}, wantErr: `unknown controller "-nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testRegistry().Enabled(tc.requested)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range got {
				names = append(names, d.Name)
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("enabled = %v, want %v", names, tc.want)
			}
		})
	}
}

func TestRegistryRejectsDuplicateNames(t *testing.T) {
	r := append(testRegistry(), ControllerDescriptor{Name: "other", Aliases: []string{"app"}, New: testRegistry()[0].New})
	if err := r.validate(); err == nil {
		t.Fatal("duplicate alias accepted")
	}
	if err := NewRegistry().validate(); err != nil {
		t.Fatalf("the real registry is invalid: %v", err)
	}
}

// Every controller of the real registry declares the RBAC that hack/rbacgen
// renders, Events included (every controller records them): one without
// rules would be generated a ClusterRole that grants nothing.
func TestEveryControllerDeclaresItsRBAC(t *testing.T) {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	for _, d := range NewRegistry() {
		if d.Role.Summary == "" || len(d.Role.Rules) == 0 {
			t.Errorf("controller %s: Role %+v: want a summary and rules", d.Name, d.Role)
		}
		for _, r := range d.Role.Rules {
			if len(r.APIGroups) == 0 || len(r.Resources) == 0 || len(r.Verbs) == 0 {
				t.Errorf("controller %s: rule %+v lacks groups, resources or verbs", d.Name, r)
			}
			for _, v := range r.Verbs {
				if !slices.Contains(verbs, v) {
					t.Errorf("controller %s: rule %+v: verb %q is not one the API server checks", d.Name, r, v)
				}
			}
		}
		if !slices.ContainsFunc(d.Role.Rules, func(r controller.Rule) bool { return reflect.DeepEqual(r, controller.EventsRule) }) {
			t.Errorf("controller %s: no rule to record Events", d.Name)
		}
	}
}

// The registry binds each controller's flags in its own flag set, with
// --concurrent-<name>-syncs where its defaults give it workers, and
// validates them: a new controller's options need only its descriptor.
func TestRegistryBindsAndValidatesEachControllersOptions(t *testing.T) {
	r := NewRegistry()
	o := options.NewOptions()
	fss := r.Flags(o)
	for name, want := range map[string][]string{
		"app":      {"concurrent-app-syncs", "app-ingress-domain"},
		"ingress":  {"concurrent-ingress-syncs", "ingress-allowed-hosts"},
		"pipeline": {"concurrent-pipeline-syncs", "pipeline-allowed-images", "pipeline-pod-security"},
		"cleanup":  {"cleanup-interval"},
	} {
		fs := fss.FlagSets[name+" controller"]
		if fs == nil {
			t.Fatalf("no flag set %q", name+" controller")
		}
		for _, f := range want {
			if fs.Lookup(f) == nil {
				t.Errorf("flag set %q lacks --%s", name+" controller", f)
			}
		}
	}
	if fss.FlagSets["cleanup controller"].Lookup("concurrent-cleanup-syncs") != nil {
		t.Error("the cleanup controller, one sweep at a time, got a workers flag")
	}

	all := pflag.NewFlagSet("test", pflag.ContinueOnError)
	options.AddAll(all, fss)
	if err := all.Parse([]string{"--concurrent-app-syncs=7", "--app-ingress-domain=apps.example.com"}); err != nil {
		t.Fatal(err)
	}
	if o.App.Workers != 7 || o.App.IngressDomain != "apps.example.com" {
		t.Errorf("parsed into %+v", o.App)
	}
	if err := r.ValidateOptions(o); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
	if err := all.Parse([]string{"--concurrent-ingress-syncs=0", "--cleanup-interval=0s", "--app-ingress-class=NGINX class"}); err != nil {
		t.Fatal(err)
	}
	err := r.ValidateOptions(o)
	for _, want := range []string{"--concurrent-ingress-syncs must be at least 1, got 0", "--cleanup-interval must be positive", "--app-ingress-class"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateOptions = %v, want it to say %q", err, want)
		}
	}
}
