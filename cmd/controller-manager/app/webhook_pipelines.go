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
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	pipelineconversion "github.com/ndsl/controller-manager/apis/pipeline/conversion"
	pipelinev1 "github.com/ndsl/controller-manager/apis/pipeline/v1"
	pipelinev1beta1 "github.com/ndsl/controller-manager/apis/pipeline/v1beta1"
	"github.com/ndsl/controller-manager/pkg/generated/clientset/versioned"
	pipelineinformers "github.com/ndsl/controller-manager/pkg/generated/informers/externalversions/pipeline/v1"
)

// storedPipelineList is the stored Pipelines the Pipeline webhooks compare
// a Pipeline's storage directory with, built once for both of them.
type storedPipelineList struct {
	once sync.Once
	list func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error)
	err  error
}

// storedPipelines lists the stored Pipelines for the Pipeline webhooks'
// overlap check. With a Context, from an informer of every Pipeline (not a
// shard's: the check spans them all), converted to v1beta1, which the
// webhooks judge, as each is cached: a request then costs no API call and
// no conversion, whatever the number of Pipelines. Until it has synced, and
// without a Context, from the API server's watch cache at v1, converted
// here (a v1beta1 list would call this manager's conversion webhook back
// for every Pipeline). bench admission measured the list per request at
// 50 ms of the API server's CPU per Pipeline write with 900 stored.
func storedPipelines(wc WebhookContext) (func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error), error) {
	if wc.pipelines == nil {
		return newStoredPipelines(wc)
	}
	wc.pipelines.once.Do(func() { wc.pipelines.list, wc.pipelines.err = newStoredPipelines(wc) })
	return wc.pipelines.list, wc.pipelines.err
}

func newStoredPipelines(wc WebhookContext) (func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error), error) {
	if wc.KubeConfig == nil {
		return nil, errors.New("the overlap check needs the manager's client config")
	}
	client, err := versioned.NewForConfig(customResourceConfig(rest.CopyConfig(wc.KubeConfig), wc.Options.Generic.CustomResourceContentType))
	if err != nil {
		return nil, fmt.Errorf("building the Pipeline webhooks' client: %w", err)
	}
	fromServer := func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error) {
		list, err := client.PipelineV1().Pipelines().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return nil, err
		}
		out := make([]pipelinev1beta1.Pipeline, len(list.Items))
		for i := range list.Items {
			if err := pipelineconversion.V1ToV1beta1(&list.Items[i], &out[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if wc.Context == nil {
		return fromServer, nil
	}
	informer := pipelineinformers.NewPipelineInformer(client, 0, cache.Indexers{})
	if err := informer.SetTransform(func(obj any) (any, error) {
		p, ok := obj.(*pipelinev1.Pipeline)
		if !ok {
			return obj, nil // a tombstone
		}
		out := &pipelinev1beta1.Pipeline{}
		return out, pipelineconversion.V1ToV1beta1(p, out)
	}); err != nil {
		return nil, err
	}
	go informer.Run(wc.Context.Done())
	return func(ctx context.Context) ([]pipelinev1beta1.Pipeline, error) {
		if !informer.HasSynced() {
			return fromServer(ctx)
		}
		cached := informer.GetStore().List()
		out := make([]pipelinev1beta1.Pipeline, 0, len(cached))
		for _, obj := range cached {
			if p, ok := obj.(*pipelinev1beta1.Pipeline); ok {
				out = append(out, *p)
			}
		}
		return out, nil
	}, nil
}
