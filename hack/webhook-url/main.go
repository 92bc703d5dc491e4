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

// Command webhook-url reads manifests (a YAML stream, e.g. from kubectl
// kustomize manifests/default) and writes only the CRDs and the webhook
// configurations, with every webhook pointed at --base instead of the
// in-cluster Service. hack/run.sh uses it so that the local API server
// calls the manager running on this machine.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ndsl/controller-manager/pkg/testing/webhookurl"
)

func main() {
	base := flag.String("base", "https://127.0.0.1:9443", "URL the webhook paths are appended to")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *base); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-url:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, base string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(in, 4096)
	var buf bytes.Buffer
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		if obj.Object == nil || (obj.GetKind() != "CustomResourceDefinition" && obj.GetKind() != "MutatingWebhookConfiguration" && obj.GetKind() != "ValidatingWebhookConfiguration") {
			continue
		}
		if _, err := webhookurl.Rewrite(obj, base); err != nil {
			return err
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	_, err := out.Write(buf.Bytes())
	return err
}
