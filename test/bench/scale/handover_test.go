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
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFirstReconcilesReadsTheReceiversLog(t *testing.T) {
	log := `I1129 18:22:21.100000    8210 worker.go:81] "Starting workers" controller="app-1-of-4" count=5
I1129 18:22:21.000001    8210 worker.go:90] "First reconcile" controller="app-0-of-4" afterWorkersStarted="1ms"
I1129 18:22:22.212972    8210 worker.go:90] "First reconcile" controller="app-1-of-4" afterWorkersStarted="2.1ms"
I1129 18:22:25.500000    8210 worker.go:90] "First reconcile" controller="app-1-of-4" afterWorkersStarted="3ms"
`
	path := filepath.Join(t.TempDir(), "manager.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 29, 18, 22, 21, 500000000, time.Local)
	got, err := firstReconciles(path, since)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 29, 18, 22, 22, 212972000, time.Local)
	if len(got) != 1 || !got["app-1-of-4"].Equal(want) {
		t.Fatalf("first reconciles since %v: %v, want only app-1-of-4 at %v", since, got, want)
	}

	released := want.Add(-150 * time.Millisecond)
	times, missing, err := handoverTimes(map[string]string{"app-1-of-4": path, "app-2-of-4": path}, since,
		func(string) time.Time { return released })
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 1 || times[0] != 150*time.Millisecond || len(missing) != 1 || missing[0] != "app-2-of-4" {
		t.Fatalf("handovers %v, missing %v; want [150ms] and [app-2-of-4]", times, missing)
	}
}
