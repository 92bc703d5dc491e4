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
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// clockSkew is how far the skewed replica's clock is off: more than the
// lease duration, so that a replica judging a Lease by its renewTime against
// its own clock would find a live Lease expired (or an expired one live).
const clockSkew = 30 * time.Second

// skewWebhookName names the suite's MutatingWebhookConfiguration.
const skewWebhookName = "chaos-clock-skew"

// skewServer is a mutating webhook that shifts the acquireTime and
// renewTime of the Lease writes of one replica, which is all a replica's
// wall clock reaches in the Lease: what it writes there for the others to
// read. (A replica's own elector times its Leases on its monotonic clock.)
// The API server calls it for that replica's ServiceAccount only (a match
// condition), so the replica's own reads show the stamps it is taken to
// have written.
type skewServer struct {
	srv      *http.Server
	url      string
	caBundle []byte
	skew     atomic.Int64 // nanoseconds
	mutated  atomic.Int64
}

func newSkewServer() (*skewServer, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &skewServer{caBundle: certPEM, url: "https://" + ln.Addr().String() + "/skew"}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = s.srv.ServeTLS(ln, "", "") }()
	return s, nil
}

func (s *skewServer) Close() error { return s.srv.Close() }

// serve answers an AdmissionReview of a Lease write with a patch that moves
// its times by the skew.
func (s *skewServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var review admissionv1.AdmissionReview
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var lease coordinationv1.Lease
	if err := json.Unmarshal(review.Request.Object.Raw, &lease); err == nil {
		skew := time.Duration(s.skew.Load())
		var ops []map[string]any
		for path, t := range map[string]*metav1.MicroTime{"/spec/acquireTime": lease.Spec.AcquireTime, "/spec/renewTime": lease.Spec.RenewTime} {
			if t != nil {
				ops = append(ops, map[string]any{"op": "replace", "path": path, "value": metav1.NewMicroTime(t.Add(skew))})
			}
		}
		if len(ops) > 0 {
			patch, _ := json.Marshal(ops)
			resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
			s.mutated.Add(1)
		}
	}
	review.Response, review.Request = resp, nil
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// configure points the webhook at the Lease writes of user, skewed by skew.
// failurePolicy Ignore: the fault is the skew, not a failing webhook.
func (s *skewServer) configure(ctx context.Context, c *framework.Cluster, user string, skew time.Duration) error {
	s.skew.Store(int64(skew))
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: skewWebhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         "clock-skew.chaos.ndsl.cn",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &s.url, CABundle: s.caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{coordinationv1.GroupName}, APIVersions: []string{"v1"},
					Resources: []string{"leases"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": framework.ManagerNamespace}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "skewed-replica",
				Expression: fmt.Sprintf("request.userInfo.username == %q", user)}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](2),
		}},
	}
	hooks := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	return retrying(ctx, "configuring the clock skew webhook", func(ctx context.Context) error {
		live, err := hooks.Get(ctx, skewWebhookName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = hooks.Create(ctx, cfg, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		live.Webhooks = cfg.Webhooks
		_, err = hooks.Update(ctx, live, metav1.UpdateOptions{})
		return err
	})
}

// skewBound bounds how long the skew step works at making the skewed
// replica lead.
const skewBound = 90 * time.Second

// skewClock skews one replica's clock by ±clockSkew (alternately behind and
// ahead) for the rest of the run, and makes that replica lead: the current
// leader, if another, is replaced (SIGTERM, so it releases the Lease) until
// the skewed one takes it. The step ends once the skewed replica has held
// the Lease, with skewed stamps, for a lease duration and more while the
// others watched it. No one may take a live Lease meanwhile or later
// (double leadership, judged from the audit log).
func (x *runner) skewClock(ctx context.Context, r *rand.Rand, n int) error {
	if x.skew == nil {
		return fmt.Errorf("skew-clock: no skew webhook")
	}
	slot := r.IntN(len(x.sup.processes()))
	skew := -clockSkew
	if n%2 == 0 {
		skew = clockSkew
	}
	if err := x.skew.configure(ctx, x.w.c, slotUser(slot), skew); err != nil {
		return err
	}
	x.w.logf("skew-clock: slot %d's Lease stamps now %v off", slot, skew)
	begin := time.Now()
	var skewedSince time.Time
	var leaderName string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, skewBound, true, func(ctx context.Context) (bool, error) {
		p, _, err := x.sup.leader(ctx, x.w.c)
		if err != nil || p == nil {
			return false, nil // between leaders, or the API server restarting
		}
		if p != x.sup.processes()[slot] {
			if !p.Exited() && !x.sup.wasTerminated(p) {
				x.w.logf("skew-clock: replacing the leader %s so that slot %d may lead", p.Name, slot)
				return false, x.sup.terminate(p)
			}
			return false, nil
		}
		leaderName = p.Name
		l, err := x.w.c.Kube.CoordinationV1().Leases(framework.ManagerNamespace).Get(ctx, x.sup.targetLease(), metav1.GetOptions{})
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		// The stamps are skewed: renewTime is about skew off the clock here.
		if off := l.Spec.RenewTime.Sub(time.Now()) - skew; off < -5*time.Second || off > 5*time.Second {
			skewedSince = time.Time{}
			return false, nil
		}
		if skewedSince.IsZero() {
			skewedSince = time.Now()
		}
		return time.Since(skewedSince) > leaseDuration+2*retryPeriod, nil
	})
	if err != nil {
		return fmt.Errorf("skew-clock: slot %d did not hold the Lease with skewed stamps for %v within %v: %w",
			slot, leaseDuration+2*retryPeriod, skewBound, err)
	}
	x.w.logf("skew-clock: %s held the Lease with stamps %v off for %v (%v after the skew began, %d writes skewed so far)",
		leaderName, skew, time.Since(skewedSince).Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond), x.skew.mutated.Load())
	return nil
}
