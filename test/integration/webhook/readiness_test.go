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
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/test/integration/framework"
)

// A replica that serves a certificate the caBundles do not trust yet is not
// ready: the Service would route the API server to it, which then fails
// with "x509: certificate signed by unknown authority". Here the replica
// loads the certificate from the Secret while another holds the writer's
// Lease and the caBundles are blank; once it may write, it injects them and
// turns ready.
func TestNotReadyUntilCABundlesTrustTheServedCertificate(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	first := e.startReplica(cp.Config, longCA, longCert)
	e.waitReady(first)
	e.waitBundlesMatchSecret()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	e.blankBundles(ctx)

	const resourceName = "certs-readiness-test"
	leases := cp.Client.CoordinationV1().Leases(e.ns)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: resourceName + "-certs", Namespace: e.ns},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("elsewhere"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: ptr.To(metav1.NowMicro()), RenewTime: ptr.To(metav1.NowMicro()),
		},
	}
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := e.startReplicaWith(cp.Config, longCA, longCert, func(o *options.Options) {
		o.LeaderElection.LeaderElect = true
		o.LeaderElection.ResourceName = resourceName
		o.LeaderElection.ResourceNamespace = e.ns
		o.LeaderElection.LeaseDuration = metav1.Duration{Duration: 6 * time.Second}
		o.LeaderElection.RenewDeadline = metav1.Duration{Duration: 4 * time.Second}
		o.LeaderElection.RetryPeriod = metav1.Duration{Duration: time.Second}
	})
	e.lb.Set(r.addr)
	var status int
	var body string
	framework.Eventually(t, 60*time.Second, "the replica to load the serving certificate", func(context.Context) (bool, error) {
		var err error
		status, body, err = r.Get("/readyz?verbose")
		if err != nil {
			return false, err
		}
		if !strings.Contains(body, "[+]webhook-certificate ok") {
			return false, fmt.Errorf("%d: %s", status, body)
		}
		return true, nil
	})
	if status == http.StatusOK {
		t.Fatalf("/readyz passed while no caBundle trusts the served certificate:\n%s", body)
	}
	if !strings.Contains(body, "[-]webhook-ca-bundle failed") {
		t.Errorf("/readyz failed without naming the caBundles:\n%s", body)
	}

	if err := leases.Delete(ctx, lease.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitReady(r)
	e.waitBundlesMatchSecret()
	e.waitAdmissionWorks()
}
