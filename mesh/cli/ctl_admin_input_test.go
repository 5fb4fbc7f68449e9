package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnode/meshnode/mesh/admin"
)

// `ctl relocate --request-id a/b` is refused before anything starts (a
// usage error naming the allowed characters), or followed to its outcome.
// Until 2026-12-07 (review R6) the POST started the host command on the
// node (any id of at most 128 bytes was accepted) and ctl then followed it
// at base+"/v1/relocate/"+id, unescaped: the GET named another path, 404,
// and the command printed "lost contact with the node … 404" and exited 1
// — for a host command that completed with every object moved.
func TestCtlRelocateRequestIDWithSlash(t *testing.T) {
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
		if !strings.Contains(stderr.String(), "--request-id") {
			t.Fatalf("refused, but stderr does not name --request-id:\n%s", stderr.String())
		}
		return // refused before anything started: fine
	}
	if code != ExitOK {
		t.Fatalf("ctl relocate --request-id a/b: exit %d after the node ran the command %d time(s) to completion\nstdout:\n%s\nstderr:\n%s",
			code, runs.Load(), stdout.String(), stderr.String())
	}
}

// A MESHNODE_ADMIN__TOKEN no client can send (a secret file's trailing
// newline) is a usage error naming the variable, not net/http's "invalid
// header field value" (until 2026-12-07); the token is not printed.
func TestCtlAdminTokenWithNewlineIsAUsageError(t *testing.T) {
	srv := httptest.NewServer(admin.New(admin.Options{Token: testAdminToken, Gatherer: prometheus.NewRegistry(),
		Ready: func() error { return nil }, Status: func() admin.Status { return admin.Status{} }}).Handler())
	defer srv.Close()
	t.Setenv("MESHNODE_ADMIN__TOKEN", testAdminToken+"\n")
	var stdout, stderr bytes.Buffer
	code := ctlStatus(context.Background(), []string{srv.URL}, &stdout, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), "MESHNODE_ADMIN__TOKEN") || strings.Contains(stderr.String(), testAdminToken) {
		t.Fatalf("ctl status with a token ending in a newline: exit %d, want %d naming MESHNODE_ADMIN__TOKEN (not the token)\nstderr:\n%s",
			code, ExitUsage, stderr.String())
	}
}
