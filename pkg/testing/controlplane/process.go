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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before its
// process group is killed.
const stopGrace = 10 * time.Second

// Process is a child process in its own process group, started by a
// Spawner: a control plane component, or a manager under test in the e2e
// suite and the benchmark.
type Process struct {
	// Name names the process in messages.
	Name string

	cmd  *exec.Cmd
	tail *tailBuffer
	log  io.WriteCloser // its output's destination, closed after exit

	done     chan struct{} // closed when the process has exited
	waitErr  error         // valid after done is closed
	exitedAt time.Time     // valid after done is closed
}

// Command says what to run.
type Command struct {
	// Name names the process in messages.
	Name string
	Path string
	Args []string
	// Env is added to os.Environ().
	Env []string
	// Dir is the working directory; empty: this process's.
	Dir string
	// Log receives stdout and stderr and is closed after the exit.
	Log io.WriteCloser
}

// StartProcess starts c on the spawner's thread, in its own process group
// (so Stop can kill it and anything it forked) and with a parent-death
// signal (so it dies with a crashed test binary).
func (s *Spawner) StartProcess(c Command) (*Process, error) {
	p := &Process{Name: c.Name, tail: newTailBuffer(16 << 10), log: c.Log, done: make(chan struct{})}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	out := io.MultiWriter(c.Log, p.tail)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Signals to the test's process group (Ctrl-C) do not reach it.
		Setpgid: true,
		// Killed if the thread that started it dies; the Spawner keeps that
		// thread alive until Close, so this fires only when the test binary
		// itself dies.
		Pdeathsig: syscall.SIGKILL,
	}
	// Do not let a stray holder of the output pipe block Wait forever.
	cmd.WaitDelay = 2 * time.Second
	p.cmd = cmd

	if err := s.Start(cmd); err != nil {
		_ = c.Log.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", c.Name, c.Path, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		p.exitedAt = time.Now()
		_ = c.Log.Close()
		close(p.done)
	}()
	return p, nil
}

// component describes how to run a control plane component; start may be
// called again to restart it (RestartAPIServer).
type component struct {
	name string
	path string
	args []string
	env  []string // added to os.Environ()
}

// startProcess starts component c, sending its output to logs (when non-nil)
// or appending it to <dir>/<name>.log.
func startProcess(sp *Spawner, c component, dir string, logs *sharedWriter) (*Process, error) {
	var dest io.WriteCloser
	if logs != nil {
		dest = logs.prefixed(c.name)
	} else {
		f, err := os.OpenFile(filepath.Join(dir, c.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening the log of %s: %w", c.name, err)
		}
		dest = f
	}
	return sp.StartProcess(Command{Name: c.name, Path: c.path, Args: c.args, Env: c.env, Dir: dir, Log: dest})
}

// Pid is the process id, also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned (nil after exit status 0);
// nil while it runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// ExitedAt is when the process was seen to exit (zero while it runs).
func (p *Process) ExitedAt() time.Time {
	if !p.Exited() {
		return time.Time{}
	}
	return p.exitedAt
}

// ExitCode is the exit status once exited: -1 if a signal ended it, or while
// it still runs.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// ExitDescription says how the process ended, e.g. "exit status 1" or
// "signal: killed".
func (p *Process) ExitDescription() string {
	if !p.Exited() {
		return "running"
	}
	return p.cmd.ProcessState.String()
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("signalling %s: it has exited", p.Name)
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits until the process exits or timeout passes.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s still running after %s", p.Name, timeout)
	}
}

// Stop sends SIGTERM to the process group, kills the group if the process
// has not exited within grace, and waits for the exit; the error says it had
// to be killed. Anything it forked into its group goes with it. It is safe
// to call more than once.
func (p *Process) Stop(grace time.Duration) error {
	var err error
	if !p.Exited() {
		_ = signalGroup(p.Pid(), syscall.SIGTERM)
		if p.Wait(grace) != nil {
			_ = signalGroup(p.Pid(), syscall.SIGKILL)
			<-p.done
			err = fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.Name, grace)
		}
	}
	_ = signalGroup(p.Pid(), syscall.SIGKILL)
	return err
}

// Kill kills the process group at once (kill -9) and waits for the exit.
func (p *Process) Kill() {
	_ = signalGroup(p.Pid(), syscall.SIGKILL)
	<-p.done
}

// LogTail returns the last n lines of the process's output.
func (p *Process) LogTail(n int) string { return p.tail.lastLines(n) }

// stop stops a component with the components' grace period.
func (p *Process) stop() { _ = p.Stop(stopGrace) }

// exitError describes an exit that nobody asked for, with the end of the output.
func (p *Process) exitError() error {
	return fmt.Errorf("%s exited unexpectedly (%v); last output:\n%s", p.Name, p.waitErr, p.tail.lastLines(30))
}

// signalGroup signals the process group led by pid, ignoring a group that is
// already gone.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// lastLines is a helper for error messages: the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
