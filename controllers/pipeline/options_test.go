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

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The allowlist flags take comma-separated or repeated values, default to
// empty (everything allowed), and refuse values that cannot mean what the
// administrator wrote.
func TestPipelineAllowlistFlags(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		wantNFS, wantImage []string
		wantErr            string // a substring; empty: valid
	}{
		{args: nil},
		{args: []string{"--pipeline-allowed-nfs=192.168.20.235:/home/aiedge,nfs.example.com"},
			wantNFS: []string{"192.168.20.235:/home/aiedge", "nfs.example.com"}},
		{args: []string{"--pipeline-allowed-nfs=a.example.com:/x", "--pipeline-allowed-nfs=fd00::1:/exports"},
			wantNFS: []string{"a.example.com:/x", "fd00::1:/exports"}},
		{args: []string{"--pipeline-allowed-images=registry.example.com/,docker.io/library/nginx"},
			wantImage: []string{"registry.example.com/", "docker.io/library/nginx"}},
		{args: []string{"--pipeline-allowed-nfs=:/exports"}, wantErr: `--pipeline-allowed-nfs: ":/exports" names no server`},
		{args: []string{"--pipeline-allowed-nfs=nfs:exports"}, wantErr: `--pipeline-allowed-nfs: "nfs:exports": "nfs:exports" is not a host name or IP address`},
		{args: []string{"--pipeline-allowed-nfs=nfs/exports"}, wantErr: "is not a host name or IP address"},
		{args: []string{"--pipeline-allowed-nfs=nfs:/exports/../etc"}, wantErr: `--pipeline-allowed-nfs: "nfs:/exports/../etc": the share prefix must not contain ".."`},
		{args: []string{"--pipeline-allowed-images=docker.io/library/,quay.io/team/"},
			wantImage: []string{"docker.io/library/", "quay.io/team/"}},
		{args: []string{"--pipeline-allowed-images=team/"}, wantErr: `--pipeline-allowed-images: "team/" is neither a registry (registry.example.com/) nor an organisation with its registry (docker.io/team/)`},
		{args: []string{"--pipeline-allowed-images=nginx"}, wantErr: `--pipeline-allowed-images: "nginx" is neither a registry`},
		{args: []string{"--pipeline-allowed-images=library/nginx"}, wantErr: `--pipeline-allowed-images: "library/nginx" is not written as the kubelet resolves it; write "docker.io/library/nginx"`},
		{args: []string{"--pipeline-allowed-images=docker.io/Library/"}, wantErr: `--pipeline-allowed-images: "docker.io/Library/" is not a repository prefix`},
		{args: []string{"--pipeline-allowed-images=docker.io/library/nginx:1.27"}, wantErr: `write "docker.io/library/nginx"`},
	} {
		o := DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err := o.Validate()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case !slices.Equal(o.AllowedNFS, tc.wantNFS) || !slices.Equal(o.AllowedImages, tc.wantImage):
			t.Errorf("%v: AllowedNFS %q, AllowedImages %q; want %q, %q", tc.args, o.AllowedNFS, o.AllowedImages, tc.wantNFS, tc.wantImage)
		}
	}
}

// Creating namespaces is opt-in, replicas per step are bounded at 100 by
// default (0: no bound), and a negative bound is refused in one line.
func TestPipelineNamespaceAndReplicaFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		wantCreate bool
		wantMax    int32
		wantErr    string
	}{
		{args: nil, wantMax: 100},
		{args: []string{"--pipeline-create-namespaces", "--pipeline-max-replicas=0"}, wantCreate: true, wantMax: 0},
		{args: []string{"--pipeline-max-replicas=-1"}, wantErr: "--pipeline-max-replicas must be 0 (no limit) or more, got -1"},
	} {
		o := DefaultOptions()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		err := o.Validate()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case o.CreateNamespaces != tc.wantCreate || o.MaxReplicas != tc.wantMax:
			t.Errorf("%v: CreateNamespaces %v, MaxReplicas %d; want %v, %d", tc.args, o.CreateNamespaces, o.MaxReplicas, tc.wantCreate, tc.wantMax)
		}
	}
}
