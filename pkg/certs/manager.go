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

package certs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Options configure a Manager.
type Options struct {
	// Namespace and SecretName name the Secret holding the certificates.
	Namespace, SecretName string
	Policy                Policy
	Targets               Targets
	// CAConfigMap, when set, names a ConfigMap in Namespace where the CA
	// bundle is published (key ca-bundle.crt) for clients that verify the
	// manager, such as Prometheus; it holds no private key.
	CAConfigMap string
	// Writer, when set, elects the one replica that writes; nil means every
	// replica writes (a single replica, or tests).
	Writer *WriterElection
	// Resync re-checks everything this often even when nothing changed; the
	// schedule and the watches make it a safety net only. Default 10 minutes.
	Resync time.Duration
}

// syncKey is the only key of the queue: there is one world to reconcile.
const syncKey = "certificates"

// Manager keeps the certificate Secret current and the caBundles of the
// targets equal to its bundle. Every replica runs one: writes are
// compare-then-write with the object's resourceVersion, so replicas that
// act at once cost a conflict, never a wrong result, and a world that is
// right costs no writes. A certificate valid for at least this replica's
// names is right for it, so replicas whose names differ converge on one
// certificate valid for all of them. On the targets only the caBundles and
// the owner marker (CABundleOwnerAnnotation) are written, by server-side
// apply; a target another install owns is reported, never written.
type Manager struct {
	opts    Options
	kube    kubernetes.Interface
	crds    apiextensionsclient.Interface
	content *ServingContent
	now     func() time.Time

	secrets    cache.SharedIndexInformer
	configMaps cache.SharedIndexInformer // nil without Options.CAConfigMap
	targets    []*target
	queue      workqueue.TypedRateLimitingInterface[string]

	// recorder reports a caBundle owned by another install as a Warning
	// Event on this install's Secret; conflicted remembers which targets
	// were reported, so that an Event marks the start of a conflict only.
	recorder   record.EventRecorder
	conflicted map[string]bool

	// writing is the writer Lease's context while this replica holds it.
	writing atomic.Pointer[context.Context]
}

// target is one object whose caBundle the manager keeps.
type target struct {
	kind, name string
	informer   cache.SharedIndexInformer
	bundles    func(runtime.Object) []*[]byte
	// apply writes bundle and the owner marker, and nothing else, and
	// returns the object written.
	apply func(ctx context.Context, obj runtime.Object, bundle []byte, owner string) (runtime.Object, error)
	// patch sends a JSON patch (releasePatch).
	patch func(ctx context.Context, name string, data []byte) error
}

// NewManager builds a Manager; Run starts it.
func NewManager(kube kubernetes.Interface, crds apiextensionsclient.Interface, opts Options) (*Manager, error) {
	if err := opts.Policy.Validate(); err != nil {
		return nil, err
	}
	if opts.Namespace == "" || opts.SecretName == "" {
		return nil, errors.New("the certificate Secret needs a namespace and a name")
	}
	if opts.Resync <= 0 {
		opts.Resync = 10 * time.Minute
	}
	RegisterMetrics()
	m := &Manager{
		opts:       opts,
		kube:       kube,
		crds:       crds,
		content:    NewServingContent(fmt.Sprintf("secret %s/%s", opts.Namespace, opts.SecretName)),
		now:        time.Now,
		conflicted: map[string]bool{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "webhook-certificates"}),
	}
	secrets := kube.CoreV1().Secrets(opts.Namespace)
	m.secrets = oneObjectInformer(opts.SecretName, &corev1.Secret{}, kube,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return secrets.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return secrets.Watch(ctx, o) })

	if opts.CAConfigMap != "" {
		configMaps := kube.CoreV1().ConfigMaps(opts.Namespace)
		m.configMaps = oneObjectInformer(opts.CAConfigMap, &corev1.ConfigMap{}, kube,
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return configMaps.List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return configMaps.Watch(ctx, o)
			})
	}
	admission := kube.AdmissionregistrationV1()
	for _, name := range opts.Targets.MutatingWebhookConfigurations {
		m.targets = append(m.targets, &target{
			kind: "MutatingWebhookConfiguration", name: name,
			informer: oneObjectInformer(name, &admissionregistrationv1.MutatingWebhookConfiguration{}, kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return admission.MutatingWebhookConfigurations().List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return admission.MutatingWebhookConfigurations().Watch(ctx, o)
				}),
			bundles: func(o runtime.Object) []*[]byte {
				return mutatingBundles(o.(*admissionregistrationv1.MutatingWebhookConfiguration))
			},
			apply: func(ctx context.Context, o runtime.Object, bundle []byte, owner string) (runtime.Object, error) {
				return applyMutatingBundle(ctx, kube, o.(*admissionregistrationv1.MutatingWebhookConfiguration), bundle, owner)
			},
			patch: func(ctx context.Context, name string, data []byte) error {
				_, err := admission.MutatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
				return err
			},
		})
	}
	for _, name := range opts.Targets.ValidatingWebhookConfigurations {
		m.targets = append(m.targets, &target{
			kind: "ValidatingWebhookConfiguration", name: name,
			informer: oneObjectInformer(name, &admissionregistrationv1.ValidatingWebhookConfiguration{}, kube,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return admission.ValidatingWebhookConfigurations().List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return admission.ValidatingWebhookConfigurations().Watch(ctx, o)
				}),
			bundles: func(o runtime.Object) []*[]byte {
				return validatingBundles(o.(*admissionregistrationv1.ValidatingWebhookConfiguration))
			},
			apply: func(ctx context.Context, o runtime.Object, bundle []byte, owner string) (runtime.Object, error) {
				return applyValidatingBundle(ctx, kube, o.(*admissionregistrationv1.ValidatingWebhookConfiguration), bundle, owner)
			},
			patch: func(ctx context.Context, name string, data []byte) error {
				_, err := admission.ValidatingWebhookConfigurations().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
				return err
			},
		})
	}
	for _, name := range opts.Targets.CRDs {
		m.targets = append(m.targets, &target{
			kind: "CustomResourceDefinition", name: name,
			informer: oneObjectInformer(name, &apiextensionsv1.CustomResourceDefinition{}, crds,
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return crds.ApiextensionsV1().CustomResourceDefinitions().List(ctx, o)
				},
				func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					return crds.ApiextensionsV1().CustomResourceDefinitions().Watch(ctx, o)
				}),
			bundles: func(o runtime.Object) []*[]byte {
				return crdBundles(o.(*apiextensionsv1.CustomResourceDefinition))
			},
			apply: func(ctx context.Context, o runtime.Object, bundle []byte, owner string) (runtime.Object, error) {
				return applyCRDBundle(ctx, crds, o.(*apiextensionsv1.CustomResourceDefinition), bundle, owner)
			},
			patch: func(ctx context.Context, name string, data []byte) error {
				_, err := crds.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, name, types.JSONPatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
				return err
			},
		})
	}

	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { m.queue.Add(syncKey) },
		UpdateFunc: func(any, any) { m.queue.Add(syncKey) },
		DeleteFunc: func(any) { m.queue.Add(syncKey) },
	}
	for _, inf := range m.informers() {
		if _, err := inf.AddEventHandler(enqueue); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// fieldManager names the manager's writes in managedFields.
const fieldManager = "controller-manager-webhook-certs"

// oneObjectInformer watches the one object named name, so that RBAC can
// limit list and watch to that name (resourceNames).
func oneObjectInformer(name string, obj runtime.Object, client any,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return watchFn(ctx, o)
		},
	}
	// client (the clientset) tells whether it supports watch-list (fakes do not).
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, 0, cache.Indexers{})
}

func (m *Manager) informers() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{m.secrets}
	if m.configMaps != nil {
		out = append(out, m.configMaps)
	}
	for _, t := range m.targets {
		out = append(out, t.informer)
	}
	return out
}

// ServingCertificate is the serving certificate of the Secret, for the
// webhook server; it is empty until the Secret exists.
func (m *Manager) ServingCertificate() *ServingContent { return m.content }

// Run keeps the Secret and the bundles right until ctx is done.
func (m *Manager) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer m.queue.ShutDown()
	logger := klog.FromContext(ctx)
	logger.Info("Starting webhook certificate management", "secret", m.opts.Namespace+"/"+m.opts.SecretName, "names", m.opts.Policy.Names)

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.kube.CoreV1().Events(m.opts.Namespace)})
	m.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fieldManager})

	for _, inf := range m.informers() {
		go inf.RunWithContext(ctx)
	}
	// Serving needs the Secret only. A target that cannot be read (not
	// installed, or no RBAC for it) must not keep the webhooks from being
	// served: it is skipped until its informer has synced, and its first
	// objects then trigger a sync. Readiness (TrustedCheck) does wait for
	// the targets: until they trust the served certificate, the API server
	// routed to this replica would refuse its TLS.
	synced := []cache.InformerSynced{m.secrets.HasSynced}
	if m.configMaps != nil {
		synced = append(synced, m.configMaps.HasSynced)
	}
	if !cache.WaitForNamedCacheSyncWithContext(ctx, synced...) {
		return
	}
	if m.opts.Writer != nil {
		go m.runWriterElection(ctx)
	}
	m.queue.Add(syncKey)
	go wait.UntilWithContext(ctx, m.worker, time.Second)
	<-ctx.Done()
}

func (m *Manager) worker(ctx context.Context) {
	for {
		key, quit := m.queue.Get()
		if quit {
			return
		}
		after, err := m.sync(ctx)
		switch {
		case err != nil && apierrors.IsConflict(err):
			// Another replica (or a stale cache) wrote first: replan.
			klog.FromContext(ctx).V(2).Info("Conflict syncing the webhook certificates; retrying", "err", err)
			m.queue.AddRateLimited(key)
		case err != nil && ctx.Err() == nil:
			klog.FromContext(ctx).Error(err, "Syncing the webhook certificates failed; retrying")
			m.queue.AddRateLimited(key)
		default:
			m.queue.Forget(key)
			m.queue.AddAfter(key, after)
		}
		m.queue.Done(key)
	}
}

// sync brings the Secret and the bundles up to date and returns when it
// must run again at the latest.
func (m *Manager) sync(ctx context.Context) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	now := m.now()
	writer := m.writerContext(ctx)
	if writer == nil {
		return m.serveOnly(ctx), nil
	}
	after, err := m.write(klog.NewContext(writer, logger), now)
	if err != nil && writer.Err() != nil && ctx.Err() == nil {
		// The Lease was lost mid-write: the next holder carries on.
		logger.V(2).Info("Lost the webhook certificates' Lease while writing", "err", err)
		return m.serveOnly(ctx), nil
	}
	return after, err
}

// serveOnly loads the Secret written by the writer, without writing; the
// Secret's and the Lease's events bring the next sync.
func (m *Manager) serveOnly(ctx context.Context) time.Duration {
	obj, exists, err := m.secrets.GetStore().GetByKey(m.opts.Namespace + "/" + m.opts.SecretName)
	if err == nil && exists {
		secret := obj.(*corev1.Secret)
		if m.content.Set(secret.Data[TLSCertKey], secret.Data[TLSKeyKey]) {
			klog.FromContext(ctx).Info("Loaded the webhook serving certificate", "secret", klog.KObj(secret), "resourceVersion", secret.ResourceVersion)
		}
		recordExpiry(secret.Data)
	}
	return m.opts.Resync
}

// write brings the Secret and the bundles up to date and returns when it
// must run again at the latest.
func (m *Manager) write(ctx context.Context, now time.Time) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	secret, err := m.ensureSecret(ctx, now)
	if err != nil {
		return 0, err
	}
	if m.content.Set(secret.Data[TLSCertKey], secret.Data[TLSKeyKey]) {
		logger.Info("Loaded the webhook serving certificate", "secret", klog.KObj(secret), "resourceVersion", secret.ResourceVersion)
	}
	recordExpiry(secret.Data)
	var errs []error
	for _, t := range m.targets {
		if err := m.inject(ctx, t, secret); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.publishBundle(ctx, secret.Data[CABundleKey]); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	after := NextCheck(now, secret.Data).Sub(now)
	if after > m.opts.Resync {
		after = m.opts.Resync
	}
	return after + 100*time.Millisecond, nil
}

// ensureSecret creates the Secret if there is none, or brings it up to date
// when the plan says so, and returns the Secret as stored.
func (m *Manager) ensureSecret(ctx context.Context, now time.Time) (*corev1.Secret, error) {
	logger := klog.FromContext(ctx)
	obj, exists, err := m.secrets.GetStore().GetByKey(m.opts.Namespace + "/" + m.opts.SecretName)
	if err != nil {
		return nil, err
	}
	if !exists {
		data, changes, err := m.opts.Policy.Plan(now, nil, m.trusted)
		if err != nil {
			return nil, err
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: m.opts.Namespace, Name: m.opts.SecretName,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "ndsl-controller-manager"},
			},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}
		created, err := m.kube.CoreV1().Secrets(m.opts.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// Another replica came first: use theirs.
			logger.V(2).Info("Another replica created the webhook certificate Secret first; using it", "secret", klog.KObj(secret))
			return m.kube.CoreV1().Secrets(m.opts.Namespace).Get(ctx, m.opts.SecretName, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("creating the webhook certificate Secret: %w", err)
		}
		logger.Info("Created the webhook certificate Secret", "secret", klog.KObj(created), "changes", changes)
		return created, nil
	}

	secret := obj.(*corev1.Secret)
	data, changes, err := m.opts.Policy.Plan(now, secret.Data, m.trusted)
	if err != nil {
		return nil, err
	}
	if len(changes) == 0 {
		return secret, nil
	}
	update := secret.DeepCopy()
	update.Data = data
	// The resourceVersion from the cache makes this a compare-and-swap: a
	// replica that planned from an older Secret gets a conflict and replans.
	updated, err := m.kube.CoreV1().Secrets(m.opts.Namespace).Update(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, fmt.Errorf("updating the webhook certificate Secret (%v): %w", changes, err)
	}
	logger.Info("Updated the webhook certificate Secret", "secret", klog.KObj(updated), "changes", changes)
	return updated, nil
}

// trusted tells whether every target that exists already trusts ca; a
// target not read yet may exist and counts as not trusting.
func (m *Manager) trusted(ca *x509.Certificate) bool {
	for _, t := range m.targets {
		if !t.informer.HasSynced() {
			return false
		}
		obj, exists, err := t.informer.GetStore().GetByKey(t.name)
		if err != nil || !exists {
			continue
		}
		if !trustsCA(t.bundles(obj.(runtime.Object)), ca) {
			return false
		}
	}
	return true
}

// owner is what the marker on a target says of this install.
func (m *Manager) owner() string { return m.opts.Namespace + "/" + m.opts.SecretName }

// inject sets the target's bundles to bundle when they differ, unless
// another install owns them: then it reports the conflict and writes
// nothing, so two installs never fight over a cluster-scoped caBundle.
// What it wrote it leaves owned by no field manager (releasePatch).
func (m *Manager) inject(ctx context.Context, t *target, secret *corev1.Secret) error {
	bundle := secret.Data[CABundleKey]
	if !t.informer.HasSynced() {
		return nil
	}
	obj, exists, err := t.informer.GetStore().GetByKey(t.name)
	if err != nil || !exists {
		caBundleConflict.WithLabelValues(t.kind, t.name).Set(0)
		return err // a target not installed (yet) is not an error; its creation triggers a sync
	}
	if len(t.bundles(obj.(runtime.Object))) == 0 {
		caBundleConflict.WithLabelValues(t.kind, t.name).Set(0)
		return nil // no webhook to trust us (a CRD without a conversion webhook)
	}
	meta, err := apimeta.Accessor(obj)
	if err != nil {
		return err
	}
	owner := meta.GetAnnotations()[CABundleOwnerAnnotation]
	if owner != "" && owner != m.owner() {
		caBundleConflict.WithLabelValues(t.kind, t.name).Set(1)
		if key := t.kind + "/" + t.name; !m.conflicted[key] && m.recorder != nil {
			m.conflicted[key] = true
			m.recorder.Eventf(secret, corev1.EventTypeWarning, "CABundleOwnedElsewhere",
				"Not setting the caBundle of %s %s: annotation %s says install %s owns it", t.kind, t.name, CABundleOwnerAnnotation, owner)
		}
		// Not retried with backoff: the owner's change is an event of this
		// target, which brings the sync back.
		klog.FromContext(ctx).Error(nil, "Another install owns the caBundle; not writing it. Configure each install with its own webhook configurations and CRDs, or remove the annotation to hand it over",
			"kind", t.kind, "name", t.name, "annotation", CABundleOwnerAnnotation, "owner", owner, "self", m.owner())
		return nil
	}
	caBundleConflict.WithLabelValues(t.kind, t.name).Set(0)
	delete(m.conflicted, t.kind+"/"+t.name)
	live := obj.(runtime.Object)
	if owner != m.owner() || needsBundle(t.bundles(live), bundle) {
		if live, err = t.apply(ctx, live, bundle, m.owner()); err != nil {
			return fmt.Errorf("applying the caBundle of %s %s: %w", t.kind, t.name, err)
		}
		klog.FromContext(ctx).Info("Set the caBundle", "kind", t.kind, "name", t.name, "owner", m.owner())
	}
	// Decided from managedFields, so that a release lost to a conflict, or
	// the ownership an earlier version kept, is released on the next sync.
	patch, err := releasePatch(live)
	if err != nil || patch == nil {
		return err
	}
	if err := t.patch(ctx, t.name, patch); err != nil {
		return fmt.Errorf("releasing the caBundle of %s %s: %w", t.kind, t.name, err)
	}
	klog.FromContext(ctx).V(2).Info("Released the caBundle's fields", "kind", t.kind, "name", t.name, "fieldManager", fieldManager)
	return nil
}

// publishBundle keeps the CA ConfigMap's bundle equal to bundle.
func (m *Manager) publishBundle(ctx context.Context, bundle []byte) error {
	if m.configMaps == nil {
		return nil
	}
	client := m.kube.CoreV1().ConfigMaps(m.opts.Namespace)
	obj, exists, err := m.configMaps.GetStore().GetByKey(m.opts.Namespace + "/" + m.opts.CAConfigMap)
	if err != nil {
		return err
	}
	if !exists {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: m.opts.Namespace, Name: m.opts.CAConfigMap,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "ndsl-controller-manager"},
			},
			Data: map[string]string{CABundleKey: string(bundle)},
		}
		_, err := client.Create(ctx, cm, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // another replica's; its event brings us back here
		}
		if err != nil {
			return fmt.Errorf("publishing the CA bundle: %w", err)
		}
		klog.FromContext(ctx).Info("Published the CA bundle", "configMap", klog.KObj(cm))
		return nil
	}
	cm := obj.(*corev1.ConfigMap)
	if cm.Data[CABundleKey] == string(bundle) {
		return nil
	}
	update := cm.DeepCopy()
	if update.Data == nil {
		update.Data = map[string]string{}
	}
	update.Data[CABundleKey] = string(bundle)
	if _, err := client.Update(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("publishing the CA bundle: %w", err)
	}
	klog.FromContext(ctx).Info("Published the CA bundle", "configMap", klog.KObj(cm))
	return nil
}
