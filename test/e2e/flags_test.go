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

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBadFlagsFailInOneLine runs the binary with flags a user could get wrong.
// Each must stop it before it reaches a cluster, with exit code 1 and one line
// on stderr that names the problem.
func TestBadFlagsFailInOneLine(t *testing.T) {
	requireProcesses(t)
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	cases := []struct {
		args []string
		want string // a substring of the one line
	}{
		{[]string{"--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"--shutdown-timeout=soon"}, `invalid argument "soon" for "--shutdown-timeout"`},
		{[]string{"--shutdown-delay-duration=-1s"}, "--shutdown-delay-duration must not be negative, got -1s"},
		{[]string{"run"}, `unexpected arguments ["run"]`},
		{[]string{"--controllers=*,nope"}, `unknown controller "nope" in --controllers`},
		{[]string{"--kube-api-burst=-1"}, "--kube-api-burst must not be negative"},
		{[]string{"--custom-resource-content-type=application/vnd.kubernetes.protobuf"}, `--custom-resource-content-type must be application/json or application/cbor, got "application/vnd.kubernetes.protobuf"`},
		{[]string{"--leader-elect-lease-duration=1s"}, "must be greater than --leader-elect-renew-deadline"},
		// What client-go's NewLeaderElector refuses, refused before anything starts.
		{[]string{"--leader-elect-renew-deadline=2400ms", "--leader-elect-retry-period=2s"}, "must be greater than 1.2 × --leader-elect-retry-period"},
		// The Lease records whole seconds, which the lease guard relies on.
		{[]string{"--leader-elect-lease-duration=15500ms"}, "must be whole seconds"},
		{[]string{"--standby=lukewarm"}, `--standby must be "warm" or "cold", got "lukewarm"`},
		{[]string{"--controller-queue=lifo"}, "lifo"},
		{[]string{"--tls-cert-file=/tmp/x.crt"}, "--tls-cert-file and --tls-private-key-file must be given together"},
		{[]string{"--pipeline-allowed-nfs=nfs.example.com:/exports/../etc"}, `--pipeline-allowed-nfs: "nfs.example.com:/exports/../etc": the share prefix must not contain ".."`},
		{[]string{"--pipeline-allowed-nfs=nfs:exports"}, `--pipeline-allowed-nfs: "nfs:exports": "nfs:exports" is not a host name or IP address`},
		{[]string{"--pipeline-allowed-images=nginx"}, `--pipeline-allowed-images: "nginx" is neither a registry (registry.example.com/) nor a repository`},
		{[]string{"--pipeline-allowed-images=library/nginx"}, `write "docker.io/library/nginx"`},
		// Two mistakes at once are both named, still on one line.
		{[]string{"--kube-api-burst=-1", "--shutdown-timeout=0s"}, "--shutdown-timeout must be positive"},
		{[]string{"--kubeconfig=" + missing}, "loading --kubeconfig " + missing},
		{nil, "no --kubeconfig, not in a cluster, and no usable $KUBECONFIG"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q", c.args), func(t *testing.T) {
			code, stdout, stderr := runBinary(t, c.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			line := strings.TrimSuffix(stderr, "\n")
			if line == "" || strings.Contains(line, "\n") {
				t.Fatalf("stderr = %q, want exactly one line", stderr)
			}
			if !strings.HasPrefix(line, "controller-manager: ") || !strings.Contains(line, c.want) {
				t.Errorf("stderr = %q, want a line starting %q and containing %q", line, "controller-manager: ", c.want)
			}
		})
	}
}

// TestVersionNamesTheProgram: --version prints this program's name and the
// version the build stamped, not component-base's "Kubernetes".
func TestVersionNamesTheProgram(t *testing.T) {
	requireProcesses(t)
	code, stdout, stderr := runBinary(t, "--version")
	if code != 0 || stderr != "" {
		t.Fatalf("--version: exit code %d, stderr %q; want 0 and nothing", code, stderr)
	}
	if !regexp.MustCompile(`^controller-manager v\d+\.\d+\.\d+\S*\n$`).MatchString(stdout) {
		t.Errorf("--version printed %q, want \"controller-manager vX.Y.Z...\"", stdout)
	}
	code, stdout, _ = runBinary(t, "--help")
	if code != 0 || !strings.Contains(stdout, "Usage:\n  controller-manager [flags]") || !strings.Contains(stdout, "--controllers") {
		t.Errorf("--help: exit code %d, stdout %.200q; want 0 and the usage", code, stdout)
	}
}

// runBinary runs the manager binary with args and no cluster to talk to.
func runBinary(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, launcher.Binary, args...)
	// Nowhere to connect: a flag that slipped through must not reach a cluster.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(t.TempDir(), "none"), "KUBERNETES_SERVICE_HOST=", "HOME="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running %s: %v", launcher.Binary, err)
	}
	return code, out.String(), errOut.String()
}
