package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnode/meshnode/mesh/admin"
)

// Review R6: `ctl relocate --request-id a/b` starts the host command on the
// node (POST accepts any id of at most 128 bytes) and then follows it at
// base+"/v1/relocate/"+id, unescaped: the GET names another path, 404, and
// the command prints "lost contact with the node … 404" and exits 1 — for a
// host command that completed with every object moved (the rule: a CLI
// reports what happened; docs/OPERATIONS.md: --request-id "lets a second
// run follow the same command", exit 1 only "when anything failed or was
// left"). Either the id is refused up front (usage error, nothing started)
// or the command is followed to its outcome.
func TestReviewR6CtlRelocateRequestIDWithSlash(t *testing.T) {
	var runs atomic.Int32
	s := admin.New(admin.Options{Token: testAdminToken, Gatherer: prometheus.NewRegistry(),
		Ready:  func() error { return nil },
		Status: func() admin.Status { return admin.Status{} },
		Relocate: func(context.Context, bool, func(admin.Progress), func(admin.Result)) (admin.Result, error) {
			runs.Add(1)
			p := admin.Progress{Total: 1, Moved: 1, End: "completed"}
			return admin.Result{End: "completed", Progress: p,
				Objects: []admin.ObjectOutcome{{Kind: "actor", ID: "c-1", Outcome: "moved", Target: "0a02"}}}, nil
		}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	t.Setenv("MESHNODE_ADMIN__TOKEN", testAdminToken)
	var stdout, stderr bytes.Buffer
	code := ctlRelocate(context.Background(), []string{srv.URL, "--request-id", "a/b"}, &stdout, &stderr)
	if code == ExitUsage && runs.Load() == 0 {
		return // refused before anything started: fine
	}
	if code != ExitOK {
		t.Fatalf("ctl relocate --request-id a/b: exit %d after the node ran the command %d time(s) to completion\nstdout:\n%s\nstderr:\n%s",
			code, runs.Load(), stdout.String(), stderr.String())
	}
}
