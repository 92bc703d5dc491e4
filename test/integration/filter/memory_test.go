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

package filter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ndsl/controller-manager/controllers/ingress"
)

const (
	memoryServicesEnv = "FILTER_MEMORY_SERVICES"
	memoryChildEnv    = "FILTER_MEMORY_CHILD"
	kubeconfigEnv     = "FILTER_MEMORY_KUBECONFIG"
)

// TestServiceInformerMemory measures what the Ingress controller's
// Services informer costs in a cluster of Services it does not act on, as
// the noisy benchmark's are (headless, no selector, in ten namespaces),
// before (every Service, lean) and after (only the annotated ones). Opt in
// with FILTER_MEMORY_SERVICES=<count>; each informer runs in a fresh
// process, whose heap and peak RSS it reports.
func TestServiceInformerMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(memoryServicesEnv))
	if n == 0 {
		t.Skipf("set %s to the number of Services to measure with", memoryServicesEnv)
	}
	ctx := t.Context()
	const namespaces = 10
	for i := range namespaces {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("noise-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	work := make(chan int)
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			for i := range work {
				_, err := cp.Client.CoreV1().Services(fmt.Sprintf("noise-%d", i%namespaces)).Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("noise-%06d", i), Labels: map[string]string{"app.kubernetes.io/name": "noise"}},
					Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
				}
			}
			errs <- nil
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, variant := range []string{"every Service", "annotated only"} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestServiceInformerMemoryChild$", "-test.v")
		cmd.Env = append(os.Environ(), memoryChildEnv+"="+variant, kubeconfigEnv+"="+cp.KubeconfigPath)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", variant, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "MEASURED") {
				t.Logf("%d Services: %s", n, strings.TrimSpace(line))
			}
		}
	}
}

// TestServiceInformerMemoryChild runs one informer of
// TestServiceInformerMemory.
func TestServiceInformerMemoryChild(t *testing.T) {
	variant := os.Getenv(memoryChildEnv)
	if variant == "" {
		t.Skip("run by TestServiceInformerMemory")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(kubeconfigEnv))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf" // as the manager's
	cfg.AcceptContentTypes = cfg.ContentType + ",application/json"
	cfg.QPS, cfg.Burst = -1, -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(ingress.TransformService))
	var informer cache.SharedIndexInformer
	if variant == "annotated only" {
		informer = factory.InformerFor(&corev1.Service{}, ingress.NewServiceInformer)
	} else {
		informer = factory.Core().V1().Services().Informer()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("not synced")
	}
	synced := time.Since(start)
	// Let the handlers' queue drain, as a running manager's would.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Second, false, func(context.Context) (bool, error) { return false, nil })
	runtime.GC()
	runtime.ReadMemStats(&after)
	peak := peakRSS()
	t.Logf("MEASURED %s: %d cached, synced in %s, heap retained %.1f MiB (%.0f B per Service listed), allocated while syncing %.1f MiB, peak RSS %s",
		variant, len(informer.GetStore().ListKeys()), synced.Round(time.Millisecond),
		float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20),
		float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(servicesListed(t, client)),
		float64(after.TotalAlloc-before.TotalAlloc)/(1<<20), peak)
	runtime.KeepAlive(informer)
}

func servicesListed(t *testing.T, client kubernetes.Interface) int {
	list, err := client.CoreV1().Services("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// peakRSS is this process's VmHWM.
func peakRSS() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
