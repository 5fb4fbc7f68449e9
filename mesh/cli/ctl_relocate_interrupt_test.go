package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/meshnode/meshnode/mesh/admin"
)

// Ctrl-C while `ctl relocate` follows a host command stops the following,
// not the command: the message says so and how to follow it again
// (--request-id), also when the signal comes while a progress read is in
// flight — a slow node, when an operator is most likely to give up. There
// it said "lost contact with the node while relocate … ran: admin listener
// at …: Get …: context canceled", as if the node had gone, without the id.
func TestCtlRelocateInterruptedDuringARead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j := admin.Job{ID: "op-7", State: admin.JobRunning, Progress: admin.Progress{Total: 10, Moved: 1}}
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/relocate":
			w.WriteHeader(http.StatusAccepted)
		case r.Method == "GET" && r.URL.Path == "/v1/relocate/op-7":
			if reads.Add(1) == 2 {
				// The operator presses Ctrl-C while this read waits for
				// a busy node.
				cancel()
				<-r.Context().Done()
				return
			}
		default:
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(j)
	}))
	defer srv.Close()
	t.Setenv("MESHNODE_ADMIN__TOKEN", "")

	var out, errb bytes.Buffer
	code := Main(ctx, []string{"ctl", "relocate", srv.URL, "--poll", "1ms"}, &out, &errb)
	if code != ExitError {
		t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, ExitError, out.String(), errb.String())
	}
	got := errb.String()
	if want := "the host command goes on on the node; follow it with --request-id op-7"; !strings.Contains(got, want) {
		t.Errorf("stderr %q; want it to say %q", got, want)
	}
	if strings.Contains(got, "lost contact") {
		t.Errorf("stderr %q: the interrupt reads as a lost node", got)
	}
}

// Ctrl-C while `ctl relocate` waits for the node to answer its POST (a
// slow admin listener) returns at once saying so, that the node may or may
// not have started the command, and the request id that finds it (ctl
// status) or follows it (--request-id) — an id the client chose, since the
// node's answer with its own never came. Before, it said "admin listener
// at …: Post …: context canceled", as if the node were unreachable, with no
// id to follow a command that had started (an operator try-out).
func TestCtlRelocateInterruptedDuringThePost(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var sentID string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/relocate" {
			http.NotFound(w, r)
			return
		}
		var req admin.RelocateRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		sentID = req.RequestID
		// The operator gives up on a slow node while it has not answered.
		cancel(signalError("interrupt signal received"))
		<-r.Context().Done()
	}))
	defer srv.Close()
	t.Setenv("MESHNODE_ADMIN__TOKEN", "")

	var out, errb bytes.Buffer
	code := Main(ctx, []string{"ctl", "relocate", srv.URL}, &out, &errb)
	got := errb.String()
	if code != ExitError {
		t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, ExitError, out.String(), got)
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(sentID) {
		t.Fatalf("request id sent %q: want one chosen by the client, to follow the command by", sentID)
	}
	for _, want := range []string{"meshnode ctl relocate: interrupt signal received before the node answered",
		"--request-id " + sentID, "meshnode ctl status " + srv.URL} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr %q; want it to say %q", got, want)
		}
	}
	if strings.Contains(got, "context canceled") {
		t.Errorf("stderr %q: the interrupt reads as an unreachable node", got)
	}
}
