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
	"testing"
	"time"
)

func TestProcStat(t *testing.T) {
	if ppid, err := parentPID(os.Getpid()); err != nil || ppid != os.Getppid() {
		t.Errorf("parentPID = %d, %v; want %d", ppid, err, os.Getppid())
	}
	// Burn some CPU so that at least one clock tick is counted.
	for begin := time.Now(); time.Since(begin) < 100*time.Millisecond; {
	}
	if cpu, err := procTimes(os.Getpid()); err != nil || cpu <= 0 {
		t.Errorf("procTimes = %s, %v; want > 0", cpu, err)
	}
	if _, err := procTimes(-1); err == nil {
		t.Error("procTimes of no process succeeded")
	}
}
