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

package serving

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// The lame duck fails its check from the moment ctx ends, keeps the
// servers' context alive for the delay and ends it in Finish, after the
// delay and not before.
func TestLameDuck(t *testing.T) {
	const delay = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	l := NewLameDuck(ctx, delay)
	l.Started()
	check := l.Check()
	req := httptest.NewRequest("GET", "/readyz", nil)
	if err := check.Check(req); err != nil {
		t.Fatalf("check before shutdown: %v", err)
	}

	cancel()
	begun := time.Now()
	// AfterFunc runs in its own goroutine.
	for check.Check(req) == nil {
		if time.Since(begun) > time.Second {
			t.Fatal("the check still passes a second after shutdown began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if l.serving.Err() != nil {
		t.Fatal("the servers' context ended with ctx, before the delay")
	}
	l.Finish(ctx)
	if l.serving.Err() == nil {
		t.Error("the servers' context is still alive after finish")
	}
	if took := time.Since(begun); took < delay-10*time.Millisecond {
		t.Errorf("finish returned %s after shutdown began, before the %s delay", took, delay)
	}
}

// A manager that is never Run still closes its servers after the delay.
func TestLameDuckWithoutRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := NewLameDuck(ctx, 10*time.Millisecond)
	cancel()
	select {
	case <-l.serving.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the servers' context outlived ctx without Run")
	}
}

// WhenBegun's functions run once, when shutdown begins, or at once when it
// has begun: the webhook server is told to close connections from SIGTERM on.
func TestLameDuckWhenBegun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := NewLameDuck(ctx, time.Hour)
	l.Started()
	calls := make(chan string, 3)
	l.WhenBegun(func() { calls <- "before" })
	select {
	case c := <-calls:
		t.Fatalf("%s called before shutdown began", c)
	default:
	}
	cancel()
	select {
	case c := <-calls:
		if c != "before" {
			t.Fatalf("called %s, want before", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not called 5 s after shutdown began")
	}
	l.WhenBegun(func() { calls <- "after" })
	l.begin()
	if got := len(calls); got != 1 || <-calls != "after" {
		t.Errorf("after shutdown began: %d more calls, want only the late one, at once", got)
	}
	l.Stop()
}
