package redisconn

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestPermissionDenied covers the ACL denials of each Redis version:
// NOPERM for a command sent, and for one a script ran the texts Redis 7.0
// and Redis 7.2 and later (Valkey too) give instead — the local server is
// 7.0, so the later ones only here. Until review O (2026-12-08) only NOPERM
// and 7.0's command denial were recognised: on Redis 7.2 a write script
// stopped at a command the rule lacks was an ordinary failure, and a node
// retried its owner-lease acquire until it was stopped.
func TestPermissionDenied(t *testing.T) {
	const at = " script: 3112be83a20c26351030bb30ea0bdb6c194e6c29, on @user_script:165."
	tests := []struct {
		err  error
		want bool
	}{
		{serverError("NOPERM this user has no permissions to run the 'evalsha' command"), true},                                                // 7.0
		{serverError("NOPERM User meshnode has no permissions to run the 'evalsha' command"), true},                                            // 7.2
		{serverError("NOPERM this user has no permissions to access one of the keys used as arguments"), true},                                 // 7.0
		{serverError("ERR The user executing the script can't run this command or subcommand" + at), true},                                     // 7.0
		{serverError("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments" + at), true}, // 7.0
		{serverError("ERR ACL failure in script: User meshnode has no permissions to run the 'hset' command" + at), true},                      // 7.2
		{serverError("ERR ACL failure in script: User meshnode has no permissions to access the '{m}:exp' key" + at), true},                    // 7.2
		{fmt.Errorf("WAIT for replicas: %w", serverError("NOPERM User meshnode has no permissions to run the 'wait' command")), true},
		{fmt.Errorf("%w: %w", ErrWaitRefused, serverError("NOPERM User meshnode has no permissions to run the 'wait' command")), false},
		{serverError("ERR Error running script (call to f_x): @user_script:1: user_script:1: Script attempted to access nonexistent global variable 'x'"), false},
		{serverError("OOM command not allowed when used memory > 'maxmemory'." + at), false},
		{serverError("READONLY You can't write against a read only replica."), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	}
	for _, tc := range tests {
		if got := PermissionDenied(tc.err); got != tc.want {
			t.Errorf("PermissionDenied(%v) = %v, want %v", tc.err, got, tc.want)
		}
		got := ExplainPermission(tc.err)
		if tc.want != (got != nil) {
			t.Errorf("ExplainPermission(%v) = %v, want ErrNoPermission: %v", tc.err, got, tc.want)
			continue
		}
		if got != nil && !errors.Is(got, ErrNoPermission) {
			t.Errorf("ExplainPermission(%v) = %v, want it to match ErrNoPermission", tc.err, got)
		}
	}
}
