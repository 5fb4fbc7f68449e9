package record

import "strconv"

// Decoding accepts any well-formed JSON spelling of a record (member order,
// whitespace, escapes such as \u0041 or \/). What a conformance test or a
// careful reader wants in addition is the guarantee that the stored bytes
// are the one canonical byte sequence: CheckCanonical decodes and re-encodes
// and reports the first byte where they part.

// CheckCanonical decodes value as a record of kind and returns nil only if
// re-encoding the result gives exactly value. Decode errors are returned
// as they are; a valid but differently spelled value is a
// *NonCanonicalError (errors.Is(err, ErrNonCanonical)).
func CheckCanonical(kind Kind, value []byte) error {
	var (
		canonical []byte
		err       error
	)
	switch kind {
	case KindMeshNode:
		var r MeshNodeDescriptor
		if r, err = DecodeMeshNode(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindOwnerLease:
		var r OwnerLease
		if r, err = DecodeOwnerLease(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindClientServer:
		var r ClientServerDescriptor
		if r, err = DecodeClientServer(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindFanoutPublisher:
		var r FanoutPublisherDescriptor
		if r, err = DecodeFanoutPublisher(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindAuthority:
		var r Authority
		if r, err = DecodeAuthority(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindCounter:
		var r Counter
		if r, err = DecodeCounter(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindDescriptorJournal:
		var r DescriptorJournal
		if r, err = DecodeDescriptorJournal(value); err == nil {
			canonical, err = r.Encode()
		}
	case KindRemovedMeshNode:
		var r RemovedMeshNode
		if r, err = DecodeRemovedMeshNode(value); err == nil {
			canonical, err = r.Encode()
		}
	default:
		return &FieldError{Kind: kind, Field: "kind", Reason: "unknown record kind " + strconv.Quote(string(kind))}
	}
	if err != nil {
		return err
	}
	return checkCanonical(kind, value, canonical)
}
