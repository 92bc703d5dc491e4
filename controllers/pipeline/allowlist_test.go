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
	"strings"
	"testing"

	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
)

func TestNFSAllowlist(t *testing.T) {
	allowed := []string{"192.168.20.235:/home/aiedge", "nfs.example.com", "fd00::1:/exports/models/", "root.example.com:/"}
	for _, tc := range []struct {
		allowed       []string
		server, share string
		want          bool
	}{
		{allowed: nil, server: "10.0.0.66", share: "/anything/../etc", want: true}, // no list: everything
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge", want: true},
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge/", want: true},
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge/csiTest", want: true},
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge//csiTest/./x", want: true},
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge-evil"},
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge/../etc"},
		{allowed: allowed, server: "192.168.20.235", share: "/home/aiedge/x/../y"}, // ".." is refused, even inside
		{allowed: allowed, server: "192.168.20.235", share: "/home"},
		{allowed: allowed, server: "192.168.20.235", share: "home/aiedge"},
		{allowed: allowed, server: "192.168.20.23", share: "/home/aiedge"},
		{allowed: allowed, server: "10.0.0.66", share: "/home/aiedge"},
		{allowed: allowed, server: "nfs.example.com", share: "/any/share", want: true},
		{allowed: allowed, server: "NFS.Example.com", share: "/any/share", want: true}, // host names ignore case
		{allowed: allowed, server: "nfs.example.com", share: "/any/../share"},
		{allowed: allowed, server: "nfs.example.com.evil", share: "/x"},
		{allowed: allowed, server: "fd00::1", share: "/exports/models/x", want: true},
		{allowed: allowed, server: "fd00::1", share: "/exports/modelsx"},
		{allowed: allowed, server: "[fd00::1]", share: "/exports/models", want: true},
		{allowed: []string{"[fd00::2]:/x"}, server: "fd00::2", share: "/x/y", want: true},
		{allowed: allowed, server: "root.example.com", share: "/", want: true},
		{allowed: allowed, server: "root.example.com", share: "/srv", want: true},
		{allowed: allowed, server: "", share: "/home/aiedge"},
	} {
		err := nfsRefusal(tc.allowed, tc.server, tc.share)
		if got := err == nil; got != tc.want {
			t.Errorf("%q on %s:%s: allowed = %v, want %v (%v)", tc.allowed, tc.server, tc.share, got, tc.want, err)
		}
		if err != nil && !strings.Contains(err.Error(), "allowed (--pipeline-allowed-nfs): "+strings.Join(tc.allowed, ", ")) {
			t.Errorf("refusal %q does not name the allowed exports", err)
		}
	}
}

func TestImageAllowlist(t *testing.T) {
	allowed := []string{"registry.example.com/", "docker.io/library/nginx", "localhost:5000", "quay.io/team/"}
	for _, tc := range []struct {
		allowed []string
		image   string
		want    bool
	}{
		{allowed: nil, image: "anything:at-all", want: true}, // no list: everything
		{allowed: allowed, image: "nginx", want: true},
		{allowed: allowed, image: "nginx:latest", want: true},
		{allowed: allowed, image: "library/nginx:1.27", want: true},
		{allowed: allowed, image: "docker.io/library/nginx@sha256:" + strings.Repeat("a", 64), want: true},
		{allowed: allowed, image: "docker.io/library/nginx/sub:1", want: true},
		{allowed: allowed, image: "nginx-evil:latest"},
		{allowed: allowed, image: "evil/nginx"},
		{allowed: allowed, image: "registry.example.com/team/model:v1", want: true},
		{allowed: allowed, image: "registry.example.com.evil/team/model:v1"},
		{allowed: allowed, image: "registry.example.com:5000/team/model:v1"},
		{allowed: allowed, image: "localhost:5000/model", want: true},
		{allowed: allowed, image: "localhost:50001/model"},
		{allowed: allowed, image: "quay.io/team/model", want: true},
		{allowed: allowed, image: "quay.io/teamx/model"},
		{allowed: allowed, image: "Not A Reference"},
	} {
		err := imageRefusal(tc.allowed, tc.image)
		if got := err == nil; got != tc.want {
			t.Errorf("%q with %q: allowed = %v, want %v (%v)", tc.image, tc.allowed, got, tc.want, err)
		}
		if err != nil && !strings.Contains(err.Error(), "allowed prefixes (--pipeline-allowed-images): "+strings.Join(tc.allowed, ", ")) {
			t.Errorf("refusal %q does not name the allowed prefixes", err)
		}
	}
}

// The controller refuses the namespace first, then the storage, then the
// first forbidden image; one forbidden image refuses the whole Pipeline.
func TestRefusal(t *testing.T) {
	o := DefaultOptions()
	o.AllowedNFS = []string{"192.168.20.235:/home/aiedge"}
	o.AllowedImages = []string{"docker.io/library/nginx"}
	pipeline := func(namespace, share string, images ...string) *pipelinev1beta1.Pipeline {
		p := &pipelinev1beta1.Pipeline{Spec: pipelinev1beta1.PipelineSpec{Namespace: namespace, ModelStorage: pipelinev1beta1.ModelStorage{
			Type: pipelinev1beta1.StorageTypeNFS, CSIParameter: map[string]string{"server": "192.168.20.235", "share": share}}}}
		for i, image := range images {
			p.Spec.Steps = append(p.Spec.Steps, pipelinev1beta1.PipelineStep{Model: string(rune('a' + i)), Image: image})
		}
		return p
	}
	for _, tc := range []struct {
		p          *pipelinev1beta1.Pipeline
		wantReason string
		wantMsg    string
	}{
		{p: pipeline("pipeline", "/home/aiedge/csiTest", "nginx:latest")},
		{p: pipeline("kube-system", "/etc", "evil"), wantReason: pipelinev1beta1.ReasonNamespaceNotAllowed, wantMsg: "namespace kube-system is not allowed for Pipelines (--pipeline-allowed-namespaces); nothing is created"},
		{p: pipeline("pipeline", "/etc", "evil"), wantReason: pipelinev1beta1.ReasonStorageNotAllowed,
			wantMsg: "NFS export 192.168.20.235:/etc is not allowed for Pipelines; allowed (--pipeline-allowed-nfs): 192.168.20.235:/home/aiedge; nothing is created"},
		{p: pipeline("pipeline", "/home/aiedge", "nginx", "evil:1"), wantReason: pipelinev1beta1.ReasonImageNotAllowed,
			wantMsg: "step b: image evil:1 (docker.io/library/evil:1) is not allowed for Pipelines; allowed prefixes (--pipeline-allowed-images): docker.io/library/nginx; nothing is created"},
	} {
		reason, err := o.refusal(stored(tc.p), tc.p.Spec.Namespace)
		if reason != tc.wantReason || (err == nil) != (tc.wantMsg == "") || (err != nil && err.Error() != tc.wantMsg) {
			t.Errorf("refusal(%+v) = %q, %v; want %q, %q", tc.p.Spec, reason, err, tc.wantReason, tc.wantMsg)
		}
	}
}
