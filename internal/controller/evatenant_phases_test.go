package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// TestRunPhases: phases run in order, the soonest requeue wins, an error or a phase that
// decided the outcome ends the run.
func TestRunPhases(t *testing.T) {
	var ran []string
	step := func(name string, after time.Duration, err error, done bool) phase {
		return func(_ context.Context, s *scope) (ctrl.Result, error) {
			ran = append(ran, name)
			s.done = s.done || done
			return ctrl.Result{RequeueAfter: after}, err
		}
	}
	boom := errors.New("boom")
	cases := map[string]struct {
		phases []phase
		ran    string
		after  time.Duration
		err    error
	}{
		"all, soonest requeue": {[]phase{step("a", time.Minute, nil, false), step("b", 0, nil, false), step("c", 5*time.Second, nil, false)},
			"abc", 5 * time.Second, nil},
		"error ends the run": {[]phase{step("a", time.Second, nil, false), step("b", 0, boom, false), step("c", 0, nil, false)},
			"ab", 0, boom},
		"decided outcome ends the run, its requeue stands": {[]phase{step("a", 0, nil, false), step("b", time.Minute, nil, true), step("c", time.Second, nil, false)},
			"ab", time.Minute, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ran = nil
			res, err := runPhases(context.Background(), &scope{}, tc.phases)
			got := ""
			for _, r := range ran {
				got += r
			}
			if got != tc.ran || res.RequeueAfter != tc.after || !errors.Is(err, tc.err) {
				t.Errorf("ran %q, requeue %v, err %v; want %q, %v, %v", got, res.RequeueAfter, err, tc.ran, tc.after, tc.err)
			}
		})
	}
}
