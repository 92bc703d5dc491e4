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

package podmetrics

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// window is the sampling window the stand-in claims for every sample.
const window = 15 * time.Second

// UsageFunc is the total usage of a Running pod, reported on its first
// container (its other containers report zero of the same resources). Give
// memory when an HPA scales on memory: a pod whose containers lack the
// resource is left out of the HPA's computation.
type UsageFunc func(pod *corev1.Pod) corev1.ResourceList

// Server serves metrics.k8s.io/v1beta1 from the pods it lists with client
// and the usage functions set per namespace. Close it when done.
type Server struct {
	// Port is the loopback port it listens on (127.0.0.1).
	Port int

	client kubernetes.Interface
	logger klog.Logger
	srv    *http.Server
	done   chan struct{}

	mu    sync.Mutex
	usage map[string]UsageFunc // by namespace
}

// Start serves on a free loopback port with a fresh self-signed
// certificate until Close. ctx carries the logger.
func Start(ctx context.Context, client kubernetes.Interface) (*Server, error) {
	cert, err := selfSignedCertificate()
	if err != nil {
		return nil, err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, fmt.Errorf("listening for the metrics stand-in: %w", err)
	}
	s := &Server{
		Port:   l.Addr().(*net.TCPAddr).Port,
		client: client,
		logger: klog.FromContext(ctx).WithName("podmetrics"),
		done:   make(chan struct{}),
		usage:  map[string]UsageFunc{},
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error(err, "Metrics stand-in stopped serving")
		}
	}()
	return s, nil
}

// Close stops serving.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// SetUsage reports usage for the Running pods of namespace; nil reports
// none (an empty list), the default for every namespace.
func (s *Server) SetUsage(namespace string, usage UsageFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if usage == nil {
		delete(s.usage, namespace)
		return
	}
	s.usage[namespace] = usage
}

func (s *Server) usageOf(namespace string) UsageFunc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage[namespace]
}

// serve routes the few paths the aggregator and the HPA controller ask for.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	prefix := "/apis/" + groupVersion
	switch {
	case path == "/apis":
		writeJSON(w, apiGroupList)
	case path == "/apis/"+Group:
		writeJSON(w, apiGroup)
	case path == prefix:
		writeJSON(w, apiResourceList)
	case strings.HasPrefix(path, prefix+"/namespaces/"):
		// namespaces/<ns>/pods[/<name>]
		parts := strings.Split(strings.TrimPrefix(path, prefix+"/namespaces/"), "/")
		switch {
		case len(parts) == 2 && parts[1] == "pods":
			s.servePods(w, r, parts[0], "")
		case len(parts) == 3 && parts[1] == "pods":
			s.servePods(w, r, parts[0], parts[2])
		default:
			http.NotFound(w, r)
		}
	default:
		http.NotFound(w, r)
	}
}

// servePods writes the PodMetricsList of namespace's Running pods that
// match the request's labelSelector, or the one PodMetrics of name.
func (s *Server) servePods(w http.ResponseWriter, r *http.Request, namespace, name string) {
	opts := metav1.ListOptions{LabelSelector: r.URL.Query().Get("labelSelector")}
	if name != "" {
		opts = metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	}
	pods, err := s.client.CoreV1().Pods(namespace).List(r.Context(), opts)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	list := podMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: groupVersion}, Items: []podMetrics{}}
	if usage := s.usageOf(namespace); usage != nil {
		now := metav1.Now()
		for i := range pods.Items {
			if pod := &pods.Items[i]; pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil {
				list.Items = append(list.Items, metricsOf(pod, usage(pod), now))
			}
		}
	}
	if name == "" {
		writeJSON(w, list)
		return
	}
	if len(list.Items) == 0 {
		http.NotFound(w, r)
		return
	}
	writeJSON(w, list.Items[0])
}

// metricsOf puts usage on the pod's first container and zero of the same
// resources on the others.
func metricsOf(pod *corev1.Pod, usage corev1.ResourceList, now metav1.Time) podMetrics {
	m := podMetrics{
		TypeMeta:   metav1.TypeMeta{Kind: "PodMetrics", APIVersion: groupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, CreationTimestamp: now},
		Timestamp:  now,
		Window:     metav1.Duration{Duration: window},
	}
	for i, c := range pod.Spec.Containers {
		u := corev1.ResourceList{}
		for name, q := range usage {
			if i == 0 {
				u[name] = q.DeepCopy()
			} else {
				u[name] = *resource.NewQuantity(0, q.Format)
			}
		}
		m.Containers = append(m.Containers, containerMetrics{Name: c.Name, Usage: u})
	}
	return m
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
