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

// process is one running component.
type process struct {
	name string
	cmd  *exec.Cmd
	tail *tailBuffer
	log  io.WriteCloser // the component's log destination, closed after exit

	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed
}

// component describes how to run a component; start may be called again to
// restart it (RestartAPIServer).
type component struct {
	name string
	path string
	args []string
	env  []string // added to os.Environ()
}

// startProcess starts c through sp, sending its output to logs (when non-nil)
// or appending it to <dir>/<name>.log.
func startProcess(sp *Spawner, c component, dir string, logs *sharedWriter) (*process, error) {
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
	p := &process{name: c.name, tail: newTailBuffer(16 << 10), log: dest, done: make(chan struct{})}

	cmd := exec.Command(c.path, c.args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), c.env...)
	out := io.MultiWriter(dest, p.tail)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so Stop can kill the component and anything it forked.
		Setpgid: true,
		// Killed if the thread that started it dies; sp keeps that thread alive
		// until Stop, so this fires only when the test binary itself dies.
		Pdeathsig: syscall.SIGKILL,
	}
	// Do not let a stray holder of the output pipe block Wait forever.
	cmd.WaitDelay = 2 * time.Second
	p.cmd = cmd

	if err := sp.Start(cmd); err != nil {
		_ = dest.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", c.name, c.path, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		_ = dest.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes an exit that nobody asked for, with the end of the output.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited unexpectedly (%v); last output:\n%s", p.name, p.waitErr, p.tail.lastLines(30))
}

// stop sends SIGTERM to the process group, kills the group if it has not
// exited within stopGrace, and waits for the exit. It is safe to call more
// than once.
func (p *process) stop() {
	if !p.exited() {
		_ = signalGroup(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	// Anything the component forked into its group goes with it.
	_ = signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
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
