package router

import (
	"errors"
	"fmt"
)

// ErrProtocol is matched (errors.Is) by every *ProtocolError.
var ErrProtocol = errors.New("router: protocol error")

// ErrorKind classifies a protocol error. The kinds are closed: callers can
// count them per kind, and the conformance fixtures' named errors map onto
// them (see FixtureName).
type ErrorKind uint8

// Error kinds. Every malformed record maps to exactly one of them; the first
// problem found in wire order wins.
const (
	// BadMagic: the frame does not start with 'Z' 'M'.
	BadMagic ErrorKind = iota + 1
	// BadWireMajor: the wire major byte is not 1.
	BadWireMajor
	// UnknownCommand: the command id is not one this node speaks (reserved,
	// unassigned, or defined by service wire v1 but not spoken here).
	UnknownCommand
	// ForbiddenFlag: a flag bit the command does not allow, or an undefined bit.
	ForbiddenFlag
	// MissingFlag: a required flag, or one half of an all-or-none flag pair, is
	// absent; when encoding, also a body/metadata that needs a flag not set.
	MissingFlag
	// FrameCount: the multipart frame count does not match the flags and the
	// command's payload rule.
	FrameCount
	// Truncated: a field or a declared length runs past the remaining bytes.
	Truncated
	// TrailingBytes: bytes remain after a record, frame or length-delimited
	// structure has been fully read.
	TrailingBytes
	// BadUTF8: a text field is not valid UTF-8.
	BadUTF8
	// NULInText: a text field contains a NUL byte.
	NULInText
	// ZeroNotAllowed: zero (or an empty text/byte string) where the schema
	// requires a nonzero value or a nonempty string.
	ZeroNotAllowed
	// EnumRange: an enum or discriminator value the schema does not define.
	EnumRange
	// UnknownFrameworkError: a reply failure code outside the service-wire set
	// (including the reserved public-only values 23..32).
	UnknownFrameworkError
	// BoundExceeded: a value or a length above the schema bound (or outside
	// an explicit minimum..maximum range other than the nonzero rule).
	BoundExceeded
	// BadVersion: a versioned structure (payload envelope, metadata frame,
	// versioned length-delimited body) carries a version other than 1.
	BadVersion
	// NotCanonical: a vector that must be sorted and unique is not, or a TLV
	// field is duplicated or out of ascending order.
	NotCanonical
	// MissingField: a required field (TLV field, union case value) is absent.
	MissingField
	// Constraint: a cross-field rule of the schema is violated (terminal
	// result/failure-code shape, operation id rules, union/flag consistency…).
	Constraint
)

var kindNames = [...]string{
	BadMagic:              "bad-magic",
	BadWireMajor:          "bad-wire-major",
	UnknownCommand:        "unknown-command",
	ForbiddenFlag:         "forbidden-flag",
	MissingFlag:           "missing-flag",
	FrameCount:            "frame-count",
	Truncated:             "truncated",
	TrailingBytes:         "trailing-bytes",
	BadUTF8:               "bad-utf8",
	NULInText:             "nul-in-text",
	ZeroNotAllowed:        "zero-not-allowed",
	EnumRange:             "enum-range",
	UnknownFrameworkError: "unknown-framework-error",
	BoundExceeded:         "bound-exceeded",
	BadVersion:            "bad-version",
	NotCanonical:          "not-canonical",
	MissingField:          "missing-field",
	Constraint:            "constraint",
}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("error-kind(%d)", uint8(k))
}

// FixtureName returns the error name the ZLink golden decoder fixtures use for
// this kind (service-decoder-fixtures-v1.json). The fixtures name fewer
// classes than this package distinguishes: every per-field validation failure
// is "invalid-field" there. Head-level kinds the fixtures never exercise
// (BadWireMajor, MissingFlag, FrameCount) get a name in the same style.
func (k ErrorKind) FixtureName() string {
	switch k {
	case BadMagic:
		return "invalid-magic"
	case BadWireMajor:
		return "unsupported-wire-major"
	case UnknownCommand:
		return "unknown-command"
	case ForbiddenFlag:
		return "forbidden-flag"
	case MissingFlag:
		return "missing-flag"
	case FrameCount:
		return "invalid-frame-count"
	case Truncated:
		return "truncated-field"
	case TrailingBytes:
		return "trailing-byte"
	case UnknownFrameworkError:
		return "unknown-framework-error"
	default:
		return "invalid-field"
	}
}

// ProtocolError reports a malformed service record (or, from Encode, a record
// that would be malformed on the wire). It is raised before any allocation
// sized by the input and before any dispatch; the receiver drops the record.
type ProtocolError struct {
	Kind    ErrorKind
	Command Command // 0 when the head prefix itself is bad
	Field   string  // dotted path of the offending field, e.g. "admission.routeMesh.meshName"
	Detail  string
}

func (e *ProtocolError) Error() string {
	where := "head"
	if e.Command != 0 {
		where = e.Command.String()
	}
	if e.Field != "" {
		where += "." + e.Field
	}
	if e.Detail == "" {
		return fmt.Sprintf("router: protocol error %s at %s", e.Kind, where)
	}
	return fmt.Sprintf("router: protocol error %s at %s: %s", e.Kind, where, e.Detail)
}

// Is makes errors.Is(err, ErrProtocol) true.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }
