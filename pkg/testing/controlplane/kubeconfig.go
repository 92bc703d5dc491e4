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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AdminToken is the static bearer token of the admin user (group system:masters).
const AdminToken = "admin-token"

// Client rate limits of the configs this package returns: high enough that the
// API server, not client-go, is the limit in tests. Benchmarks that measure a
// controller under its production limits must set their own.
const (
	ClientQPS   = 5000
	ClientBurst = 10000
)

// WriteKubeconfig writes a kubeconfig for server that authenticates with a
// bearer token. The server's self-signed certificate is not verified.
func WriteKubeconfig(path, server, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["controlplane"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["controlplane"] = &clientcmdapi.Context{Cluster: "controlplane", AuthInfo: "user"}
	cfg.CurrentContext = "controlplane"
	return clientcmd.WriteToFile(*cfg, path)
}

// tokenConfig is the rest.Config WriteKubeconfig describes, with the high
// client rate limits.
func tokenConfig(server, token string) *rest.Config {
	return &rest.Config{
		Host:            server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             ClientQPS,
		Burst:           ClientBurst,
	}
}
