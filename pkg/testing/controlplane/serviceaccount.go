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
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// serviceAccountTokenSeconds is the lifetime requested for ServiceAccount tokens.
const serviceAccountTokenSeconds = 24 * 60 * 60

// ServiceAccountKubeconfig creates the ServiceAccount namespace/name if it does
// not exist, gets it a token through the TokenRequest API and returns a config
// that authenticates as it, for RBAC tests. When path is not empty it also
// writes a kubeconfig with that token there.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name, path string) (*rest.Config, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	_, err := cp.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating service account %s/%s: %w", namespace, name, err)
	}
	expiration := int64(serviceAccountTokenSeconds)
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, name, err)
	}
	if path != "" {
		if err := WriteKubeconfig(path, cp.Config.Host, tr.Status.Token); err != nil {
			return nil, fmt.Errorf("writing the kubeconfig of service account %s/%s: %w", namespace, name, err)
		}
	}
	return tokenConfig(cp.Config.Host, tr.Status.Token), nil
}
