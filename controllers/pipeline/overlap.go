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

package pipeline

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	"github.com/ndsl/controller-manager/pkg/controller"
)

// Every Pipeline's volume is its own directory on the export, the share
// plus its name (the volume's subDir). A Pipeline whose directory is,
// contains or lies inside another's would read and write that one's models,
// so of two such Pipelines only the older gets children. Servers are not
// compared: one server has many names.

// modelDir is the directory p's volume mounts, "" without an NFS share.
func modelDir(p *pipelinev1.Pipeline) string {
	return shareDir(p.Spec.ModelStorage.NFSPath(), p.Name)
}

// shareDir is the directory the Pipeline called name mounts on the export
// share, "" without a share.
func shareDir(share, name string) string {
	if share == "" {
		return ""
	}
	return path.Clean(share + "/" + name)
}

// dirsOverlap reports whether a and b are the same directory or one holds
// the other, on path segments.
func dirsOverlap(a, b string) bool {
	return a != "" && b != "" && (a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/"))
}

// olderPipeline reports whether a was created before b, the name breaking
// ties (timestamps have seconds), so that the order is total and stable.
func olderPipeline(a, b *pipelinev1.Pipeline) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// storageOverlap names the oldest Pipeline older than p whose directory
// overlaps p's, nil when there is none.
func (c *Controller) storageOverlap(p *pipelinev1.Pipeline) error {
	dir := modelDir(p)
	var oldest *pipelinev1.Pipeline
	for _, q := range c.overlapping(dir) {
		if q.Name != p.Name && olderPipeline(q, p) && (oldest == nil || olderPipeline(q, oldest)) {
			oldest = q
		}
	}
	if oldest == nil {
		return nil
	}
	other := modelDir(oldest)
	how := "is inside"
	switch {
	case other == dir:
		how = "is"
	case strings.HasPrefix(other, dir+"/"):
		how = "contains"
	}
	return fmt.Errorf("the Pipeline's directory %s on the NFS export %s older Pipeline %s's directory %s; "+
		"choose another share or name; nothing is created", dir, how, oldest.Name, other)
}

// overlapping is the Pipelines whose directory overlaps dir. Pipelines are
// few and cluster-scoped: a list of the cache is cheap. A shard's cache
// holds its own range only (--shards): across shards, the webhook, which
// lists them all, is what refuses an overlap.
func (c *Controller) overlapping(dir string) []*pipelinev1.Pipeline {
	if dir == "" {
		return nil
	}
	all, err := c.pipelines.List(labels.Everything())
	if err != nil {
		return nil
	}
	var found []*pipelinev1.Pipeline
	for _, q := range all {
		if dirsOverlap(dir, modelDir(q)) {
			found = append(found, q)
		}
	}
	return found
}

// overlapHandler requeues the Pipelines whose directory overlaps one that
// appears, moves or goes: the younger of two may now get its children, or
// lose the right to new ones.
func (c *Controller) overlapHandler() cache.ResourceEventHandlerDetailedFuncs {
	enqueue := func(p *pipelinev1.Pipeline) {
		for _, q := range c.overlapping(modelDir(p)) {
			if q.Name != p.Name {
				c.Queue.Add(controller.Key{Name: q.Name})
			}
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if p, ok := obj.(*pipelinev1.Pipeline); ok && !isInInitialList {
				enqueue(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okOld := oldObj.(*pipelinev1.Pipeline)
			n, okNew := newObj.(*pipelinev1.Pipeline)
			if okOld && okNew && modelDir(o) != modelDir(n) {
				enqueue(o)
				enqueue(n)
			}
		},
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if p, ok := obj.(*pipelinev1.Pipeline); ok {
				enqueue(p)
			}
		},
	}
}
