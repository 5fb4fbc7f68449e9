package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
)

// §7.1 restart table, "After Ready, before restoring the first message",
// with a real kill -9: three `meshnode run` servers on Redis; a client's
// first message to a session that does not exist yet activates it on one
// server and runs for 3 s; that server is SIGKILLed mid-turn. Once its lease
// has ended, the client's next message finds the record Ready with its first
// message not done: another server takes it over, runs the stored first
// message first, then this one — which counts it.
func TestMultiProcessInstanceSpotKilledMidFirstMessage(t *testing.T) {
	r := startRollMesh(t, 3)
	m := r.client.Manager()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := m.SendInstance(ctx, "k9", []byte("sleep 3000"), mesh.InstanceType(demoapp.SessionType)); err != nil {
		t.Fatal(err)
	}
	var ref mesh.SpotRef
	waitUntil(t, 10*time.Second, "the session to be Ready", func() bool {
		var err error
		ref, err = m.FindInstance(ctx, "k9")
		return err == nil
	}, r.procs...)
	victim := -1
	for i, rid := range r.rids {
		if rid == hex.EncodeToString(ref.NodeRID) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("the session is on %x, no server of the test", ref.NodeRID)
	}
	if err := r.procs[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.dead[victim] = true
	_ = r.procs[victim].cmd.Wait()
	// Until the lease (TTL 2 s) ends the owner looks alive: messages are
	// refused as unavailable. Then the next one restores the session.
	var got []byte
	waitUntil(t, 45*time.Second, "a message after the owner's lease ended", func() bool {
		b, err := m.RequestInstance(ctx, "k9", []byte("count"))
		if err != nil {
			return false
		}
		got = b
		return true
	}, r.procs...)
	if string(got) != "1" {
		t.Fatalf("count %q: want 1 (the restored first message ran before this one)", got)
	}
	ref2, err := m.FindInstance(ctx, "k9")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(ref2.NodeRID, ref.NodeRID) || ref2.ObjectGeneration != ref.ObjectGeneration {
		t.Fatalf("after recovery on %x gen %d; want another node, generation %d kept", ref2.NodeRID, ref2.ObjectGeneration, ref.ObjectGeneration)
	}
	restored := 0
	for i, p := range r.procs {
		if i != victim && p.seen("instance spot recovered: its node died before the first message was done; that message runs first here") {
			restored++
		}
	}
	if restored != 1 {
		t.Fatalf("%d servers logged the recovery, want 1", restored)
	}
}
