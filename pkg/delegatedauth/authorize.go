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
	"encoding/json"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/util/retry"
)

// accessReviewer asks, with a SubjectAccessReview, whether a user may use an
// HTTP verb on a non-resource path, and remembers the answer for a while so
// that a scrape every few seconds costs the API server little.
type accessReviewer struct {
	reviews           authorizationv1client.SubjectAccessReviewInterface
	backoff           wait.Backoff
	timeout           time.Duration
	allowTTL, denyTTL time.Duration
	answers           *cache.LRUExpireCache
}

// verdict is one remembered answer.
type verdict struct {
	allowed bool
	reason  string
}

// answersKept bounds the cache: distinct users times paths, a handful in practice.
const answersKept = 1024

// allowed reports whether u may send verb to path, with the API server's
// reason when it may not.
func (r *accessReviewer) allowed(ctx context.Context, u user.Info, verb, path string) (verdict, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  u.GetName(),
		UID:                   u.GetUID(),
		Groups:                u.GetGroups(),
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if extra := u.GetExtra(); len(extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(extra))
		for k, v := range extra {
			spec.Extra[k] = v
		}
	}
	// The spec is the key: it holds everything the answer depends on.
	raw, err := json.Marshal(spec)
	if err != nil {
		return verdict{}, err
	}
	key := string(raw)
	if v, ok := r.answers.Get(key); ok {
		return v.(verdict), nil
	}

	var result *authorizationv1.SubjectAccessReview
	err = retry.OnError(r.backoff, transient, func() error {
		callCtx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		var err error
		result, err = r.reviews.Create(callCtx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return verdict{}, fmt.Errorf("reviewing access to %s %s: %w", verb, path, err)
	}
	v := verdict{allowed: result.Status.Allowed && !result.Status.Denied, reason: result.Status.Reason}
	ttl := r.denyTTL
	if v.allowed {
		ttl = r.allowTTL
	}
	r.answers.Add(key, v, ttl)
	return v, nil
}
