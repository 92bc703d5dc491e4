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
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

// The manager's own v1beta1 requests each carry the deprecation warning: it
// is logged once, not once per request.
func TestWarningsAreLoggedOnce(t *testing.T) {
	var out bytes.Buffer
	klog.SetLoggerWithOptions(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out))))
	defer klog.ClearLogger()
	cfg, err := restConfig(options.GenericOptions{Kubeconfig: writeKubeconfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		cfg.WarningHandler.HandleWarningHeader(299, "", "v1beta1 App is deprecated")
	}
	cfg.WarningHandler.HandleWarningHeader(299, "", "another")
	cfg.WarningHandler.HandleWarningHeader(199, "", "not a warning code")
	if got := strings.Count(out.String(), "v1beta1 App is deprecated"); got != 1 {
		t.Errorf("the repeated warning was logged %d times, want 1:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "another") || strings.Contains(out.String(), "not a warning code") {
		t.Errorf("want each distinct 299 warning once and nothing else:\n%s", out.String())
	}
}

// writeKubeconfig writes a kubeconfig of a server that is never called.
func writeKubeconfig(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
