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

package controller

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// syncBuffer is a bytes.Buffer safe for the workers' concurrent logging.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A failed reconcile is reported at the default log level, with its key and
// error; a transient one (a conflict: the cache is behind) is retried
// quietly.
func TestWorkerLogsFailuresAtTheDefaultLevel(t *testing.T) {
	var out syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&out), textlogger.Verbosity(0)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()

	q := fastQueue()
	var c calls
	failing, conflicting := Key{Namespace: "ns", Name: "failing"}, Key{Namespace: "ns", Name: "conflicting"}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "deployments"}, "web", errors.New("the object has been modified"))
	w := &Worker{Name: "test-logging", Queue: q, Reconcile: func(_ context.Context, k Key) (Result, error) {
		if c.inc(k) > 1 {
			return Result{}, nil
		}
		if k == conflicting {
			return Result{}, conflict
		}
		return Result{}, errors.New("quota exceeded for deployments")
	}}
	done := make(chan struct{})
	go func() { w.Run(ctx, 2); close(done) }()
	q.Add(failing)
	q.Add(conflicting)
	waitFor(t, "both keys retried", func() bool { return c.get(failing) == 2 && c.get(conflicting) == 2 })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not stop")
	}

	logged := out.String()
	var failureLine string
	for _, line := range strings.Split(logged, "\n") {
		if strings.Contains(line, "quota exceeded for deployments") {
			failureLine = line
		}
	}
	if failureLine == "" || !strings.Contains(failureLine, "ns/failing") {
		t.Errorf("the failed reconcile of ns/failing is not logged at V(0) with its key and error; logged:\n%s", logged)
	}
	if strings.Contains(logged, "the object has been modified") {
		t.Errorf("a conflict was logged at V(0); transient errors are retried quietly; logged:\n%s", logged)
	}
}
