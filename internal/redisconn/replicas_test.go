package redisconn

import (
	"errors"
	"testing"
	"time"
)

func TestReplicas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      Replicas
		valid  bool
		acked  int
		enough bool
	}{
		{"off", Replicas{}, true, 0, true},
		{"one, acknowledged", Replicas{Acks: 1, Timeout: time.Second}, true, 1, true},
		{"one, more than asked", Replicas{Acks: 1, Timeout: time.Second}, true, 3, true},
		{"two, one acknowledged", Replicas{Acks: 2, Timeout: time.Second}, true, 1, false},
		{"one, none acknowledged", Replicas{Acks: 1, Timeout: time.Second}, true, 0, false},
		{"the most", Replicas{Acks: MaxReplicaAcks, Timeout: time.Second}, true, MaxReplicaAcks, true},
		{"too many", Replicas{Acks: MaxReplicaAcks + 1, Timeout: time.Second}, false, 0, false},
		{"negative", Replicas{Acks: -1, Timeout: time.Second}, false, 0, false},
		{"no timeout", Replicas{Acks: 1}, false, 0, false},
		{"negative timeout", Replicas{Timeout: -time.Second}, false, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.r.Validate(); (err == nil) != tc.valid {
				t.Fatalf("Validate: %v, want valid %v", err, tc.valid)
			}
			if !tc.valid {
				return
			}
			err := tc.r.Check(tc.acked)
			if (err == nil) != tc.enough {
				t.Fatalf("Check(%d): %v, want enough %v", tc.acked, err, tc.enough)
			}
			var nr *NotReplicatedError
			if err != nil && (!errors.Is(err, ErrNotReplicated) || !errors.As(err, &nr) || nr.Acked != tc.acked || nr.Want != tc.r.Acks) {
				t.Fatalf("Check(%d): %#v", tc.acked, err)
			}
		})
	}
}
