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

package certs

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

var testPolicy = Policy{
	Names:        []string{"webhook.ndsl-system.svc", "127.0.0.1"},
	CAValidity:   time.Hour,
	CertValidity: 10 * time.Minute,
}

func always(*x509.Certificate) bool { return true }
func never(*x509.Certificate) bool  { return false }

func mustPlan(t *testing.T, p Policy, now time.Time, data map[string][]byte, trusted TrustFunc) (map[string][]byte, []string) {
	t.Helper()
	out, changes, err := p.Plan(now, data, trusted)
	if err != nil {
		t.Fatalf("Plan at %s: %v", now, err)
	}
	return out, changes
}

// verifies checks that the serving certificate of servingFrom is trusted by
// the bundle of trustFrom for every name, at now.
func verifies(t *testing.T, servingFrom, trustFrom map[string][]byte, now time.Time) error {
	t.Helper()
	leaf, err := parseKeyPair(servingFrom[TLSCertKey], servingFrom[TLSKeyKey])
	if err != nil {
		return err
	}
	roots, err := certutil.NewPoolFromBytes(trustFrom[CABundleKey])
	if err != nil {
		return err
	}
	for _, name := range testPolicy.Names {
		if _, err := leaf.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now}); err != nil {
			return err
		}
	}
	return nil
}

func mustCerts(t *testing.T, pem []byte) []*x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(pem)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// droppedCAs counts the CAs of before's bundle missing from after's.
func droppedCAs(t *testing.T, before, after map[string][]byte) int {
	n := 0
	for _, c := range mustCerts(t, before[CABundleKey]) {
		if !containsCert(mustCerts(t, after[CABundleKey]), c) {
			n++
		}
	}
	return n
}

func bundleSize(t *testing.T, data map[string][]byte) int {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(data[CABundleKey])
	if err != nil {
		t.Fatal(err)
	}
	return len(certs)
}

func TestPlanIssuesOnceAndIsIdempotent(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, changes := mustPlan(t, testPolicy, now, map[string][]byte{"other": []byte("kept")}, always)
	if len(changes) == 0 {
		t.Fatal("nothing issued for an empty Secret")
	}
	if err := verifies(t, data, data, now); err != nil {
		t.Fatalf("issued serving certificate does not verify against the bundle: %v", err)
	}
	if string(data["other"]) != "kept" {
		t.Error("a key Plan does not own was dropped")
	}
	if n := bundleSize(t, data); n != 1 {
		t.Errorf("bundle holds %d CAs, want 1", n)
	}
	again, changes := mustPlan(t, testPolicy, now.Add(time.Minute), data, always)
	if len(changes) != 0 {
		t.Errorf("second plan changed %v", changes)
	}
	for k := range data {
		if string(again[k]) != string(data[k]) {
			t.Errorf("key %s changed with no change reported", k)
		}
	}
}

// Over two CA lifetimes, every change keeps both overlaps that make rotation
// safe with several replicas and API servers: a replica still serving the
// previous certificate is trusted by the new bundle, and a replica already
// serving the new certificate is trusted by the previous bundle.
func TestPlanRotationKeepsOverlap(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, _ := mustPlan(t, testPolicy, now, nil, always)
	firstCA := string(data[CACertKey])
	var leafRenewals, caPromotions, nextIssued, pruned int
	for end := now.Add(2*testPolicy.CAValidity + 10*time.Minute); now.Before(end); now = now.Add(20 * time.Second) {
		out, changes := mustPlan(t, testPolicy, now, data, always)
		if len(changes) == 0 {
			continue
		}
		if err := verifies(t, data, out, now); err != nil {
			t.Fatalf("at %s after %v: previous serving certificate not trusted by the new bundle: %v", now, changes, err)
		}
		if err := verifies(t, out, data, now); err != nil {
			t.Fatalf("at %s after %v: new serving certificate not trusted by the previous bundle: %v", now, changes, err)
		}
		if next := NextCheck(now, out); !next.After(now) {
			t.Fatalf("at %s: next check %s is not in the future", now, next)
		}
		for _, c := range changes {
			switch {
			case strings.HasPrefix(c, "serving certificate due"):
				leafRenewals++
			case c == "promoted the next CA":
				caPromotions++
			case c == "issued the next CA into the bundle":
				nextIssued++
			case strings.HasPrefix(c, "issued a CA"), strings.HasPrefix(c, "promoted the next CA because"):
				t.Fatalf("at %s: the CA was replaced without overlap: %v", now, changes)
			}
		}
		if dropped := droppedCAs(t, data, out); dropped > 0 {
			pruned += dropped
			for _, c := range mustCerts(t, data[CABundleKey]) {
				if !containsCert(mustCerts(t, out[CABundleKey]), c) && now.Before(c.NotAfter) {
					t.Fatalf("at %s: CA %s left the bundle before it expired", now, c.Subject.CommonName)
				}
			}
		}
		data = out
	}
	if string(data[CACertKey]) == firstCA {
		t.Error("the CA was never rotated")
	}
	if leafRenewals < 5 || caPromotions < 2 || nextIssued < 2 || pruned < 1 {
		t.Errorf("renewals %d, CA promotions %d, next CAs %d, prunings %d: the schedule did not run", leafRenewals, caPromotions, nextIssued, pruned)
	}
}

func TestPlanWaitsForTrustBeforePromoting(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	data, _ := mustPlan(t, testPolicy, start, nil, always)
	data, _ = mustPlan(t, testPolicy, start.Add(31*time.Minute), data, never) // next CA issued
	if len(data[NextCACertKey]) == 0 {
		t.Fatal("no next CA at half of the CA's life")
	}
	ca := string(data[CACertKey])
	at := start.Add(45 * time.Minute) // past two thirds
	held, _ := mustPlan(t, testPolicy, at, data, never)
	if string(held[CACertKey]) != ca {
		t.Fatal("promoted a CA that the targets do not trust yet")
	}
	promoted, changes := mustPlan(t, testPolicy, at, held, always)
	if string(promoted[CACertKey]) != string(data[NextCACertKey]) {
		t.Fatalf("not promoted once trusted: %v", changes)
	}
	// An expiring CA is replaced by its successor even without trust:
	// nothing signed by an expired CA verifies anyway.
	expired, changes := mustPlan(t, testPolicy, start.Add(61*time.Minute), held, never)
	if string(expired[CACertKey]) != string(data[NextCACertKey]) {
		t.Fatalf("expired CA kept: %v", changes)
	}
}

func TestPlanRepairs(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good, _ := mustPlan(t, testPolicy, now, nil, always)
	tests := []struct {
		name    string
		edit    func(map[string][]byte)
		policy  Policy
		newCA   bool
		newLeaf bool
	}{
		{"corrupt serving key", func(d map[string][]byte) { d[TLSKeyKey] = []byte("junk") }, testPolicy, false, true},
		{"serving key of another cert", func(d map[string][]byte) { d[TLSKeyKey] = d[CAKeyKey] }, testPolicy, false, true},
		{"blank bundle", func(d map[string][]byte) { delete(d, CABundleKey) }, testPolicy, false, false},
		{"corrupt CA", func(d map[string][]byte) { d[CACertKey] = []byte("junk") }, testPolicy, true, true},
		{"names changed", func(map[string][]byte) {}, Policy{Names: []string{"other.svc"}, CAValidity: time.Hour, CertValidity: time.Minute}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range good {
				data[k] = v
			}
			tt.edit(data)
			out, changes := mustPlan(t, tt.policy, now, data, always)
			if len(changes) == 0 {
				t.Fatal("nothing repaired")
			}
			if got := string(out[CACertKey]) != string(good[CACertKey]); got != tt.newCA {
				t.Errorf("new CA %v, want %v (%v)", got, tt.newCA, changes)
			}
			if got := string(out[TLSCertKey]) != string(good[TLSCertKey]); got != tt.newLeaf {
				t.Errorf("new serving certificate %v, want %v (%v)", got, tt.newLeaf, changes)
			}
			if string(out[CABundleKey]) == "" {
				t.Error("empty bundle")
			}
			if _, changes := mustPlan(t, tt.policy, now, out, always); len(changes) != 0 {
				t.Errorf("repair not stable: %v", changes)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := testPolicy.Validate(); err != nil {
		t.Error(err)
	}
	if err := (Policy{CAValidity: time.Hour}).Validate(); err == nil {
		t.Error("empty policy accepted")
	}
}

// Two replicas whose names differ converge on one certificate covering both:
// a certificate with more names than a replica's is good enough for it, and
// a replica that lacks names adds them to the ones already there.
func TestPlanNamesConverge(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := Policy{Names: []string{"svc.ns.svc", "127.0.0.1"}, CAValidity: time.Hour, CertValidity: 30 * time.Minute}
	b := a
	b.Names = []string{"svc.ns.svc", "extra.example"}
	data, _ := mustPlan(t, a, now, nil, always)
	data, changes := mustPlan(t, b, now, data, always)
	if len(changes) == 0 {
		t.Fatal("b's missing name was not added")
	}
	leaf, err := parseKeyPair(data[TLSCertKey], data[TLSKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	if got := certNames(leaf.cert); !coversNames(leaf.cert, a.Names) || !coversNames(leaf.cert, b.Names) {
		t.Fatalf("certificate names %v do not cover both %v and %v", got, a.Names, b.Names)
	}
	if leaf.cert.Subject.CommonName != "svc.ns.svc" {
		t.Errorf("common name %q, want the replica's first name", leaf.cert.Subject.CommonName)
	}
	for _, p := range []Policy{a, b} {
		if _, changes := mustPlan(t, p, now, data, always); len(changes) != 0 {
			t.Errorf("policy %v rewrites a certificate that covers its names: %v", p.Names, changes)
		}
	}
}
