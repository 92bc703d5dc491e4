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

// Command web is the e2e suite's stand-in for the samples' nginx on a
// cluster that cannot pull images (make e2e-kind loads it into kind).
//
//	web                      serve every path with the host name on port 80
//	                         (an App's default), 8080 and $LISTEN_PORT (a
//	                         Pipeline step's); arguments are ignored, as a
//	                         Pipeline passes a step's args to its image.
//	                         With $LISTEN_PORT only that port must be
//	                         served: a non-root user may not bind port 80
//	web get URL [TOKENFILE]  GET URL once, with the token in TOKENFILE as
//	                         bearer if given; print "status N", or
//	                         "error: ..." if the request failed. HTTPS is
//	                         verified against the CA bundle in the file
//	                         $CA_FILE (for the URL's host name), and not
//	                         verified without it
package main

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) == 3 && os.Args[1] == "cert" {
		os.Exit(cert(os.Args[2]))
	}
	serve()
}

func serve() {
	host, _ := os.Hostname()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", host, r.URL.Path)
	})
	ports := []string{"80", "8080"}
	if p := os.Getenv("LISTEN_PORT"); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			log.Fatalf("LISTEN_PORT=%q: %v", p, err)
		}
		ports = append(ports, p)
	}
	listen := os.Getenv("LISTEN_PORT")
	errs := make(chan error)
	seen := map[string]bool{}
	for _, p := range ports {
		if seen[p] {
			continue
		}
		seen[p] = true
		go func() {
			err := http.ListenAndServe(":"+p, handler)
			// A Pipeline step needs only $LISTEN_PORT: run as non-root
			// without NET_BIND_SERVICE (PodSecurity restricted), port 80
			// may be refused, and that is no reason to stop.
			if listen != "" && p != listen {
				log.Printf("web: not serving on port %s: %v", p, err)
				return
			}
			errs <- err
		}()
	}
	log.Printf("web: serving on ports %v", ports)
	log.Fatal(<-errs)
}

func get(url string, tokenFile []string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	if len(tokenFile) > 0 {
		token, err := os.ReadFile(tokenFile[0])
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	tlsConfig := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // only where no CA is given
	if caFile := os.Getenv("CA_FILE"); caFile != "" {
		roots, err := certutil.NewPool(caFile)
		if err != nil {
			fmt.Println("error:", err)
			return 1
		}
		tlsConfig = &tls.Config{RootCAs: roots}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Do(req)
	if err != nil {
		// The answer, not a failure of the command: a test may expect it.
		fmt.Println("error:", err)
		return 0
	}
	defer resp.Body.Close()
	fmt.Println("status", resp.StatusCode)
	return 0
}

// cert prints the SHA-256 of the leaf certificate served at addr
// (host:port), so that a test can tell which certificate a pod serves.
func cert(addr string) int {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the certificate is read
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		fmt.Println("error: no certificate")
		return 1
	}
	fmt.Printf("sha256 %x\n", sha256.Sum256(certs[0].Raw))
	return 0
}
