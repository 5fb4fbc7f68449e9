package config

import (
	"math"
	"testing"
	"time"
)

// §5's lease rule holds for durations whose sum overflows: two huge values
// wrapped to a negative sum and passed the check (a node would have started
// with a renewal cadence that can never keep its lease).
func TestLeaseSumOverflowIsRefused(t *testing.T) {
	c := valid()
	c.Lease.RenewInterval = time.Duration(math.MaxInt64)
	c.Lease.RenewTimeout = time.Duration(math.MaxInt64)
	// ttl, fencing at defaults (15s, 5s): the §5 rule is plainly violated.
	err := c.Validate(nil)
	if err == nil {
		t.Fatalf("renew_interval=%s renew_timeout=%s ttl=%s fencing=%s accepted (renew_interval+renew_timeout overflowed to %s)",
			c.Lease.RenewInterval, c.Lease.RenewTimeout, c.Lease.TTL, c.Lease.FencingMargin, c.Lease.RenewInterval+c.Lease.RenewTimeout)
	}
	t.Log(err)
}

func TestLeaseSumOverflowFromYAMLIsRefused(t *testing.T) {
	file := writeYAML(t, "lease:\n  renew_interval: 2562047h\n  renew_timeout: 2562047h\nlocation_store:\n  provider: memory\n")
	c, err := Load(nil, LoadOptions{File: file, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(nil); err == nil {
		t.Fatalf("YAML renew_interval=2562047h renew_timeout=2562047h ttl=15s accepted")
	}
}
