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

// Package storageversion moves the objects of a CRD to its storage version
// after a release changed it: every object is written back unchanged, which
// has the API server store it at the storage version, then the CRD's
// status.storedVersions is set to that version alone, so that a later
// release may stop serving the others. hack/migrate-storage.sh is the same
// recipe by hand.
package storageversion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// CRDClient is what Migrate needs of a CustomResourceDefinition client.
type CRDClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error)
	UpdateStatus(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, opts metav1.UpdateOptions) (*apiextensionsv1.CustomResourceDefinition, error)
}

// Rewrite writes every object of a CRD back at its storage version, for
// instance with RewriteEach, and says how it went.
type Rewrite func(ctx context.Context) (Rewritten, error)

// Rewritten counts the objects of a Rewrite.
type Rewritten struct {
	// Written were written back.
	Written int
	// Raced were written or deleted by someone else since they were listed
	// (Conflict, NotFound), which stored them at the storage version or
	// removed them.
	Raced int
}

// retryBackoff spaces the attempts after a failure: from a second, doubling,
// up to five minutes.
var retryBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 20, Cap: 5 * time.Minute}

// Migrate moves the objects of the CRD called name to its storage version.
// When status.storedVersions is already the storage version alone, which is
// the case after the first success, it costs one GET and writes nothing.
// Else it runs rewrite, then sets status.storedVersions to the storage
// version alone. A failure is logged and retried with backoff until Migrate
// succeeds or ctx is done, whose error it then returns.
func Migrate(ctx context.Context, crds CRDClient, name string, rewrite Rewrite) error {
	return migrate(ctx, crds, name, rewrite, retryBackoff)
}

// Beside runs run, a controller's workers, with Migrate beside them: the
// migration ends when run returns, to be taken up by the next leader if
// unfinished.
func Beside(ctx context.Context, run func(context.Context), crds CRDClient, name string, rewrite Rewrite) {
	migrateCtx, cancel := context.WithCancel(ctx)
	var migrating sync.WaitGroup
	migrating.Go(func() { _ = Migrate(migrateCtx, crds, name, rewrite) })
	run(ctx)
	cancel()
	migrating.Wait()
}

func migrate(ctx context.Context, crds CRDClient, name string, rewrite Rewrite, backoff wait.Backoff) error {
	logger := klog.FromContext(ctx).WithValues("crd", name)
	ctx = klog.NewContext(ctx, logger)
	for {
		err := migrateOnce(ctx, crds, name, rewrite)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		delay := backoff.Step()
		logger.Error(err, "Storage version migration failed; retrying", "after", delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// migrateOnce is one attempt of Migrate.
func migrateOnce(ctx context.Context, crds CRDClient, name string, rewrite Rewrite) error {
	logger := klog.FromContext(ctx)
	crd, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the CRD: %w", err)
	}
	storage := StorageVersion(crd)
	if storage == "" {
		return errors.New("the CRD has no storage version")
	}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		logger.V(4).Info("Every object is stored at the storage version", "storageVersion", storage)
		return nil
	}
	logger.Info("Rewriting every object at the storage version", "storageVersion", storage, "storedVersions", crd.Status.StoredVersions)
	start := time.Now()
	done, err := rewrite(ctx)
	if err != nil {
		return fmt.Errorf("rewriting the objects at %s (%d written): %w", storage, done.Written, err)
	}
	logger.Info("Rewrote every object at the storage version", "storageVersion", storage,
		"written", done.Written, "writtenOrDeletedByOthers", done.Raced, "duration", time.Since(start).Round(time.Millisecond))

	// Written on the resourceVersion read before the rewrite: a conflict
	// re-reads, and a spec changed since (generation), which may have
	// changed the storage version meanwhile, starts over.
	generation, reread := crd.Generation, false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			latest, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading the CRD again: %w", err)
			}
			if latest.Generation != generation {
				return fmt.Errorf("the CRD's spec changed during the rewrite (generation %d, now %d)", generation, latest.Generation)
			}
			crd = latest
		}
		reread = true
		crd.Status.StoredVersions = []string{storage}
		_, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting status.storedVersions to [%s]: %w", storage, err)
	}
	logger.Info("Set status.storedVersions to the storage version alone", "storedVersions", []string{storage})
	return nil
}

// StorageVersion is the version crd stores its objects at; empty if none.
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
