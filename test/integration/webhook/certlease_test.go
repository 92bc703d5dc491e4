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

package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// With leader election on, only the replica holding the Lease
// <resource-name>-certs writes the Secret, the CA ConfigMap and the
// caBundles; the other serves from the Secret. When the holder stops, the
// other takes the Lease and is the one that repairs a blanked caBundle.
func TestOnlyTheCertLeaseHolderWrites(t *testing.T) {
	e := newEnv(t)
	const resourceName = "certs-writer-test"
	withLease := func(o *options.Options) {
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceName = resourceName
		o.LeaderElection.ResourceNamespace = e.ns
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 6 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 4 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: time.Second}
	}
	r1 := e.startReplicaWith(cp.Config, quietCA, quietCert, withLease)
	r2 := e.startReplicaWith(cp.Config, quietCA, quietCert, withLease)
	e.waitReady(r1, r2)
	e.waitBundlesMatchSecret()

	ctx := context.Background()
	leases := cp.Client.CoordinationV1().Leases(e.ns)
	lease, err := leases.Get(ctx, resourceName+"-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the webhook certificates' Lease: %v", err)
	}
	firstHolder := *lease.Spec.HolderIdentity
	certWrites := func(r *replica) int {
		n := 0
		for req, c := range r.Writes.ByRequest() {
			if strings.Contains(req, "/secrets") || strings.Contains(req, "/configmaps") ||
				strings.HasSuffix(req, "/"+e.configName()) || strings.HasSuffix(req, "/"+e.crdName()) {
				n += c
			}
		}
		return n
	}
	holder, standby := r1, r2
	if certWrites(r1) == 0 {
		holder, standby = r2, r1
	}
	if certWrites(holder) == 0 || certWrites(standby) != 0 {
		t.Fatalf("certificate writes: holder %d, standby %d; want only one replica writing\nr1:\n%s\nr2:\n%s",
			certWrites(holder), certWrites(standby), r1.Writes.Summary(), r2.Writes.Summary())
	}

	if err := holder.Stop(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the standby to take the certificates' Lease", func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, resourceName+"-certs", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || *l.Spec.HolderIdentity == firstHolder {
			return false, fmt.Errorf("holder %v", l.Spec.HolderIdentity)
		}
		return true, nil
	})
	admission := cp.Client.AdmissionregistrationV1()
	vwc, err := admission.ValidatingWebhookConfigurations().Get(ctx, e.configName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := admission.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitBundlesMatchSecret()
	if certWrites(standby) == 0 {
		t.Errorf("the caBundle was restored, but not by the new holder:\n%s", standby.Writes.Summary())
	}
}
