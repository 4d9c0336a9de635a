package render

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/tenant"
)

// AlertRulesName returns the name of a tenant's PrometheusRule.
func AlertRulesName(code string) string { return "eva-" + DirName(code) + "-streams" }

// StreamFullThreshold is the share of a stream's MaxMsgs above which the alert fires.
const StreamFullThreshold = 0.8

func (s *scope) eventsStream() (runtime.Object, error) {
	return s.stream(tenant.EventsStream(s.code), tenant.EventsSubject(s.code), "events")
}

func (s *scope) commandsStream() (runtime.Object, error) {
	return s.stream(tenant.CommandsStream(s.code), tenant.CommandsSubject(s.code), "commands")
}

// stream renders one NACK Stream. Its subject filter is what keeps tenants apart at the
// server: a tenant's stream only ever captures its own subjects.
func (s *scope) stream(name, subject, purpose string) (runtime.Object, error) {
	limits := s.tier.Streams
	st := &nackv1beta2.Stream{
		TypeMeta:   metav1.TypeMeta{APIVersion: nackv1beta2.GroupVersion.String(), Kind: "Stream"},
		ObjectMeta: s.meta(tenant.StreamObjectName(name), "eva.aidonow.com/stream", purpose),
		Spec: nackv1beta2.StreamSpec{
			Name:        name,
			Description: fmt.Sprintf("Capsule %s %s", s.code, purpose),
			Subjects:    []string{subject},
			Retention:   "limits",
			MaxMsgs:     limits.MaxMsgs,
			MaxBytes:    limits.MaxBytes,
			MaxAge:      limits.MaxAge.Duration.String(),
			Discard:     "old",
			Storage:     "file",
			Replicas:    limits.Replicas,
		},
	}
	if s.r.Env.Settings.NATSAccounts {
		// Made in the tenant's own NATS account: NACK connects as its Account says.
		account := tenant.NATSAccountObject
		st.Spec.Account = &account
	}
	return st, nil
}

// natsAccount renders, in an environment with natsAccounts, the tenant's NACK Account:
// NACK makes the tenant's Streams with the credentials the operator writes into the
// tenant's namespace (a user of the tenant's own NATS account), on NACK's own servers.
// Only the Secret's name: the credentials never enter the rendered tree.
func (s *scope) natsAccount() (runtime.Object, error) {
	if !s.r.Env.Settings.NATSAccounts {
		return nil, nil
	}
	return &nackv1beta2.Account{
		TypeMeta:   metav1.TypeMeta{APIVersion: nackv1beta2.GroupVersion.String(), Kind: "Account"},
		ObjectMeta: s.meta(tenant.NATSAccountObject),
		Spec: nackv1beta2.AccountSpec{
			Creds: &nackv1beta2.AccountCreds{Secret: &nackv1beta2.SecretRef{Name: tenant.NATSCredsSecret(s.code)}, File: tenant.NATSCredsKey},
		},
	}, nil
}

// alertRules fires when a stream holds more than 80% of its MaxMsgs for 5 minutes. The
// depth comes from the operator's capsule_queue_depth gauge.
func (s *scope) alertRules() (runtime.Object, error) {
	threshold := int64(float64(s.tier.Streams.MaxMsgs) * StreamFullThreshold)
	var rules []monitoringv1.Rule
	for _, stream := range []string{tenant.EventsStream(s.code), tenant.CommandsStream(s.code)} {
		rules = append(rules, monitoringv1.Rule{
			Alert: "EvaCapsuleStreamNearlyFull",
			Expr:  fmt.Sprintf(`capsule_queue_depth{capsule=%q,stream=%q} > %d`, s.code, stream, threshold),
			For:   "5m",
			Labels: map[string]string{
				"severity": "warning", "capsule": s.code, "stream": stream,
			},
			Annotations: map[string]string{
				"summary": fmt.Sprintf("Stream %s of capsule %s is over 80%% full", stream, s.code),
				"description": fmt.Sprintf("Stream %s has held more than %d of its %d messages for 5 minutes; "+
					"consumers of capsule %s are falling behind.", stream, threshold, s.tier.Streams.MaxMsgs, s.code),
			},
		})
	}
	return &monitoringv1.PrometheusRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: monitoringv1.GroupVersion.String(), Kind: "PrometheusRule"},
		ObjectMeta: s.meta(AlertRulesName(s.code)),
		Spec: monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{
			Name: "eva-capsule-" + DirName(s.code), Rules: rules,
		}}},
	}, nil
}
