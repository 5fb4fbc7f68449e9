package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/internal/textable"
	"github.com/meshnode/meshnode/mesh/admin"
	"github.com/meshnode/meshnode/mesh/record"
)

// `meshnode ctl status` and `ctl relocate`: clients of a node's admin
// listener (mesh/admin; docs/OPERATIONS.md "Admin endpoint"). The token is
// read from the environment (MESHNODE_ADMIN__TOKEN), never from a flag:
// command lines are visible to other users.

const ctlStatusUsage = `usage: meshnode ctl status <admin-url>

Prints a node's status from its admin listener (admin.listen): descriptor
state, readiness, owner lease, hosted objects, peers and the host command in
progress. <admin-url> is http://host:port (or host:port). The token, when the
node has one, is read from MESHNODE_ADMIN__TOKEN.`

const ctlRelocateUsage = `usage: meshnode ctl relocate <admin-url> [--drain] [--request-id ID] [--poll DURATION]

Runs a host Relocate on the node behind <admin-url> (every object it owns
moves to the other serving nodes), or with --drain a drain (the same, then
the node's orderly stop). Shows live progress (a progress bar on a terminal,
plain lines otherwise), then the outcome per object kind. Exits 0 when every
object moved (or was skipped by its policy), 1 otherwise. --request-id makes
the command idempotent: running it again with the same id follows the same
host command instead of starting another; an id is 1 to 128 letters,
digits, '.', '_' and '-', beginning with a letter or digit (without it, one
is chosen here and printed). Ctrl-C stops the following, not the command;
it names the id to follow it with, also when the node had not answered yet
(the command may then have started or not: ctl status shows it). The token
is read from MESHNODE_ADMIN__TOKEN.`

// adminTimeout bounds one call to an admin listener.
const adminTimeout = 10 * time.Second

// adminClient talks to one admin listener.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

func newAdminClient(rawURL string) (*adminClient, error) {
	u := strings.TrimRight(rawURL, "/")
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return nil, fmt.Errorf("admin URL %q: want http://host:port", rawURL)
	}
	// The commands add their paths (/v1/status, /v1/relocate) to the
	// listener's address; one given with a path was answered 404.
	if _, rest, _ := strings.Cut(u, "://"); strings.Contains(rest, "/") || strings.ContainsAny(rest, "?#") {
		return nil, fmt.Errorf("admin URL %q: want the listener's address alone, http://host:port (the command adds /v1/...)", rawURL)
	}
	env := config.EnvName("admin.token")
	tok := os.Getenv(env)
	// A newline the variable took from a secret file failed in net/http
	// ("invalid header field value"), blanks as a token mismatch (401).
	if err := admin.CheckToken(tok); err != nil {
		return nil, fmt.Errorf("%s %w", env, err)
	}
	return &adminClient{base: u, token: tok, http: &http.Client{Timeout: adminTimeout}}, nil
}

// errUnauthorized: the node wants a token we do not have (or another).
var errUnauthorized = errors.New("unauthorized")

func (c *adminClient) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, unreachable(c.base, c.http.Timeout, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		hint := "set MESHNODE_ADMIN__TOKEN to the node's admin.token"
		if c.token != "" {
			hint = "MESHNODE_ADMIN__TOKEN does not match the node's admin.token"
		}
		return resp.StatusCode, fmt.Errorf("%w: %s", errUnauthorized, hint)
	case resp.StatusCode >= 300:
		return resp.StatusCode, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: unreadable answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// unreachable says that no admin listener answered at base, and why, in an
// operator's terms (the client's own text names the URL and a socket
// error).
func unreachable(base string, timeout time.Duration, err error) error {
	// A node's mesh port sends its ZMTP greeting and waits: the client
	// times out, or reads it as a malformed response once the port drops
	// the HTTP request.
	if !errors.Is(err, syscall.ECONNREFUSED) && givenMeshPort(base) {
		return fmt.Errorf("%s is a meshnode mesh port (node.endpoint), not an admin listener: it answered with a ZMTP greeting; "+
			"give the node's admin.listen address", base)
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no admin listener at %s (connection refused): is the node running, with admin.listen set to that address?", base)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("the admin listener at %s did not answer within %v: is the node paused or overloaded?", base, timeout)
	}
	return fmt.Errorf("admin listener at %s: %w", base, err)
}

// givenMeshPort reports whether base's host:port is a meshnode mesh port,
// looking at its first bytes for at most a second.
func givenMeshPort(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return false
	}
	return redisconn.IsMeshPort(u.Host, time.Second)
}

func ctlStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshnode ctl status"
	fs := newFlagSet(name)
	if code, done := parseFlags(fs, args, helpText(fs, ctlStatusUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, name, "want exactly one <admin-url>, got %d arguments", fs.NArg())
	}
	c, err := newAdminClient(fs.Arg(0))
	if err != nil {
		return usageError(stderr, name, "%v", err)
	}
	var st admin.Status
	if _, err := c.do(ctx, "GET", "/v1/status", nil, &st); err != nil {
		fmt.Fprintln(stderr, "meshnode ctl status:", err)
		return ExitError
	}
	if err := printStatus(stdout, st); err != nil {
		fmt.Fprintln(stderr, "meshnode ctl status:", err)
		return ExitError
	}
	return ExitOK
}

func printStatus(w io.Writer, st admin.Status) error {
	ready := "yes"
	if !st.Ready {
		ready = "no (" + st.NotReady + ")"
	}
	fmt.Fprintf(w, "node %s  mesh %s  role %s  state %s  ready %s\n", st.RID, st.Mesh, st.Role, st.State, ready)
	fmt.Fprintf(w, "endpoint %s  lifecycle generation %d  version %s\n", st.Endpoint, st.LifecycleGeneration, st.Version)
	fmt.Fprintf(w, "owner %s  lease generation %d  new work admitted for %s without a renewal\n", st.OwnerID, st.LeaseGeneration,
		(time.Duration(st.LeaseRemainingSeconds * float64(time.Second))).Round(time.Millisecond))
	if st.LeaseRenewError != "" {
		fmt.Fprintf(w, "lease renewals failing: %s\n", st.LeaseRenewError)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "objects hosted: %d\n", st.Objects.Hosted)
	var rows [][]string
	for _, k := range sortedKeys(st.Objects.ByType) {
		kind, typ, _ := strings.Cut(k, "/")
		rows = append(rows, []string{kind, typ, strconv.Itoa(st.Objects.ByType[k])})
	}
	if len(rows) > 0 {
		if err := textable.Write(w, []string{"KIND", "TYPE", "HOSTED"}, rows); err != nil {
			return err
		}
	}
	rows = rows[:0]
	for _, k := range sortedKeys(st.Objects.Counters) {
		rows = append(rows, []string{k, strconv.FormatUint(st.Objects.Counters[k], 10)})
	}
	fmt.Fprintln(w)
	if err := textable.Write(w, []string{"COUNTER", "VALUE"}, rows); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npeers admitted: %d\n", len(st.Peers))
	rows = rows[:0]
	for _, p := range st.Peers {
		rows = append(rows, []string{p.RID, p.Endpoint, strconv.FormatUint(p.LifecycleGeneration, 10),
			fmt.Sprintf("%d / %d", p.RecordsIn, p.RecordsOut), fmt.Sprintf("%s / %s", bytesText(p.BytesIn), bytesText(p.BytesOut)),
			strconv.Itoa(p.Queued)})
	}
	if len(rows) > 0 {
		if err := textable.Write(w, []string{"RID", "ENDPOINT", "GEN", "RECORDS IN/OUT", "BYTES IN/OUT", "QUEUED"}, rows); err != nil {
			return err
		}
	}
	switch j := st.HostCommand; {
	case j != nil && j.ID == "":
		// Started on the node itself, not through the listener: it has
		// no job to follow with ctl relocate --request-id.
		fmt.Fprintf(w, "\nhost command (%s, started on the node: SIGTERM or the application) %s: %s\n", kindName(j.Drain), j.State,
			progressText(j.Progress))
	case j != nil:
		fmt.Fprintf(w, "\nhost command %s (%s) %s: %s\n", j.ID, kindName(j.Drain), j.State, progressText(j.Progress))
	default:
		fmt.Fprintln(w, "\nhost command: none running")
	}
	for _, s := range st.Stores {
		state := "replicas keep up: every write waits for them"
		if s.Behind {
			state = "REPLICAS BEHIND: writes go on without waiting (a failover now can lose them)"
		}
		fmt.Fprintf(w, "%s store (replica_acks): %s\n", s.Store, state)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func bytesText(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func kindName(drain bool) string {
	if drain {
		return "drain"
	}
	return "relocate"
}

func progressText(p admin.Progress) string {
	return fmt.Sprintf("%d/%d moved, %d failed, %d skipped, %d remaining", p.Moved, p.Total, p.Failed, p.Skipped, p.Remaining())
}

func ctlRelocate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshnode ctl relocate"
	fs := newFlagSet(name)
	drain := fs.Bool("drain", false, "drain: move everything, then stop the node")
	reqID := fs.String("request-id", "", "idempotency id (default: a fresh one)")
	poll := fs.Duration("poll", 250*time.Millisecond, "how often progress is read")
	if code, done := parseFlags(fs, args, helpText(fs, ctlRelocateUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, name, "want exactly one <admin-url>, got %d arguments", fs.NArg())
	}
	if *poll <= 0 {
		return usageError(stderr, name, "--poll must be positive, got %v", *poll)
	}
	// Refused here, before anything starts, as the node would refuse it
	// (400): until 2026-12-07 an id with '/' or '?' started the command,
	// which this client then could not follow.
	if err := admin.CheckRequestID(*reqID); err != nil {
		return usageError(stderr, name, "--request-id: %v", err)
	}
	c, err := newAdminClient(fs.Arg(0))
	if err != nil {
		return usageError(stderr, name, "%v", err)
	}
	if *reqID == "" {
		// Chosen here rather than by the node: a POST interrupted before
		// the node answered (Ctrl-C, a slow listener) may have started the
		// command, and this id is then the only way to find it.
		var b [8]byte
		_, _ = rand.Read(b[:])
		*reqID = hex.EncodeToString(b[:])
	}
	var j admin.Job
	code, err := c.do(ctx, "POST", "/v1/relocate", admin.RelocateRequest{RequestID: *reqID, Drain: *drain}, &j)
	if err != nil && ctx.Err() != nil {
		// Until 2026-12-07: "admin listener at …: Post …: context
		// canceled", as if the node were unreachable, and no id.
		fmt.Fprintf(stderr, "meshnode ctl relocate: %v before the node answered: it may have started %s %s or not; "+
			"`meshnode ctl status %s` shows a host command running; --request-id %s follows it (and starts it if it did not start)\n",
			context.Cause(ctx), kindName(*drain), *reqID, c.base, *reqID)
		return ExitError
	}
	if err != nil {
		fmt.Fprintln(stderr, "meshnode ctl relocate:", err)
		return ExitError
	}
	verb := "started"
	if code == http.StatusOK {
		verb = "following (already started)"
	}
	fmt.Fprintf(stdout, "%s %s %s on %s\n", kindName(j.Drain), j.ID, verb, c.base)
	view := newProgressView(stdout)
	final, err := followJob(ctx, c, j.ID, *poll, view.show)
	view.done()
	if err != nil {
		fmt.Fprintln(stderr, "meshnode ctl relocate:", err)
		return ExitError
	}
	return printOutcome(stdout, stderr, final)
}

// followJob polls the job until it ends. A drain stops the node (and its
// listener) once its moves are over: a failed read after the progress
// showed the end is that stop, not an error.
func followJob(ctx context.Context, c *adminClient, id string, poll time.Duration, show func(admin.Progress)) (admin.Job, error) {
	var last admin.Job
	for {
		var j admin.Job
		_, err := c.do(ctx, "GET", "/v1/relocate/"+url.PathEscape(id), nil, &j)
		switch {
		case err != nil && last.Drain && (last.Progress.End != "" || last.Result != nil):
			last.State = admin.JobDone
			return last, nil
		case err != nil && ctx.Err() != nil:
			// Interrupted while this read was in flight: the command is
			// not lost, only no longer followed (until 2026-12-07 this
			// said "lost contact with the node").
			return last, stoppedFollowing(ctx, id)
		case err != nil:
			return last, fmt.Errorf("lost contact with the node while %s %s ran: %w", kindName(last.Drain), id, err)
		}
		show(j.Progress)
		if j.State != admin.JobRunning {
			return j, nil
		}
		last = j
		select {
		case <-ctx.Done():
			return last, stoppedFollowing(ctx, id)
		case <-time.After(poll):
		}
	}
}

// stoppedFollowing is followJob's error once ctx ended (Ctrl-C): why, and
// that the host command itself runs on.
func stoppedFollowing(ctx context.Context, id string) error {
	return fmt.Errorf("%w (the host command goes on on the node; follow it with --request-id %s)", context.Cause(ctx), id)
}

// progressView shows progress: a progress bar on a terminal, else a plain
// line whenever the counts change.
type progressView struct {
	w    io.Writer
	bar  *progressbar.ProgressBar
	last admin.Progress
}

func newProgressView(w io.Writer) *progressView {
	v := &progressView{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		v.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionShowCount(),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("objects"), progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	return v
}

func (v *progressView) show(p admin.Progress) {
	if p == v.last {
		return
	}
	v.last = p
	if v.bar == nil {
		fmt.Fprintf(v.w, "progress: %s\n", progressText(p))
		return
	}
	if v.bar.GetMax() != p.Total {
		v.bar.ChangeMax(p.Total)
	}
	v.bar.Describe(fmt.Sprintf("moved %d  failed %d  remaining %d", p.Moved, p.Failed, p.Remaining()))
	_ = v.bar.Set(p.Total - p.Remaining())
}

func (v *progressView) done() {
	if v.bar != nil {
		_ = v.bar.Finish()
		fmt.Fprintln(v.w)
	}
}

// movedTo counts the moved objects by target node, most first (ties by
// RoutingId): how a host command spread them.
func movedTo(objs []admin.ObjectOutcome) [][]string {
	count := map[string]int{}
	for _, o := range objs {
		if o.Outcome == "moved" && o.Target != "" {
			count[o.Target]++
		}
	}
	targets := slices.Collect(maps.Keys(count))
	slices.SortFunc(targets, func(a, b string) int {
		if c := cmp.Compare(count[b], count[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	rows := make([][]string, len(targets))
	for i, t := range targets {
		rows[i] = []string{t, strconv.Itoa(count[t])}
	}
	return rows
}

// notMoved reports an object the command left on the node for a reason
// worth reading: its move failed, or the deadline came first.
func notMoved(o admin.ObjectOutcome) bool { return o.Outcome == "failed" || o.Outcome == "notStarted" }

// notMovedWhy counts the objects not moved by outcome and reason (rows of
// OUTCOME, OBJECTS, REASON, most first): a command that could move nothing
// (every target full, the last server of a mesh) lists thousands of objects
// with one reason, which this says in one line before the list.
func notMovedWhy(objs []admin.ObjectOutcome) [][]string {
	type why struct{ outcome, reason string }
	count := map[why]int{}
	for _, o := range objs {
		if notMoved(o) {
			count[why{o.Outcome, o.Reason}]++
		}
	}
	keys := slices.Collect(maps.Keys(count))
	slices.SortFunc(keys, func(a, b why) int {
		if c := cmp.Compare(count[b], count[a]); c != 0 {
			return c
		}
		if c := strings.Compare(a.outcome, b.outcome); c != 0 {
			return c
		}
		return strings.Compare(a.reason, b.reason)
	})
	rows := make([][]string, len(keys))
	for i, k := range keys {
		rows[i] = []string{k.outcome, strconv.Itoa(count[k]), k.reason}
	}
	return rows
}

// printOutcome prints the final table and returns the exit status: 0 when
// nothing failed and nothing was left unstarted.
func printOutcome(stdout, stderr io.Writer, j admin.Job) int {
	p := j.Progress
	end := p.End
	if j.Result != nil {
		p, end = j.Result.Progress, j.Result.End
	}
	if j.State == admin.JobFailed && p.Total == 0 {
		// Refused at its start (another host command or a drain runs, the
		// node is stopping): no outcome to tabulate, and its end is still
		// the zero "open".
		fmt.Fprintf(stdout, "%s %s failed before it looked at any object\n", kindName(j.Drain), j.ID)
		fmt.Fprintln(stderr, "meshnode ctl relocate:", j.Error)
		return ExitError
	}
	fmt.Fprintf(stdout, "%s %s ended: %s\n", kindName(j.Drain), j.ID, end)
	// Instance Spots are skipped whatever their policy (a host command
	// never moves them): counted apart, or they read as relocation
	// disabled (an operator try-out: 10 sessions so labelled).
	instances := 0
	if j.Result != nil {
		for _, o := range j.Result.Objects {
			if o.Kind == string(record.ObjectInstanceSpot) && o.Outcome == "skipped" {
				instances++
			}
		}
	}
	rows := [][]string{{"moved", strconv.Itoa(p.Moved)}, {"skipped (relocation disabled)", strconv.Itoa(p.Skipped - instances)}}
	if instances > 0 {
		rows = append(rows, []string{"skipped (Instance Spots, never moved)", strconv.Itoa(instances)})
	}
	rows = append(rows, [][]string{
		{"failed (still here, working)", strconv.Itoa(p.Failed)}, {"not started (deadline)", strconv.Itoa(p.NotStarted)},
		{"gone (closed meanwhile)", strconv.Itoa(p.Gone)}, {"total", strconv.Itoa(p.Total)},
	}...)
	if err := textable.Write(stdout, []string{"OUTCOME", "OBJECTS"}, rows); err != nil {
		fmt.Fprintln(stderr, "meshnode ctl relocate:", err)
		return ExitError
	}
	if j.Result != nil {
		if rows := movedTo(j.Result.Objects); len(rows) > 0 {
			fmt.Fprintln(stdout, "\nmoved to:")
			_ = textable.Write(stdout, []string{"TARGET", "OBJECTS"}, rows)
		}
		var failed [][]string
		for _, o := range j.Result.Objects {
			if notMoved(o) {
				failed = append(failed, []string{o.Kind, o.ID, o.Outcome, o.Reason})
			}
		}
		if len(failed) > 0 {
			fmt.Fprintln(stdout, "\nnot moved, by reason:")
			_ = textable.Write(stdout, []string{"OUTCOME", "OBJECTS", "REASON"}, notMovedWhy(j.Result.Objects))
			fmt.Fprintln(stdout, "\nobjects not moved:")
			_ = textable.Write(stdout, []string{"KIND", "ID", "OUTCOME", "REASON"}, failed)
		}
	}
	if j.Error != "" {
		fmt.Fprintln(stderr, "meshnode ctl relocate:", j.Error)
		return ExitError
	}
	if p.Failed > 0 || p.NotStarted > 0 || end != "completed" {
		return ExitError
	}
	return ExitOK
}
