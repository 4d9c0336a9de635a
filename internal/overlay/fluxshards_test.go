package overlay

import (
	"fmt"
	"strings"
	"testing"
)

// fleetCodes makes n distinct capsule codes.
func fleetCodes(n int) []string {
	codes := make([]string, n)
	for i := range codes {
		codes[i] = fmt.Sprintf("%c%c%c%cAA", 'A'+i/17576%26, 'A'+i/676%26, 'A'+i/26%26, 'A'+i%26)
	}
	return codes
}

// TestFluxShardsSpreadEvenlyAndMoveFew: 10,000 tenants over four shards land within a
// few percent of a quarter each; adding a fifth moves only the tenants the fifth takes,
// about a fifth of the fleet.
func TestFluxShardsSpreadEvenlyAndMoveFew(t *testing.T) {
	codes := fleetCodes(10000)
	four := &FluxShards{Shards: []string{"shard1", "shard2", "shard3", "shard4"}}
	five := &FluxShards{Shards: append(four.Shards[:4:4], "shard5")}
	count := map[string]int{}
	moved := 0
	for _, code := range codes {
		before, after := four.ShardOf(code, ""), five.ShardOf(code, "")
		count[before]++
		if before != after {
			moved++
			if after != "shard5" {
				t.Fatalf("%s moved from %s to %s when shard5 was added: only moves to the new shard are expected", code, before, after)
			}
		}
	}
	for _, shard := range four.Shards {
		if share := float64(count[shard]) / float64(len(codes)); share < 0.22 || share > 0.28 {
			t.Errorf("%s holds %.1f%% of the tenants, want about 25%%: %v", shard, 100*share, count)
		}
	}
	if share := float64(moved) / float64(len(codes)); share < 0.17 || share > 0.23 {
		t.Errorf("adding a fifth shard moved %.1f%% of the tenants, want about 20%%", 100*share)
	}
}

// TestFluxShardOfRules: a pin wins over everything ("" pins to the main controllers),
// then the operator shard when followed, then the hash; no settings, no shard.
func TestFluxShardOfRules(t *testing.T) {
	f := &FluxShards{Shards: []string{"shard1", "shard2"}, Assign: map[string]string{"ACMECO": "big", "GLOBEX": ""}, FollowOperatorShard: true}
	for _, tc := range []struct{ code, operatorShard, want string }{
		{"ACMECO", "a", "big"},
		{"GLOBEX", "a", ""},
		{"INITEC", "a", "a"},
		{"INITEC", "", (&FluxShards{Shards: f.Shards}).ShardOf("INITEC", "")},
	} {
		if got := f.ShardOf(tc.code, tc.operatorShard); got != tc.want {
			t.Errorf("ShardOf(%s, %q) = %q, want %q", tc.code, tc.operatorShard, got, tc.want)
		}
	}
	var none *FluxShards
	if got := none.ShardOf("ACMECO", "a"); got != "" {
		t.Errorf("without fluxShards, ShardOf = %q, want none", got)
	}
}

// TestDeliverySettingsRefused: each malformed fluxShards or helmReleasesPerMinute
// setting is refused, naming the field.
func TestDeliverySettingsRefused(t *testing.T) {
	for _, tc := range []struct{ settings, want string }{
		{"fluxShards: {}", "fluxShards: names no shard"},
		{"fluxShards: {shards: [shard1, shard1]}", "fluxShards.shards[1]: \"shard1\" is listed twice"},
		{"fluxShards: {shards: ['a b']}", "fluxShards.shards[0]: \"a b\" is not a label value"},
		{"fluxShards: {shards: ['']}", "fluxShards.shards[0]: \"\" is not a label value"},
		{"fluxShards: {assign: {acmeco: s}}", "fluxShards.assign: \"acmeco\" is not a capsule code"},
		{"fluxShards: {assign: {ACMECO: 'x/y'}}", "fluxShards.assign.ACMECO: \"x/y\" is not a label value"},
		{"fluxShards: {shard: [a]}", "unknown field \"shard\""},
		{"helmReleasesPerMinute: -1", "helmReleasesPerMinute: -1: must not be negative"},
		{"applier: argocd\nargocd: {namespace: argocd, repoURL: 'https://git.example.com/fleet.git', chartRepository: 'registry.example.com/charts'}\nfluxShards: {shards: [a]}",
			"fluxShards: only with applier: flux"},
	} {
		_, err := ParseSettings([]byte(minimalSettings + tc.settings + "\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.settings, err, tc.want)
		}
	}
	s, err := ParseSettings([]byte(minimalSettings + "fluxShards: {shards: [shard1, shard2], assign: {ACMECO: ''}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.FluxShards.ShardOf("ACMECO", ""); got != "" {
		t.Errorf("ACMECO pinned to the main controllers, got %q", got)
	}
}
