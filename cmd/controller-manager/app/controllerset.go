package app

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// controllerSet is the enabled controllers, built, with the shared informers
// they read started: everything a replica runs before it may write. A warm
// standby holds one while it waits for the Lease; a cold one builds it once
// it leads.
type controllerSet struct {
	controllers []Controller
	broadcaster record.EventBroadcaster
	startEvents func()
	stop        func()
}

// startControllers builds every enabled controller (registering its
// informers and event handlers) and starts the shared informers, which run
// until stop. The event handlers fill the controllers' queues; nothing takes
// keys from them until run. Nothing here writes to the API server: the
// Event sink starts with the workers (startEvents).
func (m *Manager) startControllers(ctx context.Context) (*controllerSet, error) {
	logger := klog.FromContext(ctx)
	cc, factories, err := m.controllerContext()
	if err != nil {
		return nil, err
	}
	eventClient, err := cc.KubeClient("events")
	if err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	cc.recorders = func(component string) record.EventRecorder {
		return broadcaster.NewRecorder(Scheme, corev1.EventSource{Component: component})
	}
	set := &controllerSet{broadcaster: broadcaster}
	var once sync.Once
	set.startEvents = func() {
		once.Do(func() {
			broadcaster.StartStructuredLogging(3)
			broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: eventClient.CoreV1().Events("")})
		})
	}

	for _, d := range m.enabled {
		c, err := d.New(klog.NewContext(ctx, klog.LoggerWithName(logger, d.Name)), cc)
		if err != nil {
			broadcaster.Shutdown()
			return nil, fmt.Errorf("building controller %s: %w", d.Name, err)
		}
		set.controllers = append(set.controllers, c)
	}

	// Every informer a controller needs has now been requested: start them.
	// They outlive a drain (the reconciles in flight read from them) and
	// stop with stop, whose factory Shutdown waits for them.
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	for _, f := range factories {
		f.start(informerCtx.Done())
	}
	m.status.startedInformers(len(factories))
	for _, f := range factories {
		go func() {
			if f.waitForSync(informerCtx.Done()) {
				m.status.addUnsynced(-1)
			}
		}()
	}
	m.status.setControllers(set.controllers, false)
	set.stop = func() {
		m.status.setControllers(nil, false)
		stopInformers()
		for _, f := range factories {
			f.shutdown()
		}
		broadcaster.Shutdown()
	}
	return set, nil
}
