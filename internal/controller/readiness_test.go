package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidonow/eva/internal/testenv"
)

// TestReadyOnlyOnceCachesSync runs the operator binary as an identity no RBAC lets list
// anything: its informers cannot sync, so /readyz must keep failing (a rollout would
// wait on it) while /healthz passes. Once the identity is granted rights (cluster-admin
// here: the point is the informers, not the operator's RBAC), the informers sync and
// /readyz passes.
func TestReadyOnlyOnceCachesSync(t *testing.T) {
	applyOperatorBase(t)
	const user = "system:serviceaccount:eva-system:eva-readiness-probe"
	kubeconfig := env.KubeConfigAs(t, user)
	probeAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	p := testenv.StartOperator(t, kubeconfig, []string{"OPERATOR_VERSION=1.0.0", "POD_NAMESPACE=" + claimsNamespace},
		"--overlays=overlays", "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address="+probeAddr)
	testenv.WaitListening(t, probeAddr, 60*time.Second)

	probe := func(path string) (int, string) {
		resp, err := http.Get("http://" + probeAddr + path + "?verbose")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// Unready for as long as the watches cannot list.
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if code, body := probe("/readyz"); code == http.StatusOK {
			t.Fatalf("/readyz passed while the operator may list nothing:\n%s", body)
		}
		if p.Exited() {
			t.Fatalf("the operator exited:\n%s", p.Tail(30))
		}
	}
	if code, body := probe("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz %d while the process is alive:\n%s", code, body)
	}
	if _, body := probe("/readyz"); !strings.Contains(body, "informers failed") {
		t.Errorf("/readyz does not name the informer check:\n%s", body)
	}

	// Granted its rights, the operator becomes ready.
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "eva-readiness-probe"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding) })
	var code int
	var body string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if code, body = probe("/readyz"); code == http.StatusOK {
			return
		}
		if p.Exited() {
			t.Fatalf("the operator exited:\n%s", p.Tail(30))
		}
	}
	t.Fatalf("/readyz %d 90s after the operator was granted its rights:\n%s", code, body)
}
