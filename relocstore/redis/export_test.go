package redis

import "time"

// AdvanceClock moves the provider clock of s forward by d: every script adds
// the accumulated offset to the server's TIME. Tests use it instead of
// sleeping; Redis' own key expiry still runs on real time and only ever
// later than the logical expiry, so the logical view is what they observe.
func AdvanceClock(s *Store, d time.Duration) { s.skewMs.Add(ceilMs(d)) }

// KeyPrefix exposes the namespace prefix for key-layout tests.
func KeyPrefix(s *Store) string { return s.prefix }

// InlineMax is the largest payload the put script receives inline.
const InlineMax = inlineMax
