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

package tcpbalancer

import (
	"bufio"
	"net"
	"testing"
)

// echoName serves one line, its name, to every connection.
func echoName(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

func dialName(b *Balancer) (string, error) {
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		return "", err
	}
	defer c.Close()
	return bufio.NewReader(c).ReadString('\n')
}

func TestBalancer(t *testing.T) {
	b, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := dialName(b); err == nil {
		t.Errorf("no backend: read %q, want the connection closed", got)
	}
	a, c := echoName(t, "a"), echoName(t, "c")
	b.Set(a, c)
	seen := map[string]int{}
	for range 4 {
		name, err := dialName(b)
		if err != nil {
			t.Fatal(err)
		}
		seen[name]++
	}
	if seen["a\n"] != 2 || seen["c\n"] != 2 {
		t.Errorf("round robin over two backends: %v", seen)
	}
	// A backend that is gone is skipped.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	b.Set(deadAddr, a)
	for range 3 {
		if name, err := dialName(b); err != nil || name != "a\n" {
			t.Errorf("with a dead backend: %q, %v", name, err)
		}
	}
	b.Remove(a)
	if got, err := dialName(b); err == nil {
		t.Errorf("only a dead backend: read %q", got)
	}
}
