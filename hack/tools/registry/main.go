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

// Command registry serves an in-memory OCI registry (go-containerregistry's
// pkg/registry) for hack/kind/release-check.sh on each address given:
// go-containerregistry's own cmd/registry listens on localhost only, which
// kind's node containers cannot reach.
//
//	registry 127.0.0.1:5055 172.17.0.1:5055
package main

import (
	"log"
	"net"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: registry ADDRESS...")
	}
	handler := registry.New()
	var listeners []net.Listener
	for _, address := range os.Args[1:] {
		l, err := net.Listen("tcp", address)
		if err != nil {
			log.Fatalf("listening on %s: %v", address, err)
		}
		listeners = append(listeners, l)
	}
	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		log.Printf("serving on %s", l.Addr())
		go func() { errs <- http.Serve(l, handler) }()
	}
	log.Fatal(<-errs)
}
