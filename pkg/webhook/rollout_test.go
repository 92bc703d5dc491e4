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
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"

	"github.com/ndsl/controller-manager/pkg/testing/tcpbalancer"
)

// A rollout of the webhook's replicas loses no request: clients keep
// posting through a stand-in Service while one of two replicas shuts down
// as the manager does (CloseConnections when its lame duck begins, then the
// end of its serving context, while the stand-in still sends it new
// connections for a while), three times over; and they speak HTTP/2 with
// it, where a shutdown is a GOAWAY (ReloadingTLSConfig says why). The
// HTTP/1.1 race this guards against (a connection closed as a request is
// sent on it) is too rare to show here on demand.
func TestShutdownOfOneReplicaLosesNoRequest(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cert, key, roots, _ := newCert(t)
	certs := &settableCerts{}
	certs.set(cert, key)
	balancer, err := tcpbalancer.New()
	if err != nil {
		t.Fatal(err)
	}
	defer balancer.Close()
	// As client-go's transports: HTTP/2 where the server offers it.
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"},
		ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 25}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	var sent, failed atomic.Int64
	var lastErr atomic.Value
	post := func() {
		req, err := http.NewRequest(http.MethodPost, "https://"+balancer.Addr()+"/validate/apps", bytes.NewReader(appCreateReview))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		sent.Add(1)
		if err != nil {
			failed.Add(1)
			lastErr.Store(err.Error())
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.ProtoMajor != 2 {
			failed.Add(1)
			lastErr.Store("answered over " + res.Proto + ", want HTTP/2")
		}
		if res.StatusCode != http.StatusOK {
			failed.Add(1)
			lastErr.Store(res.Status)
		}
	}
	// more waits until the clients have sent n more requests.
	more := func(n int64) {
		t.Helper()
		target := sent.Load() + n
		if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return sent.Load() >= target, nil
		}); err != nil {
			t.Fatalf("the clients sent %d requests, want %d", sent.Load(), target)
		}
	}

	stayCtx, stopStay := context.WithCancel(ctx)
	defer stopStay()
	_, stay := allowingServer(stayCtx, t, certs)
	// The balancer has a backend before the load starts: without one it
	// resets the connection, which no Service does.
	balancer.Set(stay)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Paced, as the API server's calls are: its kept-alive connections sit
	// idle between them, and a server closes idle ones when it shuts down.
	for range 8 {
		wg.Go(func() {
			tick := time.NewTicker(3 * time.Millisecond)
			defer tick.Stop()
			for loadCtx.Err() == nil {
				post()
				<-tick.C
			}
		})
	}
	for round := range 3 {
		goingCtx, stopGoing := context.WithCancel(ctx)
		going, goingAddr := allowingServer(goingCtx, t, certs)
		balancer.Add(goingAddr)
		more(300)
		going.CloseConnections() // the lame duck begins
		more(300)
		stopGoing() // the lame duck ends, and new connections still come
		more(300)
		balancer.Remove(goingAddr) // the endpoints catch up, late
		select {
		case <-going.Stopped():
		case <-time.After(MaxStopTime() + 10*time.Second):
			t.Fatalf("round %d: the replica did not stop", round)
		}
		more(300)
	}
	stopLoad()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during three shutdowns of a replica (last: %v)", n, sent.Load(), lastErr.Load())
	}
	t.Logf("%d requests, %d failed", sent.Load(), failed.Load())
}
