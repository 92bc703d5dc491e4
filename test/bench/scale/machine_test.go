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
