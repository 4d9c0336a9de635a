package testcluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var cluster *Cluster

func TestMain(m *testing.M) {
	var err error
	cluster, err = Start(context.Background(), Options{PodStartDelay: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	os.Exit(code)
}

func poll(t *testing.T, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	var pods corev1.PodList
	_ = cluster.Client.List(context.Background(), &pods)
	var states []string
	for _, p := range pods.Items {
		states = append(states, fmt.Sprintf("%s/%s node=%q phase=%s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase))
	}
	t.Fatalf("%s: not within %s: %v\ncomponents: %v\npods: %v\nkube-controller-manager: %s\nkube-scheduler: %s\nkwok: %s",
		what, timeout, err, cluster.Check(), states, cluster.Logs("kube-controller-manager", 3000),
		cluster.Logs("kube-scheduler", 3000), cluster.Logs("kwok", 3000))
}

// TestWorkloadsRunOnFakeNodes checks the real controllers and kwok together: a
// Deployment becomes Available, a Job Completes, and a namespace is really deleted by
// kube-controller-manager.
func TestWorkloadsRunOnFakeNodes(t *testing.T) {
	ctx := context.Background()
	c := cluster.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "smoke", Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: pod}}
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "smoke", Name: "seed"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "seed", Image: "example.com/seed:1"}}}}}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	poll(t, "Deployment available", time.Minute, func() error {
		var got appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &got); err != nil {
			return err
		}
		if got.Status.AvailableReplicas != 2 {
			return fmt.Errorf("%d available", got.Status.AvailableReplicas)
		}
		return nil
	})
	poll(t, "Job complete", time.Minute, func() error {
		var got batchv1.Job
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
			return err
		}
		if got.Status.Succeeded != 1 {
			return fmt.Errorf("succeeded %d, active %d", got.Status.Succeeded, got.Status.Active)
		}
		return nil
	})
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	poll(t, "namespace deleted", 2*time.Minute, func() error {
		err := c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}
