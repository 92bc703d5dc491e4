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

package main

import (
	"testing"
	"time"
)

func TestParseTraces(t *testing.T) {
	out := `File: controller-manager
Type: cpu
Duration: 30s, Total samples = 100ms (0.33%)
-----------+-------------------------------------------------------
      20ms   runtime.memclrNoHeapPointers
             runtime.mallocgc
             encoding/json.Marshal
             github.com/ndsl/controller-manager/pkg/controller.(*Worker).processNextItem
             runtime.goexit
-----------+-------------------------------------------------------
     bench:  client
      30ms   k8s.io/apimachinery/pkg/runtime/serializer/protobuf.(*Serializer).Decode
             k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive
-----------+-------------------------------------------------------
      1.5s   runtime.scanobject
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      10ms   runtime.spanClass.sizeclass (inline)
             runtime.mallocgc
             sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[go.shape.struct { Name string }]).reconcileHandler
-----------+-------------------------------------------------------
      40ms   runtime.futex
             runtime.findRunnable
-----------+-------------------------------------------------------
`
	b, err := parseTraces(out, cpuParts)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	want := []time.Duration{ms(30), ms(30), 0, 0, ms(1500), 0, ms(40)}
	if len(b.parts) != len(want) {
		t.Fatalf("%d parts, want %d", len(b.parts), len(want))
	}
	for i := range want {
		if b.parts[i] != want[i] {
			t.Errorf("%s: %v, want %v", partNames(cpuParts)[i], b.parts[i], want[i])
		}
	}
	if b.total != ms(1600) || b.allocation != ms(30) {
		t.Errorf("total %v, allocation %v; want 1.6s and 30ms", b.total, b.allocation)
	}
}

// TestAPIServerParts: a write's storage, run by the finisher's goroutine,
// counts as the write; a request still in the filters counts as filters;
// the etcd client's watch as etcd.
func TestAPIServerParts(t *testing.T) {
	out := `-----------+-------------------------------------------------------
      10ms   k8s.io/apiserver/pkg/storage/etcd3.(*store).GuaranteedUpdate
             k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update
             k8s.io/apiserver/pkg/endpoints/handlers/finisher.finishRequest.func1
-----------+-------------------------------------------------------
      20ms   k8s.io/apiserver/pkg/endpoints/filters.WithAuthentication.withAuthentication.func1
             net/http.HandlerFunc.ServeHTTP
-----------+-------------------------------------------------------
      30ms   k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).processEvent
-----------+-------------------------------------------------------
      40ms   k8s.io/apiserver/pkg/storage/cacher.(*cacheWatcher).processInterval
             k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer).HandleHTTP
             k8s.io/apiserver/pkg/endpoints/filters.WithAuthorization.func1
-----------+-------------------------------------------------------
`
	b, err := parseTraces(out, apiserverParts)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	want := []time.Duration{ms(10), 0, ms(40), ms(30), ms(20), 0, 0, 0}
	for i := range want {
		if b.parts[i] != want[i] {
			t.Errorf("%s: %v, want %v", partNames(apiserverParts)[i], b.parts[i], want[i])
		}
	}
}
