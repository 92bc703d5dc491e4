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
	"bytes"
	"io"
	"sync"
)

// tailBuffer keeps the last bytes written to it, for error messages.
type tailBuffer struct {
	mu   sync.Mutex
	max  int
	data []byte
}

func newTailBuffer(max int) *tailBuffer {
	return &tailBuffer{max: max}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.data = append(t.data, p...)
	if over := len(t.data) - t.max; over > 0 {
		t.data = append(t.data[:0], t.data[over:]...)
	}
	return len(p), nil
}

// lastLines returns up to n of the last complete or partial lines written.
func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.data), n)
}

// sharedWriter serialises whole lines from several components into one writer.
type sharedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// prefixed returns a writer that writes each line to the shared writer as
// "[name] line".
func (s *sharedWriter) prefixed(name string) io.WriteCloser {
	return &prefixWriter{shared: s, prefix: []byte("[" + name + "] ")}
}

// prefixWriter buffers a component's partial line until its newline arrives.
type prefixWriter struct {
	shared  *sharedWriter
	prefix  []byte
	partial []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		if err := p.writeLine(p.partial[:i+1]); err != nil {
			return len(b), err
		}
		p.partial = p.partial[i+1:]
	}
}

// Close flushes a last line that had no newline.
func (p *prefixWriter) Close() error {
	if len(p.partial) == 0 {
		return nil
	}
	line := append(p.partial, '\n')
	p.partial = nil
	return p.writeLine(line)
}

func (p *prefixWriter) writeLine(line []byte) error {
	p.shared.mu.Lock()
	defer p.shared.mu.Unlock()
	_, err := p.shared.w.Write(append(append([]byte{}, p.prefix...), line...))
	return err
}
