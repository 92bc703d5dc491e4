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

package chaos

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// failedReconcile matches the log line of a reconcile that failed and is
// retried (pkg/controller's worker), with its controller and key.
var failedReconcile = regexp.MustCompile(`"Reconcile failed, will retry".* controller="([a-z]+)" key="([^"]+)"`)

// failedReconciles counts, per owner, the failed reconciles in the
// managers' logs under dir. A controller's status says what happened,
// failures included (a child write the lease guard cancelled because an
// overloaded API server had not answered by the renew deadline): each is a
// change status may show, and its retry another.
func failedReconciles(dir string) (map[objectKey]int, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	out := map[objectKey]int{}
	for _, path := range paths {
		if err := countFailedReconciles(path, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func countFailedReconciles(path string, out map[objectKey]int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		m := failedReconcile.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, name, _ := strings.Cut(m[2], "/")
		switch m[1] {
		case "app":
			out[appKey(ns, name)]++
		case "ingress":
			out[serviceKey(ns, name)]++
		case "pipeline":
			out[pipelineKey(m[2])]++
		}
	}
	return sc.Err()
}
