package natsaccount

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aidonow/eva/internal/testenv"
)

// jszServer is a stand-in for one server of a JetStream cluster answering JSZ (a real
// cluster of three cannot run here); it holds, for each page of accounts, the accounts'
// streams, and total accounts in all.
type jszServer struct {
	down, disabled bool
	size, total    int
	pages          map[int]map[string]map[string]uint64 // offset: account: stream: messages
}

func (s jszServer) answer(req []byte) []byte {
	var r jszRequest
	_ = json.Unmarshal(req, &r)
	if !r.Accounts || !r.Streams || !r.StreamLeaderOnly || r.Limit != depthsPage {
		return []byte(`{"error":{"code":400,"description":"unexpected request"}}`)
	}
	if s.disabled {
		return []byte(`{"data":{"disabled":true}}`)
	}
	type stream struct {
		Name  string `json:"name"`
		State struct {
			Msgs uint64 `json:"messages"`
		} `json:"state"`
	}
	type account struct {
		ID      string   `json:"id"`
		Streams []stream `json:"stream_detail"`
	}
	var accounts []account
	for id, streams := range s.pages[r.Offset] {
		a := account{ID: id}
		for name, msgs := range streams {
			st := stream{Name: name}
			st.State.Msgs = msgs
			a.Streams = append(a.Streams, st)
		}
		accounts = append(accounts, a)
	}
	out, _ := json.Marshal(map[string]any{"data": map[string]any{
		"total": s.total, "meta_cluster": map[string]int{"cluster_size": s.size}, "account_details": accounts}})
	return out
}

// TestReadDepthsFromACluster: the depths of every server's streams are read, page after
// page while a server holds more accounts; a server that is down costs one wait and
// its streams, not the other servers' later pages; a server without JetStream is no
// peer. Seen failing before a timeout let the read go on: only the first page read.
func TestReadDepthsFromACluster(t *testing.T) {
	srv := testenv.StartNATS(t, -1, "")
	conn, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	servers := []jszServer{
		{size: 3, total: depthsPage + 1, pages: map[int]map[string]map[string]uint64{
			0:          {"AONE": {"eva-ONEONE-events": 3}},
			depthsPage: {"ATWO": {"eva-TWOTWO-events": 7}},
		}},
		{size: 3, total: 1, pages: map[int]map[string]map[string]uint64{0: {"ATHREE": {"eva-THREEE-commands": 1}}}},
		{down: true},
		{disabled: true},
	}
	for _, s := range servers {
		if s.down {
			continue
		}
		if _, err := conn.Subscribe(jszSubject, func(m *nats.Msg) { _ = m.Respond(s.answer(m.Data)) }); err != nil {
			t.Fatal(err)
		}
	}
	depths, err := ReadDepths(context.Background(), conn, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "2 of 3 NATS server(s) answered") {
		t.Errorf("the server down: %v, want it said", err)
	}
	want := Depths{"AONE": {"eva-ONEONE-events": 3}, "ATWO": {"eva-TWOTWO-events": 7}, "ATHREE": {"eva-THREEE-commands": 1}}
	if fmt.Sprint(depths) != fmt.Sprint(want) {
		t.Errorf("depths %v, want %v", depths, want)
	}
}
