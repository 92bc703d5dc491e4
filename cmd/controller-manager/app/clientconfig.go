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

package app

import (
	"errors"
	"fmt"
	"os"
	"strings"

	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
)

// restConfig loads the client config from --kubeconfig, else the in-cluster
// config, else $KUBECONFIG and the default loading rules, and applies the
// rate-limit and content-type flags.
func restConfig(o options.GenericOptions) (*rest.Config, error) {
	cfg, err := loadRESTConfig(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = o.KubeAPIQPS
	cfg.Burst = o.KubeAPIBurst
	cfg.ContentType = o.ContentType
	cfg.AcceptContentTypes = o.ContentType + ",application/json"
	// The controllers read and write v1, the stored version of both CRDs;
	// should anything still ask for a deprecated version, each distinct
	// warning is logged once, not once per request.
	cfg.WarningHandler = rest.NewWarningWriter(warningLog{}, rest.WarningWriterOptions{Deduplicate: true})
	return rest.AddUserAgent(cfg, "controller-manager"), nil
}

// warningLog logs what client-go's warning writer writes.
type warningLog struct{}

func (warningLog) Write(p []byte) (int, error) {
	klog.Background().Info("The API server warned; further identical warnings are not logged",
		"warning", strings.TrimSpace(strings.TrimPrefix(string(p), "Warning: ")))
	return len(p), nil
}

func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading --kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("loading in-cluster config: %w", err)
	}
	cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, not in a cluster, and no usable $KUBECONFIG: %w", err)
	}
	return cfg, nil
}

// customResourceConfig switches a config to contentType, JSON or CBOR:
// custom resources have no protobuf.
func customResourceConfig(cfg *rest.Config, contentType string) *rest.Config {
	if contentType == "" {
		contentType = options.ContentTypeJSON
	}
	cfg.ContentType = contentType
	cfg.AcceptContentTypes = contentType
	return cfg
}

// allowCBOR turns on client-go's ClientsAllowCBOR gate, without which its
// clients neither encode nor decode CBOR, and keeps every other gate as
// client-go's defaults (and KUBE_FEATURE_* variables) say.
func allowCBOR() {
	clientfeatures.ReplaceFeatureGates(cborGates{clientfeatures.FeatureGates()})
}

type cborGates struct{ clientfeatures.Gates }

func (g cborGates) Enabled(f clientfeatures.Feature) bool {
	return f == clientfeatures.ClientsAllowCBOR || g.Gates.Enabled(f)
}

// inClusterNamespaceFile holds the pod's namespace when running in a cluster.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaseNamespace is the flag's value, else the pod's namespace, else "default".
func leaseNamespace(flag string) string {
	if flag != "" {
		return flag
	}
	if data, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return "default"
}
