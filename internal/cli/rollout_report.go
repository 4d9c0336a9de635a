package cli

import (
	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// stepReport is what rollout plan and rollout promote print with -o json or yaml: the
// step decided (or taken), for a program to read instead of the commit text.
type stepReport struct {
	Rollout   string `json:"rollout"`
	Namespace string `json:"namespace,omitempty"`
	// Promotes is false when the step changes nothing (plan's "nothing to promote").
	Promotes bool `json:"promotes"`
	// Subject is the step's commit subject; Health says where the tenants' health was
	// read from.
	Subject    string           `json:"subject"`
	Health     string           `json:"health"`
	Supersedes []string         `json:"supersedes,omitempty"`
	Admitted   []admittedTenant `json:"admitted"`
	// Files are the release files the step writes (promote: wrote).
	Files []string `json:"files,omitempty"`
	// Commit is the commit promote made ("" for plan, or with --commit=false).
	Commit string `json:"commit,omitempty"`
	// Status is the release's status after the step.
	Status evav1.EvaRolloutStatus `json:"status"`
}

// admittedTenant is a tenant a step gives the release.
type admittedTenant struct {
	Code string `json:"code"`
	Name string `json:"name"`
	Wave int32  `json:"wave"`
}

// report is the step as a stepReport.
func (st *step) report() stepReport {
	r := st.target.Rollout
	rep := stepReport{Rollout: r.Name, Namespace: r.Namespace, Promotes: len(st.changed) > 0,
		Subject: st.subject(), Health: st.health, Supersedes: st.superseded,
		Admitted: []admittedTenant{}, Status: r.Status}
	for _, t := range st.decision.Admitted {
		rep.Admitted = append(rep.Admitted, admittedTenant{Code: t.Code, Name: t.Name, Wave: t.Wave})
	}
	for _, f := range st.changed {
		rep.Files = append(rep.Files, f.Path)
	}
	return rep
}
