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

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// webhookCertSecret is the manager's default --webhook-cert-secret.
const webhookCertSecret = "controller-manager-webhook-certs"

// certSecretWritesPerChange bounds the managers' writes of the certificate
// Secret: its creation, then per replica whose names change, one write that
// adds the missing names, and one spare (a write that lost a race). Replicas
// that each rewrote the Secret to their own names wrote it about 1,200 times
// in 30 s (issue 22).
const certSecretWritesPerChange = 2

// changeCertFlags restarts one replica, as a rolling upgrade that changes
// --webhook-cert-extra-names does, with a name the others do not have; it
// keeps it from then on, so replicas with different names run side by side.
// The step ends when the successor is an endpoint.
func (x *runner) changeCertFlags(ctx context.Context, r *rand.Rand, n int) error {
	procs := x.sup.processes()
	slot := r.IntN(len(procs))
	name := fmt.Sprintf("chaos-%d.example", n)
	x.sup.setArgs(slot, append(x.sup.slotArgs(slot), "--webhook-cert-extra-names="+name))
	x.w.mu.Lock()
	x.w.certNames = append(x.w.certNames, name)
	x.w.mu.Unlock()
	old := procs[slot]
	if old == nil || old.Exited() {
		x.w.logf("cert-flags: slot %d gets the extra name %s at its next start", slot, name)
		return nil
	}
	next, sent, err := x.replace(ctx, slot, old)
	if err != nil {
		return fmt.Errorf("cert-flags (extra name %s): %w", name, err)
	}
	x.w.logf("cert-flags: %s replaced by %s with the extra certificate name %s, an endpoint %v after SIGTERM", old.Name, next.Name, name, time.Since(sent).Round(100*time.Millisecond))
	return nil
}
