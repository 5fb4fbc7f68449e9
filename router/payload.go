package router

import (
	"fmt"
)

// Payload is the application payload envelope (application-payload-envelope-v1):
// version 1, a u32 length covering the body, then packet name (text8),
// content type (text8) and the opaque payload bytes (u32 length). It travels
// as its own frame after frame 0 and the optional metadata frame.
type Payload struct {
	PacketName  string
	ContentType string
	Data        []byte // aliases the decoded frame; nil when empty
}

func (p *Payload) code(c *codec) {
	c.version("version")
	c.delimited("length", 4, WireU32CompleteMessageBytes-5, func() {
		c.text("packetName", &p.PacketName, 1, 1, PacketNameBytes)
		c.text("contentType", &p.ContentType, 1, 1, ContentTypeBytes)
		c.bytesField("payload", &p.Data, 4, 0, ApplicationPayloadAbsoluteMax)
	})
}

func decodePayload(cmd Command, frame []byte) (*Payload, *ProtocolError) {
	p := new(Payload)
	c := newDecoder(cmd, 0, frame)
	p.code(c)
	if c.err == nil && c.remaining() != 0 {
		c.fail(TrailingBytes, "", fmt.Sprintf("%d bytes after the envelope", c.remaining()))
	}
	if c.err != nil {
		c.within("payload")
		return nil, c.err
	}
	return p, nil
}

func encodePayload(cmd Command, p *Payload, js *jsonWriter) ([]byte, *ProtocolError) {
	c := newEncoder(cmd, 0, make([]byte, 0, 5+2+len(p.PacketName)+len(p.ContentType)+4+len(p.Data)))
	c.js = js
	c.obj("payload", func() { p.code(c) })
	if c.err != nil {
		return nil, c.err
	}
	return c.buf, nil
}

// MetadataEntry is one key/value pair of the metadata frame.
type MetadataEntry struct {
	Key   string // text8, unique within the frame
	Value string // u16-length text, 0..1024 bytes
}

// metadataCode walks the metadata frame: version 1, u8 count, entries.
func metadataCode(c *codec, entries *[]MetadataEntry) {
	c.version("version")
	// An entry is at least 1+1+2 bytes (one-byte key, empty value).
	vector(c, "entries", 1, 255, 4, entries, func(e *MetadataEntry) {
		c.obj("", func() {
			c.text8("key", &e.Key)
			c.text("value", &e.Value, 2, 0, MetadataBytes)
		})
	})
	if c.err == nil {
		es := *entries
		for i := range es {
			for j := 0; j < i; j++ {
				if es[i].Key == es[j].Key {
					c.fail(NotCanonical, "entries", fmt.Sprintf("duplicate key %q", es[i].Key))
					return
				}
			}
		}
	}
}

// DecodeMetadata parses a metadata frame (at most 1024 bytes, unique keys).
func DecodeMetadata(frame []byte) ([]MetadataEntry, error) {
	es, perr := decodeMetadata(0, frame)
	if perr != nil {
		return nil, perr
	}
	return es, nil
}

func decodeMetadata(cmd Command, frame []byte) ([]MetadataEntry, *ProtocolError) {
	if len(frame) > MetadataBytes {
		return nil, protoErr(BoundExceeded, cmd, "metadata", fmt.Sprintf("frame of %d bytes exceeds %d", len(frame), MetadataBytes))
	}
	var es []MetadataEntry
	c := newDecoder(cmd, 0, frame)
	metadataCode(c, &es)
	if c.err == nil && c.remaining() != 0 {
		c.fail(TrailingBytes, "", fmt.Sprintf("%d bytes after the entries", c.remaining()))
	}
	if c.err != nil {
		c.within("metadata")
		return nil, c.err
	}
	return es, nil
}

func validateMetadata(cmd Command, frame []byte) *ProtocolError {
	_, perr := decodeMetadata(cmd, frame)
	return perr
}

// EncodeMetadata renders entries as a metadata frame, rejecting what Decode
// would reject (duplicate keys, bad text, over 1024 bytes).
func EncodeMetadata(entries []MetadataEntry) ([]byte, error) {
	c := newEncoder(0, 0, nil)
	metadataCode(c, &entries)
	if c.err != nil {
		c.within("metadata")
		return nil, c.err
	}
	if len(c.buf) > MetadataBytes {
		return nil, protoErr(BoundExceeded, 0, "metadata", fmt.Sprintf("frame of %d bytes exceeds %d", len(c.buf), MetadataBytes))
	}
	return c.buf, nil
}
