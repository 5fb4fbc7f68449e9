package mesh

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/buildinfo"
	"github.com/meshnode/meshnode/mesh/admin"
	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/record"
)

const adminToken = "test-admin-token-0123456789"

// adminGet fetches path from node i's admin listener with the token.
func (c *cluster) adminGet(t *testing.T, i int, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+c.nodes[i].AdminAddr()+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue is the value of the sample of family name whose labels
// contain every given label pair, from a Prometheus text exposition; -1 when
// absent.
func metricValue(body, name string, labels ...string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[strings.LastIndex(rest, " "):]), 64)
		if err == nil {
			return v
		}
	}
	return -1
}

func adminCluster(t *testing.T, n int) *cluster {
	return newCluster(t, n, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Admin = config.AdminConfig{Listen: "127.0.0.1:0", Token: adminToken}
	})
}

// Issue 14 "Done when": metric families move as traffic flows; probes
// change state when the lease lapses.
func TestAdminMetricsMoveWithTraffic(t *testing.T) {
	c := adminCluster(t, 2)
	ctx := ctxT(t, 30*time.Second)
	_, body := c.adminGet(t, 1, "/metrics")
	hosted0 := metricValue(body, "meshnode_objects_hosted", `kind="actor"`, `type="`+testActorType+`"`)
	delivered0 := metricValue(body, "meshnode_messages_delivered_total")
	for i := 0; i < 3; i++ {
		ref, err := c.m(0).CreateActor(ctx, fmt.Sprintf("m-%d", i), testActorType)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 5; k++ {
			if _, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, body := c.adminGet(t, 1, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	if got := metricValue(body, "meshnode_objects_hosted", `kind="actor"`, `type="`+testActorType+`"`); got != max(hosted0, 0)+3 {
		t.Fatalf("hosted gauge %v, want %v+3", got, hosted0)
	}
	if got := metricValue(body, "meshnode_messages_delivered_total"); got < delivered0+15 {
		t.Fatalf("delivered %v, want at least %v", got, delivered0+15)
	}
	for _, want := range []string{
		`meshnode_store_operation_duration_seconds_count{op="write",outcome="ok",store="location"}`,
		`meshnode_transport_records_total{direction="in",peer=`,
		`meshnode_transport_bytes_total{direction="out",peer=`,
		`meshnode_transport_flushes_total{peer=`,
		"meshnode_owner_lease_remaining_seconds ",
		"meshnode_ready 1",
		`meshnode_authority_conflicts_total{op="newOwner"} `,
		`meshnode_authority_lane_waits_total{op="reserve"} `,
		`meshnode_authority_lane_wait_seconds_total{op="commit"} `,
		"go_goroutines ",
		`meshnode_build_info{goversion="` + runtime.Version() + `",revision="`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The client node counts its creations.
	_, body = c.adminGet(t, 0, "/metrics")
	if got := metricValue(body, "meshnode_creations_total", `kind="actor"`, `outcome="created"`); got != 3 {
		t.Fatalf("creations created = %v, want 3", got)
	}

	// /v1/status.
	_, body = c.adminGet(t, 1, "/v1/status")
	var st admin.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Ready || st.State != "serving" || len(st.Peers) != 1 || st.Objects.ByType["actor/"+testActorType] < 3 {
		t.Fatalf("status %+v", st)
	}
	if want := buildinfo.Read().String(); st.Version != want || !strings.Contains(st.Version, runtime.Version()) {
		t.Fatalf("status version %q, want %q", st.Version, want)
	}

	// Readiness follows the lease: the lease stops renewing, the gate shuts,
	// /readyz says 503 and the gauge 0.
	if code, _ := c.adminGet(t, 1, "/readyz"); code != 200 {
		t.Fatalf("readyz = %d before the lease lapsed", code)
	}
	c.nodes[1].crashLease()
	eventually(t, 15*time.Second, "readyz to turn 503 once the lease lapsed", func() bool {
		code, _ := c.adminGet(t, 1, "/readyz")
		return code == http.StatusServiceUnavailable
	})
	_, body = c.adminGet(t, 1, "/metrics")
	if metricValue(body, "meshnode_ready") != 0 || metricValue(body, "meshnode_owner_lease_remaining_seconds") != 0 {
		t.Fatal("ready gauge / lease remaining did not drop with the lease")
	}
}

// POST /v1/relocate runs a host Relocate; GET follows it to its outcome.
func TestAdminRelocate(t *testing.T) {
	c := adminCluster(t, 3)
	ctx := ctxT(t, 40*time.Second)
	var ids []string
	for i := 0; i < 6; i++ {
		ref, err := c.m(1).CreateActor(ctx, fmt.Sprintf("r-%d", i), testMoverType)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ref.ActorID)
	}
	src := -1
	for i := 1; i < 3; i++ {
		if n := c.nodes[i].ObjectStats().Hosted; n > 1 {
			src = i
		}
	}
	if src < 0 {
		t.Fatal("no server hosts the actors")
	}
	req, _ := http.NewRequest("POST", "http://"+c.nodes[src].AdminAddr()+"/v1/relocate", strings.NewReader(`{"requestId":"move-1"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST = %d", resp.StatusCode)
	}
	var j admin.Job
	eventually(t, 30*time.Second, "the host command to end", func() bool {
		_, body := c.adminGet(t, src, "/v1/relocate/move-1")
		if err := json.Unmarshal([]byte(body), &j); err != nil {
			t.Fatal(err)
		}
		return j.State != admin.JobRunning
	})
	if j.State != admin.JobDone || j.Result == nil || j.Result.End != "completed" {
		t.Fatalf("job %+v", j)
	}
	moved := 0
	for _, o := range j.Result.Objects {
		if o.Outcome == "moved" {
			moved++
		}
	}
	if moved == 0 || moved != j.Result.Progress.Moved {
		t.Fatalf("moved %d objects, progress says %d", moved, j.Result.Progress.Moved)
	}
	created := map[string]bool{}
	for _, id := range ids {
		created[id] = true
	}
	for _, o := range j.Result.Objects {
		if !created[o.ID] {
			t.Errorf("the job lists %q, which this test did not create", o.ID)
		}
	}
	for _, id := range ids { // moved or not, every actor is still found
		if _, err := c.m(1).FindActor(ctx, id); err != nil {
			t.Errorf("after the host command: FindActor(%s): %v", id, err)
		}
	}
	_, body := c.adminGet(t, src, "/metrics")
	if got := metricValue(body, "meshnode_relocations_total", `outcome="moved"`); got != float64(moved) {
		t.Fatalf("relocations moved = %v, want %d", got, moved)
	}
	if metricValue(body, "meshnode_relocation_bytes_total") <= 0 {
		t.Fatal("no relocation bytes counted")
	}
}

// POST /v1/relocate while a drain runs (a SIGTERM drain, not started
// through the listener): the job fails at once saying a host command runs,
// not "object is moving".
func TestAdminRelocateDuringADrain(t *testing.T) {
	c := adminCluster(t, 2)
	n := c.nodes[1]
	if err := n.beginHostMove(cmdDrain); err != nil { // as Drain holds it
		t.Fatal(err)
	}
	defer n.endHostMove()
	req, _ := http.NewRequest("POST", "http://"+n.AdminAddr()+"/v1/relocate", strings.NewReader(`{"requestId":"during-drain"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var j admin.Job
	eventually(t, 10*time.Second, "the host command to end", func() bool {
		_, body := c.adminGet(t, 1, "/v1/relocate/during-drain")
		if err := json.Unmarshal([]byte(body), &j); err != nil {
			t.Fatal(err)
		}
		return j.State != admin.JobRunning
	})
	if want := "mesh: a host command is already running on this node: a drain (the node is stopping)"; j.State != admin.JobFailed || j.Error != want {
		t.Fatalf("job %s %q, want failed %q", j.State, j.Error, want)
	}
}

// A node whose store refuses writes (Redis out of memory) says so where
// operators and orchestrators look: /v1/status carries the refusal while
// the renewals fail, and /readyz, once the admission deadline passed,
// names it after the lease's own reason.
func TestAdminSaysWhyTheRenewalsFail(t *testing.T) {
	c, rs := refusingCluster(t, 2, func(_ int, cfg *config.Config) {
		cfg.Admin = config.AdminConfig{Listen: "127.0.0.1:0", Token: adminToken}
	})
	rs.on.Store(true)
	defer rs.on.Store(false)
	eventually(t, 15*time.Second, "/v1/status to carry the refused renewal", func() bool {
		_, body := c.adminGet(t, 1, "/v1/status")
		var st admin.Status
		return json.Unmarshal([]byte(body), &st) == nil && strings.Contains(st.LeaseRenewError, "raise maxmemory")
	})
	eventually(t, 15*time.Second, "/readyz to turn 503 naming the refusal", func() bool {
		code, body := c.adminGet(t, 1, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "the renewals fail") && strings.Contains(body, "raise maxmemory")
	})
}

// The admin result names each object's kind; a skipped Instance Spot was
// listed as a User Spot.
func TestAdminResultKinds(t *testing.T) {
	res := HostRelocationResult{Objects: []HostObjectResult{
		{Object: hostmove.Object{ID: "a"}, Outcome: hostmove.Moved},
		{Object: hostmove.Object{ID: "u", Spot: true}, Outcome: hostmove.Moved},
		{Object: hostmove.Object{ID: "i", Spot: true, Instance: true, Unmovable: "an Instance Spot"}, Outcome: hostmove.Skipped},
	}}
	want := map[string]string{"a": string(record.ObjectActor), "u": string(record.ObjectUserSpot), "i": string(record.ObjectInstanceSpot)}
	for _, o := range adminResult(res).Objects {
		if o.Kind != want[o.ID] {
			t.Errorf("%s: kind %q, want %q", o.ID, o.Kind, want[o.ID])
		}
	}
}

// /v1/status shows a drain not started through the admin listener (a
// SIGTERM drain of meshnode run, the application's Drain) as the host
// command running, with its progress. Before, the listener showed only
// its own jobs: `ctl status` said "host command: none running" next to
// state draining (an operator try-out).
func TestAdminStatusShowsADrainNotStartedThroughTheListener(t *testing.T) {
	c := adminCluster(t, 3)
	ctx := ctxT(t, 60*time.Second)
	mine := createOn(t, c, "viewed", 1, 3)
	var (
		once   sync.Once
		status admin.Status
		getErr error
	)
	_, err := c.nodes[1].Drain(ctx, HostRelocateOptions{Progress: func(HostProgress) {
		once.Do(func() {
			req, _ := http.NewRequest("GET", "http://"+c.nodes[1].AdminAddr()+"/v1/status", nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				getErr = err
				return
			}
			defer resp.Body.Close()
			getErr = json.NewDecoder(resp.Body).Decode(&status)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if getErr != nil {
		t.Fatal(getErr)
	}
	j := status.HostCommand
	if j == nil {
		t.Fatalf("status during the drain (state %s) shows no host command", status.State)
	}
	if !j.Drain || j.State != admin.JobRunning || j.ID != "" || j.Progress.Total != len(mine) {
		t.Fatalf("host command %+v, want a running drain without a job id over %d objects", *j, len(mine))
	}
}
