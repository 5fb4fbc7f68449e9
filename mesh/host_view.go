package mesh

import (
	"sync"
	"time"

	"github.com/meshnode/meshnode/mesh/admin"
)

// hostView is the host command running on this node, whatever started it
// — the admin listener, a SIGTERM drain (meshnode run), the application
// calling Relocate or Drain — for /v1/status and `ctl status`. The admin
// listener knows only the jobs it started: during a SIGTERM drain the
// status said "host command: none running" next to state draining (an
// operator try-out, 2026-12-06).
type hostView struct {
	mu      sync.Mutex
	cmd     string // cmdRelocate or cmdDrain; "" while none runs
	started time.Time
	p       HostProgress
}

// begin records cmd as running from now (beginHostMove).
func (v *hostView) begin(cmd string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cmd, v.started, v.p = cmd, time.Now(), HostProgress{}
}

// end records that no host command runs (endHostMove).
func (v *hostView) end() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cmd = ""
}

// track returns a progress callback that records each snapshot of cmd
// before passing it to fn (nil: none). A snapshot arriving when cmd is not
// the command running — a drain refused because a host Relocate runs, or
// the last delivery of a command that ended — is not recorded.
func (v *hostView) track(cmd string, fn func(HostProgress)) func(HostProgress) {
	return func(p HostProgress) {
		v.mu.Lock()
		if v.cmd == cmd {
			v.p = p
		}
		v.mu.Unlock()
		if fn != nil {
			fn(p)
		}
	}
}

// job is the running command as the admin listener shows a job: no ID
// (it was not started through the listener), state running.
func (v *hostView) job() (*admin.Job, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cmd == "" {
		return nil, false
	}
	return &admin.Job{Drain: v.cmd == cmdDrain, State: admin.JobRunning, StartedAt: v.started.UTC().Format(time.RFC3339Nano),
		Progress: adminProgress(v.p)}, true
}
