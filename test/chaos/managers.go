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

package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/ndsl/controller-manager/test/e2e/framework"
)

// Each manager slot authenticates as its own ServiceAccount, so that the
// audit log tells the processes apart.
const slotAccountPrefix = "chaos-manager-"

func slotAccount(slot int) string { return fmt.Sprintf("%s%d", slotAccountPrefix, slot) }

// slotUser is the username of a slot's ServiceAccount in the audit log.
func slotUser(slot int) string {
	return "system:serviceaccount:" + framework.ManagerNamespace + ":" + slotAccount(slot)
}

// userSlot is the slot of an audit username, -1 for anyone else.
func userSlot(user string) int {
	prefix := "system:serviceaccount:" + framework.ManagerNamespace + ":" + slotAccountPrefix
	if !strings.HasPrefix(user, prefix) {
		return -1
	}
	var slot int
	if _, err := fmt.Sscanf(user[len(prefix):], "%d", &slot); err != nil {
		return -1
	}
	return slot
}

// grantManagerRBAC creates the slots' ServiceAccounts and adds them to every
// binding of manifests/default that names the manifests' ServiceAccount:
// they get exactly the manager's rights.
func grantManagerRBAC(ctx context.Context, c *framework.Cluster, slots int) error {
	var subjects []rbacv1.Subject
	for slot := range slots {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: framework.ManagerNamespace, Name: slotAccount(slot)})
	}
	isManager := func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == framework.ManagerNamespace && s.Name == framework.ManagerServiceAccount
	}
	crbs, err := c.Kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	granted := 0
	for _, b := range crbs.Items {
		if !slices.ContainsFunc(b.Subjects, isManager) {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := c.Kube.RbacV1().ClusterRoleBindings().Get(ctx, b.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			live.Subjects = append(live.Subjects, subjects...)
			_, err = c.Kube.RbacV1().ClusterRoleBindings().Update(ctx, live, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("granting ClusterRoleBinding %s: %w", b.Name, err)
		}
		granted++
	}
	rbs, err := c.Kube.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range rbs.Items {
		if !slices.ContainsFunc(b.Subjects, isManager) {
			continue
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := c.Kube.RbacV1().RoleBindings(b.Namespace).Get(ctx, b.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			live.Subjects = append(live.Subjects, subjects...)
			_, err = c.Kube.RbacV1().RoleBindings(b.Namespace).Update(ctx, live, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("granting RoleBinding %s/%s: %w", b.Namespace, b.Name, err)
		}
		granted++
	}
	if granted == 0 {
		return fmt.Errorf("no binding of manifests/default names ServiceAccount %s/%s", framework.ManagerNamespace, framework.ManagerServiceAccount)
	}
	return nil
}

// exit is one manager process's end.
type exit struct {
	slot        int
	name        string
	at          time.Time
	description string
	killed      bool // by the suite (kill -9 or the final stop)
	terminated  bool // SIGTERM by a rollout: must exit 0
	code        int
	leaseLost   bool // it said "leader election lost"
}

// supervisor keeps one manager process per slot running, restarting one that
// exits as a kubelet restarts a container, and records every exit.
type supervisor struct {
	launcher *framework.Launcher
	args     [][]string // per slot

	mu sync.Mutex
	// lease is the Lease the leader faults act on, the App controller's in
	// current, the layout the managers were last rolled to.
	lease   string
	current leaseLayout
	procs   []*framework.Process
	paused  map[*framework.Process]bool
	killed  map[*framework.Process]bool
	// terminated are the processes a rollout sent SIGTERM.
	terminated map[*framework.Process]bool
	exits      []exit
	starts     int
	stopping   bool
	wg         sync.WaitGroup
}

func newSupervisor(launcher *framework.Launcher, kubeconfigs []string, cfg config) *supervisor {
	s := &supervisor{launcher: launcher, lease: cfg.targetLease(), current: cfg.layout(), paused: map[*framework.Process]bool{},
		killed: map[*framework.Process]bool{}, terminated: map[*framework.Process]bool{}}
	for _, kc := range kubeconfigs {
		args := []string{
			"--kubeconfig=" + kc,
			"--leader-elect-lease-duration=" + leaseDuration.String(),
			"--leader-elect-renew-deadline=" + renewDeadline.String(),
			"--leader-elect-retry-period=" + retryPeriod.String(),
			// The load is stored as the suite writes it: the design notes'
			// inversion of enable_ingress on create (test/e2e covers it)
			// would turn the Apps without a Service invalid.
			"--app-invert-enable-ingress=false",
			// A deleted Pipelines' namespace (a fault) is the controller's to
			// create again.
			"--pipeline-create-namespaces=true",
			"--app-ingress-domain=" + appDomain,
			"--ingress-default-domain=" + serviceDomain,
		}
		s.args = append(s.args, append(args, cfg.layout().args()...))
	}
	s.procs = make([]*framework.Process, len(kubeconfigs))
	return s
}

// start runs every slot (bounded by startCtx) and watches it until ctx ends.
func (s *supervisor) start(startCtx, ctx context.Context) error {
	for slot := range s.args {
		p, err := s.launcher.Start(startCtx, slotName(slot), s.args[slot]...)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.procs[slot] = p
		s.starts++
		s.mu.Unlock()
		s.wg.Go(func() { s.watch(ctx, slot, p) })
	}
	return nil
}

// watch waits for p to exit, records it and starts the slot again.
func (s *supervisor) watch(ctx context.Context, slot int, p *framework.Process) {
	logger := klog.FromContext(ctx)
	for {
		<-p.Done()
		s.mu.Lock()
		e := exit{slot: slot, name: p.Name, at: p.ExitedAt(), description: p.ExitDescription(), killed: s.killed[p],
			terminated: s.terminated[p], code: p.ExitCode(), leaseLost: p.ExitCode() == 1 && p.LogContains("leader election lost")}
		s.exits = append(s.exits, e)
		stopping := s.stopping
		s.mu.Unlock()
		logger.Info("Manager exited", "process", p.Name, "how", e.description, "killedBySuite", e.killed, "leaseLost", e.leaseLost)
		if stopping {
			return
		}
		// A kubelet's first restart is immediate, then backs off; one
		// second keeps the run short without hiding a crash loop, which
		// the exits record.
		for {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			s.mu.Lock()
			stopping = s.stopping
			s.mu.Unlock()
			if stopping {
				return
			}
			// Named after the slot: the launcher numbers its restarts.
			s.mu.Lock()
			args := slices.Clone(s.args[slot])
			s.mu.Unlock()
			next, err := s.launcher.Start(ctx, slotName(slot), args...)
			if err == nil {
				s.mu.Lock()
				s.procs[slot] = next
				s.starts++
				stopping = s.stopping
				if stopping {
					s.killed[next] = true
				}
				s.mu.Unlock()
				if stopping { // stop began during the restart and did not see it
					next.Stop(20 * time.Second)
					return
				}
				p = next
				break
			}
			logger.Info("Restarting a manager failed; retrying", "slot", slot, "err", err)
		}
	}
}

// processes returns the current process of every slot.
func (s *supervisor) processes() []*framework.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs)
}

// leader returns the running process whose identity holds the Lease the
// faults act on, or nil.
func (s *supervisor) leader(ctx context.Context, c *framework.Cluster) (*framework.Process, string, error) {
	holder, err := leaseHolder(ctx, c, s.targetLease())
	if err != nil || holder == "" {
		return nil, holder, err
	}
	return s.byIdentity(holder), holder, nil
}

// byIdentity returns the running process whose leader election identity is
// id, or nil.
func (s *supervisor) byIdentity(id string) *framework.Process {
	for _, p := range s.processes() {
		// Its own identity, logged at start; others' appear in "New leader".
		if p != nil && !p.Exited() && p.LogContains(`identity="`+id+`"`) {
			return p
		}
	}
	return nil
}

// leaseHolder returns the holder identity of the Lease called name, "" when
// it is free or missing.
func leaseHolder(ctx context.Context, c *framework.Cluster, name string) (string, error) {
	l, err := c.Kube.CoordinationV1().Leases(framework.ManagerNamespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// terminate sends SIGTERM to p, as a kubelet does to a replaced pod; its
// exit is the suite's doing and must be a clean one.
func (s *supervisor) terminate(p *framework.Process) error {
	s.mu.Lock()
	s.terminated[p] = true
	s.mu.Unlock()
	return p.Signal(syscall.SIGTERM)
}

// wasTerminated reports whether p was sent SIGTERM by the suite.
func (s *supervisor) wasTerminated(p *framework.Process) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terminated[p]
}

// targetLease is the Lease the leader faults act on.
func (s *supervisor) targetLease() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// layout is the Lease layout the managers were last rolled to.
func (s *supervisor) layout() leaseLayout {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

// setLayout records that the managers were rolled to l: the leader faults
// act on its App controller's Lease from now on.
func (s *supervisor) setLayout(l leaseLayout) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current, s.lease = l, l.targetLease()
}

// setArgs replaces a slot's arguments for its next start.
func (s *supervisor) setArgs(slot int, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.args[slot] = args
}

// slotArgs returns a slot's arguments.
func (s *supervisor) slotArgs(slot int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.args[slot])
}

// kill sends SIGKILL to p, recording that the suite did it.
func (s *supervisor) kill(p *framework.Process) error {
	s.mu.Lock()
	s.killed[p] = true
	s.mu.Unlock()
	return p.Signal(syscall.SIGKILL)
}

// pause stops p with SIGSTOP for d, then continues it.
func (s *supervisor) pause(ctx context.Context, p *framework.Process, d time.Duration) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.mu.Lock()
	s.paused[p] = true
	s.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	s.mu.Lock()
	delete(s.paused, p)
	s.mu.Unlock()
	return p.Signal(syscall.SIGCONT)
}

// stop ends every process (SIGTERM, SIGKILL after the grace) and the
// watchers; exits from now on are the suite's.
func (s *supervisor) stop() {
	s.mu.Lock()
	s.stopping = true
	procs := slices.Clone(s.procs)
	for _, p := range procs {
		if p != nil {
			s.killed[p] = true
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			_ = p.Signal(syscall.SIGCONT)
			wg.Go(func() { p.Stop(20 * time.Second) })
		}
	}
	wg.Wait()
	s.wg.Wait()
}

// recordedExits returns the exits so far.
func (s *supervisor) recordedExits() []exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exits)
}

func slotName(slot int) string { return fmt.Sprintf("manager-%d", slot) }

// kubeconfigPath is where a slot's kubeconfig is written.
func kubeconfigPath(dir string, slot int) string {
	return filepath.Join(dir, fmt.Sprintf("manager-%d.kubeconfig", slot))
}
