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

package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
)

// Files Start writes into Dir when Options.AuditPolicy is set.
const (
	auditPolicyFile = "audit-policy.yaml"
	auditLogFile    = "audit.log"
)

// AuditLogPath is where kube-apiserver writes its audit log (JSON lines, one
// audit.k8s.io/v1 Event each) when Options.AuditPolicy is set; it survives
// RestartAPIServer, which appends to it.
func (cp *ControlPlane) AuditLogPath() string {
	return filepath.Join(cp.Dir, auditLogFile)
}

// auditArgs are kube-apiserver's audit flags: none without a policy. The
// policy file is written by start, before the API server runs.
func (cp *ControlPlane) auditArgs() []string {
	if cp.opts.AuditPolicy == "" {
		return nil
	}
	return []string{
		"--audit-policy-file=" + filepath.Join(cp.Dir, auditPolicyFile),
		"--audit-log-path=" + cp.AuditLogPath(),
		"--audit-log-format=json",
		// One file for the whole run, never rotated away under its reader
		// (0 would mean the default of 100 MB).
		"--audit-log-maxsize=100000",
		// Blocking: an event is written before the response, so the log is
		// complete once a request has returned.
		"--audit-log-mode=blocking",
	}
}

// writeAuditPolicy writes Options.AuditPolicy where auditArgs points.
func (cp *ControlPlane) writeAuditPolicy() error {
	if cp.opts.AuditPolicy == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, auditPolicyFile), []byte(cp.opts.AuditPolicy), 0o644); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	return nil
}
