package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// maxJobs bounds the finished host commands kept for GET (oldest go first).
const maxJobs = 32

// maxRequestID bounds a requestId.
const maxRequestID = 128

// jobs are this node's host commands by id; one runs at a time.
type jobs struct {
	mu      sync.Mutex
	m       map[string]*job
	order   []string
	running string
}

type job struct {
	mu sync.Mutex
	j  Job
	// read is closed once a GET served the job with its result (see
	// Server.Linger).
	read     chan struct{}
	readOnce sync.Once
}

func (j *job) snapshot() Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.j
	if out.Result != nil {
		r := *out.Result
		out.Result = &r
	}
	return out
}

// current returns the running job, if any.
func (s *Server) current() *Job {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	if s.jobs.running == "" {
		return nil
	}
	j := s.jobs.m[s.jobs.running].snapshot()
	return &j
}

// CurrentJob is the host command running now, for the status document.
func (s *Server) CurrentJob() *Job { return s.current() }

func (s *Server) postRelocate(w http.ResponseWriter, r *http.Request) {
	if s.opts.Relocate == nil {
		writeText(w, http.StatusNotImplemented, "this node runs no host commands")
		return
	}
	// The body is whole here, at most maxBody bytes (readBody); until
	// 2026-12-07 this read stopped at 4 KiB and decoded what it had.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeText(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	req, err := decodeRelocateRequest(body)
	if err != nil {
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	j, created, err := s.startJob(req)
	switch {
	case errors.Is(err, ErrBusy):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "running": s.current()})
		return
	case err != nil:
		writeText(w, http.StatusBadRequest, err.Error())
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusAccepted
	}
	w.Header().Set("Location", "/v1/relocate/"+j.ID)
	writeJSON(w, code, j)
}

// decodeRelocateRequest reads POST /v1/relocate's body: empty, or one JSON
// object with known fields and nothing after it but blanks, whose
// requestId (if any) is valid (CheckRequestID).
func decodeRelocateRequest(body []byte) (RelocateRequest, error) {
	var req RelocateRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	const want = `body must be one JSON object {"requestId": "...", "drain": false}`
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%s: %w", want, err)
	}
	// Decode stops after the first value: a second object, or garbage,
	// was taken for nothing until 2026-12-07.
	if _, err := dec.Token(); err != io.EOF {
		return req, fmt.Errorf("%s: data after the object at byte %d", want, dec.InputOffset())
	}
	if err := CheckRequestID(req.RequestID); err != nil {
		return req, err
	}
	return req, nil
}

// CheckRequestID reports whether id can name a host command: empty (the
// node picks one), or 1 to 128 bytes of A-Z a-z 0-9 '.' '_' '-' beginning
// with a letter or digit. So the id is the same in a JSON body, in the
// path of GET /v1/relocate/{id} (the Location header) and on a command
// line: until 2026-12-07 any id was taken, and one holding '/', '?', '#'
// or '%' started a command whose job no GET could read (ctl relocate
// reported "lost contact" for a command that completed).
func CheckRequestID(id string) error {
	if id == "" {
		return nil
	}
	if len(id) > maxRequestID {
		return fmt.Errorf("requestId is %d bytes, at most %d", len(id), maxRequestID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		if i == 0 {
			return fmt.Errorf("requestId %q must begin with a letter or digit (then letters, digits, '.', '_', '-')", id)
		}
		return fmt.Errorf("requestId %q holds %q at byte %d: only letters, digits, '.', '_' and '-' are allowed", id, id[i:i+1], i)
	}
	return nil
}

func (s *Server) getRelocate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.jobs.mu.Lock()
	j := s.jobs.m[id]
	s.jobs.mu.Unlock()
	if j == nil {
		writeText(w, http.StatusNotFound, "no host command "+id+" on this node")
		return
	}
	snap := j.snapshot()
	writeJSON(w, http.StatusOK, snap)
	if snap.Result != nil {
		j.readOnce.Do(func() { close(j.read) })
	}
}

// Linger waits until the running drain's result, reported before the
// node's stop, has been read by a GET, or ctx ends: a drain stops the node
// and its listener, and a caller following the drain (meshnode ctl
// relocate --drain) would otherwise lose the outcome — always when the
// drain had little to move. It returns at once when no drain runs; the
// error is ctx's when it ended before anyone read the result.
func (s *Server) Linger(ctx context.Context) error {
	s.jobs.mu.Lock()
	j := s.jobs.m[s.jobs.running]
	s.jobs.mu.Unlock()
	if j == nil || !j.snapshot().Drain {
		return nil
	}
	select {
	case <-j.read:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startJob returns the job of req.RequestID if it exists (created false),
// else starts one unless another is running.
func (s *Server) startJob(req RelocateRequest) (Job, bool, error) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	if req.RequestID != "" {
		if j, ok := s.jobs.m[req.RequestID]; ok {
			snap := j.snapshot()
			if snap.Drain != req.Drain {
				return Job{}, false, fmt.Errorf("requestId %q was a %s", req.RequestID, kindOf(snap.Drain))
			}
			return snap, false, nil
		}
	}
	if s.jobs.running != "" {
		return Job{}, false, fmt.Errorf("%w (%s)", ErrBusy, s.jobs.running)
	}
	id := req.RequestID
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	j := &job{j: Job{ID: id, Drain: req.Drain, State: JobRunning, StartedAt: time.Now().UTC().Format(time.RFC3339Nano)},
		read: make(chan struct{})}
	s.jobs.m[id] = j
	s.jobs.order = append(s.jobs.order, id)
	s.jobs.running = id
	for len(s.jobs.order) > maxJobs {
		old := s.jobs.order[0]
		s.jobs.order = s.jobs.order[1:]
		if old != s.jobs.running {
			delete(s.jobs.m, old)
		}
	}
	s.log.Info("admin: host command started", "id", id, "kind", kindOf(req.Drain))
	go s.run(j)
	return j.snapshot(), true, nil
}

// run executes one host command. It does not use the HTTP request's
// context: the command outlives the POST.
func (s *Server) run(j *job) {
	progress := func(p Progress) {
		j.mu.Lock()
		j.j.Progress = p
		j.mu.Unlock()
	}
	early := func(r Result) {
		j.mu.Lock()
		j.j.Result, j.j.Progress = &r, r.Progress
		j.mu.Unlock()
	}
	res, err := s.opts.Relocate(context.Background(), j.j.Drain, progress, early)
	j.mu.Lock()
	j.j.Result = &res
	j.j.Progress = res.Progress
	j.j.State = JobDone
	if err != nil {
		j.j.State, j.j.Error = JobFailed, err.Error()
	}
	id := j.j.ID
	j.mu.Unlock()
	s.jobs.mu.Lock()
	if s.jobs.running == id {
		s.jobs.running = ""
	}
	s.jobs.mu.Unlock()
	s.log.Info("admin: host command ended", "id", id, "end", res.End, "moved", res.Progress.Moved,
		"failed", res.Progress.Failed, "err", err)
}

func kindOf(drain bool) string {
	if drain {
		return "drain"
	}
	return "relocate"
}
