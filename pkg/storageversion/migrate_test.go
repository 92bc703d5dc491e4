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
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

const crdName = "widgets.example.com"

var fastRetry = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}

// newCRDs is a fake API server holding one CRD storing v1, whose
// status.storedVersions is stored. Not NewClientset: its field manager
// has no schema for CRDs.
func newCRDs(stored ...string) *fake.Clientset {
	return fake.NewSimpleClientset(&apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crdName, Generation: 1},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1beta1", Served: true}, {Name: "v1", Served: true, Storage: true},
		}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	})
}

// writes are the client's requests that are not reads.
func writes(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	return out
}

func storedVersions(t *testing.T, c *fake.Clientset) []string {
	t.Helper()
	crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return crd.Status.StoredVersions
}

// countingRewrite counts its calls and fails the first failures of them.
func countingRewrite(calls *int, failures int) Rewrite {
	return func(context.Context) (Rewritten, error) {
		*calls++
		if *calls <= failures {
			return Rewritten{}, errors.New("the API server is unavailable")
		}
		return Rewritten{Written: 3}, nil
	}
}

func TestMigrateWritesNothingWhenOnlyTheStorageVersionIsStored(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newCRDs("v1")
	calls := 0
	if err := migrate(ctx, c.ApiextensionsV1().CustomResourceDefinitions(), crdName, countingRewrite(&calls, 0), fastRetry); err != nil {
		t.Fatal(err)
	}
	if calls != 0 || len(c.Actions()) != 1 || len(writes(c)) != 0 {
		t.Errorf("rewrites %d, requests %v: want none but one GET", calls, c.Actions())
	}
}

func TestMigrateRewritesThenSetsStoredVersions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newCRDs("v1beta1", "v1")
	calls := 0
	if err := migrate(ctx, c.ApiextensionsV1().CustomResourceDefinitions(), crdName, countingRewrite(&calls, 0), fastRetry); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("%d rewrites, want 1", calls)
	}
	if got := storedVersions(t, c); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", got)
	}
	if got := writes(c); !slices.Equal(got, []string{"update customresourcedefinitions/status"}) {
		t.Errorf("writes %v, want one status update", got)
	}
}

func TestMigrateRetriesAFailedAttempt(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := newCRDs("v1beta1", "v1")
	calls := 0
	if err := migrate(ctx, c.ApiextensionsV1().CustomResourceDefinitions(), crdName, countingRewrite(&calls, 2), fastRetry); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Errorf("%d rewrites, want 3: two failed, then one that succeeded", calls)
	}
	if got := storedVersions(t, c); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions = %v, want [v1]", got)
	}

	// And a failed read of the CRD, until the context ends.
	c = newCRDs("v1beta1", "v1")
	c.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := migrate(ctx, c.ApiextensionsV1().CustomResourceDefinitions(), crdName, countingRewrite(&calls, 0), fastRetry); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("migrate = %v, want the context's error", err)
	}
	if gets := len(c.Actions()); gets < 2 {
		t.Errorf("%d GETs, want retries", gets)
	}
}

func TestMigrateRereadsOnConflictAndStartsOverWhenTheSpecChanged(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	crdResource := apiextensionsv1.Resource("customresourcedefinitions")
	for _, tc := range []struct {
		name string
		// bump is the generation the CRD has after the first conflict.
		bump     int64
		rewrites int
	}{
		{name: "status changed", bump: 0, rewrites: 1},
		{name: "spec changed", bump: 1, rewrites: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCRDs("v1beta1", "v1")
			conflicted := false
			c.PrependReactor("update", "customresourcedefinitions", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if conflicted {
					return false, nil, nil
				}
				conflicted = true
				crd := a.(clienttesting.UpdateAction).GetObject().(*apiextensionsv1.CustomResourceDefinition).DeepCopy()
				crd.Generation += tc.bump
				crd.Status.StoredVersions = []string{"v1beta1", "v1"}
				if err := c.Tracker().Update(crdResource.WithVersion("v1"), crd, ""); err != nil {
					t.Fatal(err)
				}
				return true, nil, apierrors.NewConflict(crdResource, crdName, fmt.Errorf("changed"))
			})
			calls := 0
			if err := migrate(ctx, c.ApiextensionsV1().CustomResourceDefinitions(), crdName, countingRewrite(&calls, 0), fastRetry); err != nil {
				t.Fatal(err)
			}
			if calls != tc.rewrites {
				t.Errorf("%d rewrites, want %d", calls, tc.rewrites)
			}
			if got := storedVersions(t, c); !slices.Equal(got, []string{"v1"}) {
				t.Errorf("storedVersions = %v, want [v1]", got)
			}
		})
	}
}

func TestRewriteEachPagesAndToleratesConflictAndNotFound(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	pages := map[string][]string{"": {"a", "gone", "b"}, "page-2": {"raced", "c"}}
	var limits []int64
	list := func(_ context.Context, o metav1.ListOptions) ([]string, string, error) {
		limits = append(limits, o.Limit)
		next := ""
		if o.Continue == "" {
			next = "page-2"
		}
		return pages[o.Continue], next, nil
	}
	apps := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	var wrote []string
	write := func(_ context.Context, name string) error {
		switch name {
		case "gone":
			return apierrors.NewNotFound(apps, name)
		case "raced":
			return apierrors.NewConflict(apps, name, errors.New("modified"))
		}
		wrote = append(wrote, name)
		return nil
	}
	done, err := RewriteEach(ctx, list, write)
	if err != nil || done != (Rewritten{Written: 3, Raced: 2}) || !slices.Equal(wrote, []string{"a", "b", "c"}) {
		t.Errorf("RewriteEach = %+v, %v, wrote %v; want 3 written, 2 raced, nil, [a b c]", done, err, wrote)
	}
	if !slices.Equal(limits, []int64{pageSize, pageSize}) {
		t.Errorf("list limits %v, want two pages of %d", limits, pageSize)
	}

	// Any other error stops it, to be retried.
	failing := func(context.Context, string) error { return apierrors.NewForbidden(apps, "a", errors.New("no")) }
	if done, err := RewriteEach(ctx, list, failing); !apierrors.IsForbidden(err) || done != (Rewritten{}) {
		t.Errorf("RewriteEach = %+v, %v; want nothing done and the Forbidden", done, err)
	}
}
