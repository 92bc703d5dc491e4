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

// Package options holds the controller manager's flags, grouped in named
// flag sets as kube-controller-manager does, and their validation.
package options

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version/verflag"

	appcontroller "github.com/ndsl/controller-manager/controllers/app"
	"github.com/ndsl/controller-manager/controllers/cleanup"
	"github.com/ndsl/controller-manager/controllers/ingress"
	"github.com/ndsl/controller-manager/controllers/pipeline"
	"github.com/ndsl/controller-manager/pkg/controller"

	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
)

// Options is everything the controller manager can be told on its command line.
type Options struct {
	Generic        GenericOptions
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	HA             HAOptions
	Logs           *logsapi.LoggingConfiguration
	Webhook        WebhookOptions

	// One field per controller with options: its descriptor points to it,
	// and the registry binds and validates it (app.Registry.Flags).
	Ingress  ingress.Options
	Pipeline pipeline.Options
	Cleanup  cleanup.Options
	App      appcontroller.Options

	// AppAdmission configures the App webhooks.
	AppAdmission appcontroller.AdmissionOptions
}

// The encodings custom resources have: JSON, and CBOR where the API server
// serves it (alpha in Kubernetes 1.36). They have no protobuf.
const (
	ContentTypeJSON = "application/json"
	ContentTypeCBOR = "application/cbor"
)

// GenericOptions are the flags not specific to one controller.
type GenericOptions struct {
	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int
	ContentType  string
	// CustomResourceContentType is the encoding of the App and Pipeline
	// clients: JSON, or CBOR (alpha).
	CustomResourceContentType string
	Controllers               []string
	HTTPAddress               string
	SecureServing             bool
	// Profiling serves /debug/pprof/ beside /metrics.
	Profiling       bool
	TLSCertFile     string
	TLSKeyFile      string
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long a replica keeps serving webhooks, unready,
	// after SIGTERM, so endpoints stop routing to it before it closes.
	ShutdownDelay   time.Duration
	MinResyncPeriod time.Duration
	// ControllerQueue is the order of every controller's queue.
	ControllerQueue controller.QueueKind
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Generic: GenericOptions{
			KubeAPIQPS:                20,
			KubeAPIBurst:              30,
			ContentType:               "application/vnd.kubernetes.protobuf",
			CustomResourceContentType: ContentTypeJSON,
			Controllers:               []string{"*"},
			HTTPAddress:               ":8080",
			SecureServing:             true,
			ShutdownTimeout:           30 * time.Second,
			ShutdownDelay:             5 * time.Second,
			MinResyncPeriod:           12 * time.Hour,
			ControllerQueue:           controller.PriorityQueue,
		},
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      "leases",
			ResourceName:      "controller-manager",
			ResourceNamespace: "",
		},
		HA:       DefaultHAOptions(),
		Logs:     logsapi.NewLoggingConfiguration(),
		Webhook:  DefaultWebhookOptions(),
		Ingress:  ingress.DefaultOptions(),
		Pipeline: pipeline.DefaultOptions(),
		Cleanup:  cleanup.DefaultOptions(),
		App:      appcontroller.DefaultOptions(),

		AppAdmission: appcontroller.DefaultAdmissionOptions(),
	}
}

// Flags returns the named flag sets but the controllers' (app.Registry.Flags
// adds those). allControllers and disabledByDefault feed the help text of
// --controllers.
func (o *Options) Flags(allControllers, disabledByDefault []string) cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets

	fs := fss.FlagSet("generic")
	fs.StringVar(&o.Generic.Kubeconfig, "kubeconfig", o.Generic.Kubeconfig,
		"Path to a kubeconfig. When empty: the in-cluster config, then $KUBECONFIG.")
	fs.Float32Var(&o.Generic.KubeAPIQPS, "kube-api-qps", o.Generic.KubeAPIQPS,
		"Client-side limit of requests per second to the API server. A negative value turns client-side rate limiting off.")
	fs.IntVar(&o.Generic.KubeAPIBurst, "kube-api-burst", o.Generic.KubeAPIBurst,
		"Burst allowed above --kube-api-qps.")
	fs.StringVar(&o.Generic.ContentType, "kube-api-content-type", o.Generic.ContentType,
		"Content type of requests for built-in types (custom resources: --custom-resource-content-type).")
	fs.StringVar(&o.Generic.CustomResourceContentType, "custom-resource-content-type", o.Generic.CustomResourceContentType,
		"Content type of requests for Apps and Pipelines: "+ContentTypeJSON+", or "+ContentTypeCBOR+" (alpha: needs kube-apiserver's CBORServingAndStorage feature gate, and turns on client-go's ClientsAllowCBOR).")
	fs.StringSliceVar(&o.Generic.Controllers, "controllers", o.Generic.Controllers, fmt.Sprintf(
		"Controllers to enable. '*' enables all on-by-default controllers, 'foo' enables foo, '-foo' disables foo; the first mention of a controller wins.\nAll controllers: %v\nDisabled by default: %v",
		allControllers, disabledByDefault))
	fs.StringVar(&o.Generic.HTTPAddress, "http-address", o.Generic.HTTPAddress,
		"Address of the HTTP server for /healthz, /livez, /readyz, /metrics and /debug/controllers. '0' disables it.")
	fs.BoolVar(&o.Generic.SecureServing, "secure-serving", o.Generic.SecureServing,
		"Serve HTTPS, and let only callers whose token passes a TokenReview and who may GET the path (SubjectAccessReview) read /metrics and /debug/controllers; the probes stay open. false serves plain HTTP with no checks, for local runs.")
	fs.BoolVar(&o.Generic.Profiling, "profiling", o.Generic.Profiling,
		"Serve Go's profiles on --http-address at /debug/pprof/, behind the same checks as /metrics.")
	fs.StringVar(&o.Generic.TLSCertFile, "tls-cert-file", o.Generic.TLSCertFile,
		"Serving certificate for --secure-serving, reloaded when the file changes; empty generates a self-signed one at start.")
	fs.StringVar(&o.Generic.TLSKeyFile, "tls-private-key-file", o.Generic.TLSKeyFile,
		"Private key of --tls-cert-file.")
	fs.DurationVar(&o.Generic.ShutdownTimeout, "shutdown-timeout", o.Generic.ShutdownTimeout,
		"How long reconciles in flight may take to finish on SIGTERM before the lease is released anyway.")
	fs.DurationVar(&o.Generic.ShutdownDelay, "shutdown-delay-duration", o.Generic.ShutdownDelay,
		"On SIGTERM, how long /readyz fails while the webhooks (and probes and metrics) keep serving, so that the Service's endpoints drop this replica before its webhook listener closes; every webhook answer meanwhile closes its connection, so that callers keeping connections alive reconnect to another replica. The listener stays open at least until the controllers have drained. 0 closes it as soon as the controllers have stopped.")
	fs.DurationVar(&o.Generic.MinResyncPeriod, "min-resync-period", o.Generic.MinResyncPeriod,
		"Informers resync every period chosen at random between this and twice this.")
	fs.StringVar((*string)(&o.Generic.ControllerQueue), "controller-queue", string(o.Generic.ControllerQueue),
		"Order of the controllers' queues: 'priority' serves keys from real changes before keys from the initial list, resyncs and takeover passes; 'fifo' is client-go's plain FIFO.")

	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fss.FlagSet("leader election"))
	bindHAFlags(&o.HA, fss.FlagSet("leader election"))
	bindWebhookFlags(&o.Webhook, fss.FlagSet("webhooks"))
	logsapi.AddFlags(o.Logs, fss.FlagSet("logging"))
	verflag.AddFlags(fss.FlagSet("misc"))

	bindAppAdmissionFlags(&o.AppAdmission, fss.FlagSet("app webhooks"))
	return fss
}

// Validate returns every problem with the options but the controllers'
// (app.Registry.ValidateOptions checks those too).
func (o *Options) Validate() error {
	var errs []error
	g := o.Generic
	if g.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must not be negative, got %d", g.KubeAPIBurst))
	}
	if (g.TLSCertFile == "") != (g.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file must be given together"))
	}
	if g.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout must be positive, got %s", g.ShutdownTimeout))
	}
	if g.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay-duration must not be negative, got %s", g.ShutdownDelay))
	}
	if g.CustomResourceContentType != ContentTypeJSON && g.CustomResourceContentType != ContentTypeCBOR {
		errs = append(errs, fmt.Errorf("--custom-resource-content-type must be %s or %s, got %q", ContentTypeJSON, ContentTypeCBOR, g.CustomResourceContentType))
	}
	if g.MinResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--min-resync-period must be positive, got %s", g.MinResyncPeriod))
	}
	if err := controller.ValidateQueueKind(g.ControllerQueue); err != nil {
		errs = append(errs, err)
	}
	if le := o.LeaderElection; le.LeaderElect {
		errs = append(errs, validateLeaseDurations(le.LeaseDuration.Duration, le.RenewDeadline.Duration, le.RetryPeriod.Duration)...)
		if le.ResourceLock != "leases" {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-lock must be \"leases\", got %q", le.ResourceLock))
		}
		if le.ResourceName == "" {
			errs = append(errs, errors.New("--leader-elect-resource-name must not be empty"))
		}
	}
	if err := o.HA.Validate(); err != nil {
		errs = append(errs, err)
	} else if o.HA.Shards > 1 && !o.LeaderElection.LeaderElect {
		errs = append(errs, fmt.Errorf("--shards=%d needs --leader-elect: each shard runs under its own Lease", o.HA.Shards))
	}
	if err := o.Webhook.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AddAll adds every named flag set to fs, in order.
func AddAll(fs *pflag.FlagSet, fss cliflag.NamedFlagSets) {
	for _, name := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[name])
	}
}
