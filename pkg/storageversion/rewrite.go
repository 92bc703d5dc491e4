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

package storageversion

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pageSize is how many objects one list request returns.
const pageSize = 500

// ListPage lists one page of a CRD's objects at its storage version, as the
// API server pages them by opts' Limit and Continue: the items and the
// continue token of the next page, empty after the last.
type ListPage[T any] func(ctx context.Context, opts metav1.ListOptions) (items []T, next string, err error)

// RewriteEach lists every object, a page at a time, and writes each back
// with write, unchanged, at the resourceVersion it was listed at: the API
// server re-encodes it at the storage version, and writes it to etcd only
// if that changes its bytes. A Conflict or NotFound counts as done: someone
// wrote or deleted the object since, which stored it at the storage version
// or removed it.
func RewriteEach[T any](ctx context.Context, list ListPage[T], write func(context.Context, T) error) (Rewritten, error) {
	var done Rewritten
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		items, next, err := list(ctx, opts)
		if err != nil {
			return done, fmt.Errorf("listing: %w", err)
		}
		for _, item := range items {
			switch err := write(ctx, item); {
			case err == nil:
				done.Written++
			case apierrors.IsConflict(err), apierrors.IsNotFound(err):
				done.Raced++
			default:
				return done, err
			}
		}
		if next == "" {
			return done, nil
		}
		opts.Continue = next
	}
}
