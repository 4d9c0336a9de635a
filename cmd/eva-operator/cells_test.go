package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/aidonow/eva/internal/shard"
)

// TestLeaderElectionIDs: each role, cell, operator version and shard elects its own
// leader, on a Lease name the API server accepts, and replicas alike share one.
func TestLeaderElectionIDs(t *testing.T) {
	sharded, err := shard.Parse("eva.aidonow.com/shard=a")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		r             role
		cell, version string
		shards        shard.Selector
	}{
		{roleOneCluster, "", "", shard.Selector{}},
		{roleOneCluster, "", "1.2.0", shard.Selector{}},
		{roleOneCluster, "", "1.3.0", shard.Selector{}},
		{roleOneCluster, "", "v1.3.0-RC.1+build_7", sharded},
		{roleFleet, "", "1.3.0", shard.Selector{}},
		{roleCell, "eu-1", "1.3.0", shard.Selector{}},
		{roleCell, "us-1", "1.3.0", shard.Selector{}},
		{roleCell, "us-1", "1.3.0", sharded},
	}
	seen := map[string]int{}
	for i, c := range cases {
		id := leaderElectionID(c.r, c.cell, c.version, c.shards)
		if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
			t.Errorf("%+v: %q is no Lease name: %v", c, id, msgs)
		}
		if j, dup := seen[id]; dup {
			t.Errorf("%+v and %+v share the Lease %q", cases[j], c, id)
		}
		seen[id] = i
		if again := leaderElectionID(c.r, c.cell, c.version, c.shards); again != id {
			t.Errorf("%+v: %q then %q", c, id, again)
		}
	}
}
