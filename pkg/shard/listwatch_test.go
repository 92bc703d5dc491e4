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

package shard

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// fakeServer answers lists as an API server would: applying the shard
// selector if it honours selectors, echoing it if echo.
type fakeServer struct {
	honours, echo bool
	objects       []corev1.Service
	// requests are the options of every list and watch.
	requests []metav1.ListOptions
	err      error
}

func (f *fakeServer) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			f.requests = append(f.requests, o)
			if f.err != nil {
				return nil, f.err
			}
			list := &corev1.ServiceList{}
			for _, svc := range f.objects {
				if o.ShardSelector != "" && f.honours && !selectorMatches(o.ShardSelector, &svc) {
					continue
				}
				list.Items = append(list.Items, svc)
				if o.Limit > 0 && int64(len(list.Items)) == o.Limit {
					break
				}
			}
			if o.ShardSelector != "" && f.honours && f.echo {
				list.ShardInfo = &metav1.ShardInfo{Selector: o.ShardSelector}
			}
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			f.requests = append(f.requests, o)
			return watch.NewEmptyWatch(), nil
		},
	}
}

func selectorMatches(sel string, obj runtime.Object) bool {
	for _, n := range []int{2, 3, 4, 7} {
		shards, _ := All(n)
		for _, s := range shards {
			if s.Selector(UID) == sel {
				return s.Predicate(UID)(obj)
			}
		}
	}
	if sel == canarySelector(UID) {
		return false
	}
	panic("unknown selector " + sel)
}

// services returns a Service of each uid.
func services(uids ...string) []corev1.Service {
	var out []corev1.Service
	for _, uid := range uids {
		out = append(out, corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: types.UID(uid)}})
	}
	return out
}

func TestProbe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server fakeServer
		key    Key
		want   string
		lists  int
	}{
		{"echoed (a built-in type)", fakeServer{honours: true, echo: true, objects: services("a", "b")}, UID, PathServer, 1},
		{"filtered, not echoed (a custom resource)", fakeServer{honours: true, objects: services("a", "b")}, UID, PathServer, 2},
		{"ignored", fakeServer{objects: services("a", "b")}, UID, PathClient, 1},
		{"nothing to tell by", fakeServer{honours: true}, UID, "", 2},
		{"ignored, nothing to tell by", fakeServer{}, UID, "", 2},
		{"a key the server cannot select by", fakeServer{honours: true, echo: true, objects: services("a")}, ControllerOwner(), PathClient, 0},
		{"namespaces, hashed otherwise than the server does", fakeServer{honours: true, echo: true, objects: services("a")}, Namespace, PathClient, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Probe(context.Background(), tc.server.listWatch(), tc.key)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("path %q, want %q", got, tc.want)
			}
			if len(tc.server.requests) != tc.lists {
				t.Errorf("%d lists, want %d", len(tc.server.requests), tc.lists)
			}
			for _, o := range tc.server.requests {
				if o.Limit != 1 {
					t.Errorf("a probe lists with limit %d, want 1", o.Limit)
				}
			}
		})
	}
}

// The wrapper asks for the shard's range on every list and watch, filters
// what the server sent all the same, and probes until it knows the path.
func TestListerWatcher(t *testing.T) {
	s, _ := New(0, 2)
	var in, out []string
	for i := range 16 {
		uid := fmt.Sprintf("%d-uid", i) // a varying first byte spreads under plain FNV-1a
		if s.ContainsUID(uid) {
			in = append(in, uid)
		} else {
			out = append(out, uid)
		}
	}
	if len(in) == 0 || len(out) == 0 {
		t.Fatalf("test namespaces all in one shard: %v %v", in, out)
	}
	for _, honours := range []bool{true, false} {
		server := &fakeServer{honours: honours, echo: true, objects: services(append(append([]string{}, in...), out...)...)}
		lw := NewListerWatcher(server.listWatch(), s, UID, "services")
		list, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(list.(*corev1.ServiceList).Items); got != len(in) {
			t.Errorf("honours %v: listed %d Services, want the %d of the shard", honours, got, len(in))
		}
		if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: ptr.To(true)}); err != nil {
			t.Fatal(err)
		}
		// The probe's list, then the informer's list and watch.
		if len(server.requests) != 3 {
			t.Fatalf("honours %v: %d requests, want 3", honours, len(server.requests))
		}
		for _, o := range server.requests[1:] {
			if o.ShardSelector != s.Selector(UID) {
				t.Errorf("a list or watch asks for shard selector %q, want %q", o.ShardSelector, s.Selector(UID))
			}
		}
		wantPath, wantDropped := PathServer, 0
		if !honours {
			wantPath, wantDropped = PathClient, len(out)
		}
		if lw.Path() != wantPath || lw.Dropped() != int64(wantDropped) {
			t.Errorf("honours %v: path %q, dropped %d; want %q, %d", honours, lw.Path(), lw.Dropped(), wantPath, wantDropped)
		}
	}
}

// A probe that fails is tried again at the next list or watch.
func TestListerWatcherProbesAgain(t *testing.T) {
	s, _ := New(1, 2)
	server := &fakeServer{honours: true, echo: true, objects: services("a"), err: errors.New("unavailable")}
	lw := NewListerWatcher(server.listWatch(), s, UID, "services")
	if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if lw.Path() != "" {
		t.Fatalf("path %q after a failed probe", lw.Path())
	}
	server.err = nil
	if _, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if lw.Path() != PathServer {
		t.Errorf("path %q after a probe that succeeded, want %q", lw.Path(), PathServer)
	}
}

// One shard is today's informer: no selector, no probe, no filter.
func TestListerWatcherOfOneShard(t *testing.T) {
	s, _ := New(0, 1)
	server := &fakeServer{objects: services("a", "b", "c")}
	lw := NewListerWatcher(server.listWatch(), s, UID, "services")
	list, err := lw.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(list.(*corev1.ServiceList).Items); got != 3 {
		t.Errorf("listed %d of 3 Services", got)
	}
	if len(server.requests) != 1 || server.requests[0].ShardSelector != "" || lw.Path() != "" {
		t.Errorf("one shard sent %+v and has path %q", server.requests, lw.Path())
	}
}
