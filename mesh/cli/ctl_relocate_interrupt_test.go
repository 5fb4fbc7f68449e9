package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
