package locstore

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// keyError is ValidateKey with a lazily built field name.
func keyError(op, key string, field func() string) error {
	if len(key) == 0 || len(key) > MaxKeyBytes || !utf8.ValidString(key) {
		return ValidateKey(op, field(), key)
	}
	return nil
}

// ValidateKey checks a key against the SPI bounds.
func ValidateKey(op, field, key string) error {
	switch {
	case len(key) == 0:
		return &ArgumentError{Op: op, Field: field, Reason: "empty key"}
	case len(key) > MaxKeyBytes:
		return &ArgumentError{Op: op, Field: field, Reason: fmt.Sprintf("key is %d bytes, limit %d", len(key), MaxKeyBytes)}
	case !utf8.ValidString(key):
		return &ArgumentError{Op: op, Field: field, Reason: "key is not valid UTF-8"}
	}
	return nil
}

func validateVersion(op, field, v string) error {
	switch {
	case len(v) == 0:
		return &ArgumentError{Op: op, Field: field, Reason: "empty version"}
	case len(v) > MaxVersionBytes:
		return &ArgumentError{Op: op, Field: field, Reason: fmt.Sprintf("version is %d bytes, limit %d", len(v), MaxVersionBytes)}
	case !utf8.ValidString(v):
		return &ArgumentError{Op: op, Field: field, Reason: "version is not valid UTF-8"}
	}
	return nil
}

// EncodedSize is the size the 4 MiB batch bound applies to: the sum of the
// bytes of every key, expected version and value in the request. Framing
// overhead is not counted, so a batch of 2,048 keys whose keys and values
// add up to exactly 4 MiB is accepted.
func (r WriteRequest) EncodedSize() int {
	n := 0
	for _, c := range r.Conditions {
		n += len(c.Key) + len(c.Version)
	}
	for _, m := range r.Mutations {
		n += len(m.Key) + len(m.Value)
	}
	return n
}

// EncodedSize is the size an item adds to a scan page (key, value, version).
func (it Item) EncodedSize() int { return len(it.Key) + len(it.Value) + len(it.Version) }

// Validate checks a WriteRequest against every SPI bound. Providers call it
// before any I/O.
func (r WriteRequest) Validate() error {
	const op = "write"
	if len(r.Conditions) == 0 && len(r.Mutations) == 0 {
		return &ArgumentError{Op: op, Field: "request", Reason: "no conditions and no mutations"}
	}
	distinct := make(map[string]struct{}, len(r.Conditions)+len(r.Mutations))
	condKeys := make(map[string]struct{}, len(r.Conditions))
	// Field names are built only on error: Validate runs on every Write, and
	// formatting them eagerly was a fifth of a valid batch's allocations.
	for i, c := range r.Conditions {
		f := func() string { return fmt.Sprintf("conditions[%d]", i) }
		if err := keyError(op, c.Key, func() string { return f() + ".key" }); err != nil {
			return err
		}
		switch c.Kind {
		case CondMissing:
			if c.Version != "" {
				return &ArgumentError{Op: op, Field: f() + ".version", Reason: "a Missing condition carries no version"}
			}
		case CondVersion:
			if len(c.Version) == 0 || len(c.Version) > MaxVersionBytes || !utf8.ValidString(c.Version) {
				return validateVersion(op, f()+".version", c.Version)
			}
		default:
			return &ArgumentError{Op: op, Field: f() + ".kind", Reason: fmt.Sprintf("unknown condition kind %d", c.Kind)}
		}
		if _, dup := condKeys[c.Key]; dup {
			return &ArgumentError{Op: op, Field: f() + ".key", Reason: fmt.Sprintf("key %q appears twice among conditions", c.Key)}
		}
		condKeys[c.Key] = struct{}{}
		distinct[c.Key] = struct{}{}
	}
	mutKeys := make(map[string]struct{}, len(r.Mutations))
	for i, m := range r.Mutations {
		f := func() string { return fmt.Sprintf("mutations[%d]", i) }
		if err := keyError(op, m.Key, func() string { return f() + ".key" }); err != nil {
			return err
		}
		switch m.Kind {
		case MutPut:
			if len(m.Value) > MaxValueBytes {
				return &ArgumentError{Op: op, Field: f() + ".value", Reason: fmt.Sprintf("value is %d bytes, limit %d", len(m.Value), MaxValueBytes)}
			}
			if m.Retention < 0 || m.Retention > MaxRetention {
				return &ArgumentError{Op: op, Field: f() + ".retention", Reason: fmt.Sprintf("retention %v outside 0..%v", m.Retention, MaxRetention)}
			}
			if m.Retention > 0 && m.Retention < time.Millisecond {
				return &ArgumentError{Op: op, Field: f() + ".retention", Reason: "retention below 1ms (stores count in milliseconds)"}
			}
		case MutDelete:
			if m.Value != nil || m.Retention != 0 {
				return &ArgumentError{Op: op, Field: f(), Reason: "a Delete carries no value or retention"}
			}
		default:
			return &ArgumentError{Op: op, Field: f() + ".kind", Reason: fmt.Sprintf("unknown mutation kind %d", m.Kind)}
		}
		if _, dup := mutKeys[m.Key]; dup {
			return &ArgumentError{Op: op, Field: f() + ".key", Reason: fmt.Sprintf("key %q appears twice among mutations", m.Key)}
		}
		mutKeys[m.Key] = struct{}{}
		distinct[m.Key] = struct{}{}
	}
	if len(distinct) > MaxBatchKeys {
		return &ArgumentError{Op: op, Field: "request", Reason: fmt.Sprintf("%d distinct keys, limit %d", len(distinct), MaxBatchKeys)}
	}
	if n := r.EncodedSize(); n > MaxBatchBytes {
		return &ArgumentError{Op: op, Field: "request", Reason: fmt.Sprintf("encoded size %d bytes, limit %d", n, MaxBatchBytes)}
	}
	return nil
}

// Validate checks a ScanRequest against the SPI bounds. An over-long cursor
// is an argument error; a well-sized but unknown cursor is Expired, which
// only the provider can tell.
func (r ScanRequest) Validate() error {
	const op = "scan"
	if len(r.Prefix) > MaxPrefixBytes {
		return &ArgumentError{Op: op, Field: "prefix", Reason: fmt.Sprintf("prefix is %d bytes, limit %d", len(r.Prefix), MaxPrefixBytes)}
	}
	if !utf8.ValidString(r.Prefix) {
		return &ArgumentError{Op: op, Field: "prefix", Reason: "prefix is not valid UTF-8"}
	}
	if r.Limit < 1 || r.Limit > MaxPageItems {
		return &ArgumentError{Op: op, Field: "limit", Reason: fmt.Sprintf("limit %d outside 1..%d", r.Limit, MaxPageItems)}
	}
	if len(r.Cursor) > MaxCursorBytes {
		return &ArgumentError{Op: op, Field: "cursor", Reason: fmt.Sprintf("cursor is %d bytes, limit %d", len(r.Cursor), MaxCursorBytes)}
	}
	return nil
}
