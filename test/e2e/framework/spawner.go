package framework

import (
	"os/exec"
	"runtime"
)

// spawner starts child processes from one OS thread that stays alive until
// close. Pdeathsig fires when the thread that forked a child exits, not the
// process, so forking from arbitrary goroutines could kill children early.
// (pkg/testing/controlplane does the same for its components.)
type spawner struct {
	requests chan func()
}

func newSpawner() *spawner {
	s := &spawner{requests: make(chan func())}
	go func() {
		// Never unlocked: the thread ends with this goroutine after close.
		runtime.LockOSThread()
		for f := range s.requests {
			f()
		}
	}()
	return s
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	s.requests <- func() { errc <- cmd.Start() }
	return <-errc
}

// close ends the spawner's thread. Call it only once every child has exited.
func (s *spawner) close() {
	close(s.requests)
}
