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

// Package app is the chart's `helm test` (cmd/chart-test): in its own
// namespace it creates an App with no replicas, waits until the manager has
// converged it (its Deployment exists and its status, for the App's
// generation, says Ready), and deletes it.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Main runs the test with the command line args and returns the exit code.
func Main(args []string) int {
	if err := Run(context.Background(), args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	return 0
}

// Run parses args and runs the test, reporting its steps to out.
func Run(ctx context.Context, args []string, out io.Writer) error {
	var o options
	fs := flag.NewFlagSet("chart-test", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: the Pod's ServiceAccount")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the App (default $POD_NAMESPACE)")
	fs.StringVar(&o.version, "version", "v1", "version of ingress.example.com to create the App at: v1beta1 goes through the conversion webhook")
	fs.StringVar(&o.image, "app-image", "", "the App's image; with no replicas, never pulled")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long the App may take to converge")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return run(ctx, o, out)
}

type options struct {
	kubeconfig, namespace, version, image string
	timeout                               time.Duration
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.namespace == "" || o.image == "" {
		return errors.New("--namespace (or $POD_NAMESPACE) and --app-image are required")
	}
	cfg, err := config(o.kubeconfig)
	if err != nil {
		return err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return check(ctx, client, out, o.namespace, o.version, o.image, o.timeout)
}

func config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// check creates an App in namespace at version, waits up to timeout for it
// to converge, and deletes it, also when it does not converge.
func check(ctx context.Context, client dynamic.Interface, out io.Writer, namespace, version, image string, timeout time.Duration) error {
	apps := client.Resource(schema.GroupVersionResource{Group: "ingress.example.com", Version: version, Resource: "apps"}).Namespace(namespace)
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ingress.example.com/" + version,
		"kind":       "App",
		"metadata":   map[string]any{"generateName": "helm-test-", "labels": map[string]any{"app.kubernetes.io/component": "chart-test"}},
		"spec":       map[string]any{"image": image, "replicas": int64(0)},
	}}
	created, err := apps.Create(ctx, app, metav1.CreateOptions{FieldManager: "chart-test"})
	if err != nil {
		return fmt.Errorf("creating an App in %s: %w", namespace, err)
	}
	name := created.GetName()
	fmt.Fprintf(out, "created App %s/%s (%s)\n", namespace, name, version)
	waitErr := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		live, err := apps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // a conversion webhook starting up; retried until the deadline
		}
		ready, message := converged(live)
		if ready {
			fmt.Fprintf(out, "App %s converged: %s\n", name, message)
		}
		return ready, nil
	})
	// A UID precondition: only the App this run created is deleted.
	uid := created.GetUID()
	delErr := apps.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if delErr != nil && !apierrors.IsNotFound(delErr) {
		delErr = fmt.Errorf("deleting App %s: %w", name, delErr)
	} else {
		delErr = nil
		fmt.Fprintf(out, "deleted App %s\n", name)
	}
	if waitErr != nil {
		live, _ := apps.Get(ctx, name, metav1.GetOptions{})
		_, message := converged(live)
		waitErr = fmt.Errorf("App %s did not converge within %s (%s): is the manager running?", name, timeout, message)
	}
	return errors.Join(waitErr, delErr)
}

// converged tells whether the manager has written app's status for its
// generation, with Ready True: its Deployment exists and every one of its
// (no) replicas is available.
func converged(app *unstructured.Unstructured) (bool, string) {
	if app == nil {
		return false, "gone"
	}
	observed, _, _ := unstructured.NestedInt64(app.Object, "status", "observedGeneration")
	if observed != app.GetGeneration() {
		return false, fmt.Sprintf("status for generation %d, want %d", observed, app.GetGeneration())
	}
	conditions, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	for _, c := range conditions {
		c, _ := c.(map[string]any)
		if c["type"] == "Ready" {
			return c["status"] == "True", fmt.Sprintf("Ready %v: %v", c["status"], c["message"])
		}
	}
	return false, "no Ready condition"
}
