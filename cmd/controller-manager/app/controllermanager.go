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

// Package app wires the controller manager: flags to config, clients and
// informer factories, the controller registry, the webhooks and the HTTP
// endpoints; pkg/ha runs the controllers under leader election. It follows
// kube-controller-manager's order: build every enabled controller, then
// start the informer factories, then run the controllers.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/ndsl/controller-manager/cmd/controller-manager/app/options"
	"github.com/ndsl/controller-manager/pkg/controller"
	"github.com/ndsl/controller-manager/pkg/ha"
	"github.com/ndsl/controller-manager/pkg/serving"
)

// Manager is a configured controller manager, ready to Run.
type Manager struct {
	opts    *options.Options
	enabled []ControllerDescriptor
	// registry holds every controller, enabled or not: the Lease names of
	// every layout are made from their names.
	registry Registry
	config   *rest.Config
	status   *managerStatus
	listener net.Addr
	// electionHealth fails /healthz when this instance leads but has not
	// renewed its lease in time; nil without leader election.
	electionHealth *leaderelection.HealthzAdaptor
	// controllerHealth is electionHealth per controller in per-controller mode.
	controllerHealth map[string]*leaderelection.HealthzAdaptor
	// wrapLock, when set, wraps the leader election lock (tests).
	wrapLock func(resourcelock.Interface) resourcelock.Interface
	// webhooks serve admission and conversion; nil with --webhooks=false.
	webhooks *webhooks
	// lameDuck keeps the servers up, unready, after SIGTERM.
	lameDuck *serving.LameDuck
	// extraWebhooks are served beside webhookRegistrations(); tests add theirs.
	extraWebhooks []WebhookRegistration
}

// Option adjusts a Manager; tests use them.
type Option func(*Manager)

// WithLeaseLock wraps the leader election lock; tests use it to stall or
// fail the Lease's renewals.
func WithLeaseLock(wrap func(resourcelock.Interface) resourcelock.Interface) Option {
	return func(m *Manager) { m.wrapLock = wrap }
}

// WithRESTConfig replaces the client config the flags describe.
func WithRESTConfig(cfg *rest.Config) Option {
	return func(m *Manager) { m.config = cfg }
}

// WithExtraWebhooks serves regs beside the manager's own webhooks.
func WithExtraWebhooks(regs ...WebhookRegistration) Option {
	return func(m *Manager) { m.extraWebhooks = append(m.extraWebhooks, regs...) }
}

// NewManager validates the options, resolves --controllers against the
// registry, loads the client config and opens the HTTP listener, so that
// every startup error happens before anything runs.
func NewManager(ctx context.Context, opts *options.Options, registry Registry, extra ...Option) (*Manager, error) {
	if err := registry.validate(); err != nil {
		return nil, err
	}
	if err := registry.ValidateOptions(opts); err != nil {
		return nil, err
	}
	enabled, err := registry.Enabled(opts.Generic.Controllers)
	if err != nil {
		return nil, err
	}
	// With a Lease per controller, what runs, reports and is health-checked
	// is each unit (a controller, or one of its shards).
	reported := ha.Names(ha.Units(haControllersOf(enabled), 1))
	if opts.LeaderElection.LeaderElect && opts.HA.PerController {
		reported = ha.Names(ha.Units(haControllersOf(enabled), opts.HA.Shards))
	}
	m := &Manager{opts: opts, enabled: enabled, registry: registry, status: newManagerStatus(reported)}
	// Not ready before the informers it starts at once have synced. A
	// webhooks-only process (no controller) starts none.
	m.status.awaitingInformers = len(enabled) > 0 &&
		(!opts.LeaderElection.LeaderElect || opts.HA.Standby == options.StandbyWarm)
	for _, o := range extra {
		o(m)
	}
	if opts.Generic.CustomResourceContentType == options.ContentTypeCBOR {
		allowCBOR()
	}
	if m.config == nil {
		if m.config, err = restConfig(opts.Generic); err != nil {
			return nil, err
		}
	}
	if len(enabled) == 0 && !opts.Webhook.Enabled {
		return nil, errors.New("nothing to run: no controller is enabled and --webhooks=false")
	}
	// The servers outlive ctx (SIGTERM) by the lame-duck delay.
	m.lameDuck = serving.NewLameDuck(ctx, opts.Generic.ShutdownDelay)
	health := []healthz.HealthChecker{healthz.PingHealthz}
	switch {
	case len(enabled) == 0:
		// Webhooks only: no Lease, nothing to watch.
	case opts.LeaderElection.LeaderElect && opts.HA.PerController:
		m.controllerHealth = map[string]*leaderelection.HealthzAdaptor{}
		for _, name := range reported {
			a := leaderelection.NewLeaderHealthzAdaptor(leaderHealthTolerance)
			m.controllerHealth[name] = a
			health = append(health, healthz.NamedCheck("leaderElection-"+name, a.Check))
		}
	case opts.LeaderElection.LeaderElect:
		m.electionHealth = leaderelection.NewLeaderHealthzAdaptor(leaderHealthTolerance)
		health = append(health, m.electionHealth)
	}
	readiness := []healthz.HealthChecker{m.lameDuck.Check()}
	if opts.Webhook.Enabled {
		if m.webhooks, err = m.startWebhooks(m.lameDuck.Serving()); err != nil {
			return nil, m.abort(err)
		}
		readiness = append(readiness, m.webhooks.server.CertificateCheck())
		if m.webhooks.trusted != nil {
			readiness = append(readiness, m.webhooks.trusted)
		}
		m.lameDuck.AddStopped(m.webhooks.server.Stopped())
		// Callers on kept-alive connections move to the other replicas
		// during the delay, not when the server closes at its end.
		m.lameDuck.WhenBegun(m.webhooks.server.CloseConnections)
	}
	if opts.Generic.HTTPAddress != "0" {
		handler := serving.Handler(serving.Endpoints{Live: health, Ready: readiness, Synced: m.status.synced,
			Debug: func() any { return m.status.debug() }, Profiling: opts.Generic.Profiling})
		var tlsCfg *tls.Config
		if opts.Generic.SecureServing {
			certs, err := serving.Certificate(opts.Generic.TLSCertFile, opts.Generic.TLSKeyFile)
			if err != nil {
				return nil, m.abort(err)
			}
			if m.webhooks != nil && m.webhooks.managed != nil && opts.Generic.TLSCertFile == "" {
				// The manager's own certificate, which names the metrics
				// Service; the self-signed one until it is loaded.
				certs = &serving.WithFallback{Primary: m.webhooks.managed, Fallback: certs}
			}
			if tlsCfg, err = serving.TLSConfig(m.lameDuck.Serving(), certs); err != nil {
				return nil, m.abort(err)
			}
			if handler, err = serving.WithDelegatedAuth(handler, m.clientConfig("delegated-auth"), serving.ProbePaths); err != nil {
				return nil, m.abort(err)
			}
		}
		var stopped <-chan struct{}
		if m.listener, stopped, err = serving.ServeHTTP(m.lameDuck.Serving(), opts.Generic.HTTPAddress, handler, tlsCfg); err != nil {
			return nil, m.abort(err)
		}
		m.lameDuck.AddStopped(stopped)
	}
	return m, nil
}

// abort closes what NewManager has started when it fails.
func (m *Manager) abort(err error) error {
	m.lameDuck.Stop()
	return err
}

// HTTPAddr is the address the HTTP server listens on, nil when disabled.
func (m *Manager) HTTPAddr() net.Addr { return m.listener }

// Run runs the enabled controllers until ctx is done, under leader election
// when it is on. It returns nil after a clean shutdown and ErrLeaderElectionLost
// when the lease was lost. Either way it returns only after the lame duck:
// unready, still serving webhooks, for --shutdown-delay-duration since
// shutdown began, then the servers closed.
func (m *Manager) Run(ctx context.Context) error {
	m.lameDuck.Started()
	defer m.lameDuck.Finish(ctx)
	return m.run(ctx)
}

func (m *Manager) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	names := make([]string, 0, len(m.enabled))
	for _, d := range m.enabled {
		names = append(names, d.Name)
	}
	logger.Info("Starting controller manager", "controllers", names, "webhooks", m.webhooks != nil)

	// Every replica serves the webhooks, leader or not.
	m.runWebhookCertificates(ctx)
	if len(m.enabled) == 0 {
		logger.Info("No controller enabled: serving webhooks only, without leader election")
		<-ctx.Done()
		return nil
	}
	if !m.opts.LeaderElection.LeaderElect {
		units := ha.Units(haControllersOf(m.enabled), 1)
		m.status.setLeading(ha.Names(units), true)
		// No Lease to lose: a shutdown drains, then cancels what is left.
		set, err := m.startSet(ctx, units, nil)
		if err != nil {
			return err
		}
		defer set.Stop()
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		set.Run(runCtx, ctx.Done(), ha.Names(units))
		return nil
	}
	le := m.opts.LeaderElection
	return ha.Run(ctx, ha.Config{
		LeaderElection: le,
		Namespace:      leaseNamespace(le.ResourceNamespace),
		PerController:  m.opts.HA.PerController,
		Shards:         m.opts.HA.Shards,
		WarmStandby:    m.opts.HA.Standby == options.StandbyWarm,
		Enabled:        haControllersOf(m.enabled),
		Known:          haControllersOf(m.registry),
		ClientConfig:   m.clientConfig("leader-election"),
		Scheme:         Scheme,
		Controllers:    haControllers{m},
		WatchDog:       m.electionHealth,
		UnitWatchDogs:  m.controllerHealth,
		WrapLock:       m.wrapLock,
	})
}

// haControllersOf is what the HA layer knows of the controllers ds.
func haControllersOf(ds []ControllerDescriptor) []ha.Controller {
	out := make([]ha.Controller, len(ds))
	for i, d := range ds {
		out[i] = ha.Controller{Name: d.Name, Splits: d.ShardKeys != nil}
	}
	return out
}

// runControllers runs controllers (of set) until ctx is done or drain is
// closed, starting their Event sinks first: ha.Set's Run.
//
// ctx done means the Lease is gone: the reconciles in flight are cancelled
// with it and runControllers returns as soon as the workers have, within
// ha.LeaseLostGrace. drain closed means a graceful shutdown: the workers stop
// taking keys and the reconciles in flight get up to --shutdown-timeout to
// finish; the caller cancels ctx afterwards, which ends any still running.
func (m *Manager) runControllers(ctx context.Context, drain <-chan struct{}, set *controllerSet, controllers []Controller) {
	logger := klog.FromContext(ctx)
	set.startEvents(controllers)
	runCtx := controller.WithGracefulStop(ctx, drain)
	var wg sync.WaitGroup
	for _, c := range controllers {
		wg.Go(func() {
			c.Run(klog.NewContext(runCtx, klog.LoggerWithName(logger, c.Name())))
		})
	}
	m.status.setRunning(controllers, true)
	wait := m.opts.Generic.ShutdownTimeout
	select {
	case <-ctx.Done():
		wait = ha.LeaseLostGrace
	case <-drain:
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		logger.Info("All controllers stopped")
	case <-time.After(wait):
		logger.Info("Controllers did not stop in time, cancelling what is left", "waited", wait)
	}
	m.status.setRunning(controllers, false)
}

// ErrLeaderElectionLost is returned by Run when the lease was lost while
// leading; the process must exit non-zero and let a fresh start compete again.
var ErrLeaderElectionLost = ha.ErrLeaderElectionLost

// leaderHealthTolerance is how long past its lease expiry a leader that
// failed to renew still reports healthy, as in kube-controller-manager.
const leaderHealthTolerance = 20 * time.Second

// clientConfig returns a copy of the manager's client config with a user agent naming its user.
func (m *Manager) clientConfig(user string) *rest.Config {
	return rest.AddUserAgent(rest.CopyConfig(m.config), "controller-manager/"+user)
}
