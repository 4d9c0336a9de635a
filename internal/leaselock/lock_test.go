package leaselock

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/testenv"
)

// TestLockIsExclusiveAndSurvivesDeadHolders runs on a real API server: 4 holders taking
// the lock 10 times each never overlap, and a Lease left by a dead holder is taken over
// once its duration has passed.
func TestLockIsExclusiveAndSurvivesDeadHolders(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locks"}}); err != nil {
		t.Fatal(err)
	}
	lock := func(holder string) *Lock {
		return &Lock{Client: env.Client, Reader: env.Client, Namespace: "locks", Name: "publish", Holder: holder, Duration: 2 * time.Second}
	}

	var inside, most, taken atomic.Int32
	var wg sync.WaitGroup
	for h := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lock(string(rune('a' + h)))
			for range 10 {
				_, release, err := l.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				most.Store(max(most.Load(), n))
				taken.Add(1)
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				release()
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 || taken.Load() != 40 {
		t.Errorf("%d holders at once (want 1), %d acquisitions (want 40)", most.Load(), taken.Load())
	}

	// A holder that died: its Lease stays, last renewed long ago.
	old := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	dead := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "locks", Name: "publish"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("dead"), RenewTime: &old, LeaseDurationSeconds: ptr.To(int32(2))}}
	if err := env.Client.Create(ctx, dead); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, release, err := lock("alive").Acquire(waitCtx)
	if err != nil {
		t.Fatalf("the dead holder's lock was not taken over: %v", err)
	}
	release()
}

// TestFailedReleaseIsLogged: a release the API server refuses (here, an account that
// may take the lock but not delete it) leaves the Lease for others to wait out; it is
// logged, never dropped.
func TestFailedReleaseIsLogged(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locks"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "locks", Name: "take-only"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "locks", Name: "take-only"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "take-only"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "locker"}}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "locker"}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	var mu sync.Mutex
	log := funcr.New(func(prefix, args string) { mu.Lock(); logged = append(logged, args); mu.Unlock() }, funcr.Options{})
	l := &Lock{Client: c, Reader: c, Namespace: "locks", Name: "publish", Holder: "a", Log: log}
	var release func()
	deadline := time.Now().Add(10 * time.Second)
	for release == nil {
		// The binding reaches the authorizer a moment after it is created.
		if _, release, err = l.Acquire(ctx); err != nil && time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	release()
	mu.Lock()
	defer mu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "releasing the lock failed") || !strings.Contains(logged[0], "forbidden") {
		t.Errorf("logged %q, want the refused release", logged)
	}
}

// TestHeldLockIsRenewed: a lock held past its duration is renewed, not taken over (a
// publish may outlast the duration); a lock whose Lease is taken from its holder ends
// the holder's context, so the work done under it stops.
func TestHeldLockIsRenewed(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "locks"}}); err != nil {
		t.Fatal(err)
	}
	lock := func(holder string) *Lock {
		return &Lock{Client: env.Client, Reader: env.Client, Namespace: "locks", Name: "publish", Holder: holder, Duration: 2 * time.Second}
	}
	held, release, err := lock("long").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // past the duration
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, other, err := lock("other").Acquire(waitCtx); err == nil {
		other()
		t.Fatal("another holder took the lock held past its duration: it was not renewed")
	}
	if held.Err() != nil {
		t.Fatalf("the holder's context ended while it held the lock: %v", context.Cause(held))
	}

	// Taken from the holder (an operator that judged it abandoned): the holder stops.
	var lease coordinationv1.Lease
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "locks", Name: "publish"}, &lease); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &lease); err != nil {
		t.Fatal(err)
	}
	_, taker, err := lock("taker").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer taker()
	select {
	case <-held.Done():
		if cause := context.Cause(held); !strings.Contains(cause.Error(), "lost") {
			t.Errorf("the holder's context ended with %v, want the lock lost", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the holder's context did not end once its lock was taken")
	}
	release() // the taker's Lease stays
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "locks", Name: "publish"}, &lease); err != nil || ptr.Deref(lease.Spec.HolderIdentity, "") != "taker" {
		t.Errorf("after the old holder's release, the Lease is %v (%v), want the taker's", ptr.Deref(lease.Spec.HolderIdentity, ""), err)
	}
}
