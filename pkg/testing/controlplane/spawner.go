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

package controlplane

import (
	"os/exec"
	"runtime"
)

// Spawner starts child processes from one OS thread that stays alive until
// Close. Pdeathsig fires when the *thread* that forked a child exits, not the
// process, so forking from arbitrary goroutines could kill children early.
type Spawner struct {
	requests chan func()
}

// NewSpawner starts the spawner's thread.
func NewSpawner() *Spawner {
	s := &Spawner{requests: make(chan func())}
	go func() {
		// Never unlocked: the thread exits together with this goroutine after
		// close, which also delivers Pdeathsig to anything still running.
		runtime.LockOSThread()
		for f := range s.requests {
			f()
		}
	}()
	return s
}

// Start runs cmd.Start on the spawner's thread.
func (s *Spawner) Start(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	s.requests <- func() { errc <- cmd.Start() }
	return <-errc
}

// Close ends the spawner's thread. Call it only once every child has exited.
func (s *Spawner) Close() {
	close(s.requests)
}
