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

package delegatedauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/util/retry"
)

// tokenReviewer authenticates a bearer token with a TokenReview.
type tokenReviewer struct {
	reviews authenticationv1client.TokenReviewInterface
	backoff wait.Backoff
	timeout time.Duration
}

var _ authenticator.Token = &tokenReviewer{}

// AuthenticateToken reports the token's user, false for a token the API
// server does not know, or an error when it could not be asked.
func (r *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	var result *authenticationv1.TokenReview
	err := retry.OnError(r.backoff, transient, func() error {
		callCtx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		var err error
		result, err = r.reviews.Create(callCtx, review, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("reviewing the bearer token: %w", err)
	}
	if !result.Status.Authenticated {
		if result.Status.Error != "" {
			return nil, false, errors.New(result.Status.Error)
		}
		return nil, false, nil
	}
	u := result.Status.User
	info := &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		info.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			info.Extra[k] = v
		}
	}
	return &authenticator.Response{User: info}, true, nil
}
