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

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

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
	cfg.WarningHandlerWithContext = &onceWarnings{}
	return rest.AddUserAgent(cfg, "controller-manager"), nil
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

// jsonConfig switches a config to JSON, the only encoding custom resources have.
func jsonConfig(cfg *rest.Config) *rest.Config {
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	return cfg
}
