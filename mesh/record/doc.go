// Package record defines the records the framework keeps in the Location
// Store (spec §3.4): the MeshNode descriptor, the owner lease, the
// ClientServer server descriptor, the fanout publisher descriptor and the
// authority record, plus the project's own generation counters.
//
// For each record the package builds the logical key preimage (UTF-8 values
// joined by \0), the store key (lowercase hex SHA-256 of the preimage) and the
// canonical JSON value. The Location Store provider never interprets either:
// it stores the key and compares the value as bytes. Because runtimes in other
// languages must read and write the same bytes, the encoding is exact —
// canonical JSON as defined by RFC 8785 (JCS) over a fixed data model — and is
// pinned by the golden fixture testdata/store-records-v1.json, described in
// docs/RECORDS.md.
//
// The package is framework code but deliberately depends on nothing except
// the standard library, so that a conformance tool or another provider's test
// can use it without pulling in the node.
//
// Errors: invalid input is a *FieldError (errors.Is(err, ErrInvalidField)),
// JSON that is not well-formed or has duplicate members is a *SyntaxError
// (ErrMalformed), an unrecognised recordVersion is an *UnknownVersionError
// (ErrUnknownVersion), disagreeing top-level and in-descriptor copies are a
// *MismatchError (ErrMismatch), and size bounds are a *LimitError (ErrLimit).
package record
