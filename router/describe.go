package router

import (
	"bytes"
	"encoding/json"
	"fmt"
)

var flagNames = [...]struct {
	bit  uint8
	name string
}{{FlagMetadata, "metadata"}, {FlagBoundSession, "boundSession"}, {FlagSourceSpotID, "sourceSpotId"}, {FlagExtension, "extension"}}

// DescribeJSON renders a record as indented JSON for humans and tools
// (`meshnode wire decode <hex>`): the command, its flags, every body field
// under its schema name in wire order, the metadata entries and the payload
// envelope. Byte strings are lower-case hex; 64-bit integers are decimal
// strings (JSON numbers cannot hold them exactly); enums are their schema
// names. The record is validated exactly as Encode validates it; an invalid
// record yields the same *ProtocolError.
func DescribeJSON(r *Record) ([]byte, error) {
	js := &jsonWriter{}
	js.open("", '{')
	if r != nil && r.Body != nil {
		cmd := r.Body.Command()
		js.str("command", cmd.String())
		js.raw("commandId", fmt.Sprint(uint8(cmd)))
		js.raw("exactToReference", fmt.Sprint(cmd.ExactToReference()))
		js.raw("flags", fmt.Sprint(r.Flags))
		js.open("flagNames", '[')
		for _, f := range flagNames {
			if r.Flags&f.bit != 0 {
				js.str("", f.name)
			}
		}
		js.close()
	}
	if _, perr := encode(r, js); perr != nil {
		return nil, perr
	}
	js.close()
	var out bytes.Buffer
	if err := json.Indent(&out, js.b, "", "  "); err != nil {
		return nil, fmt.Errorf("router: describe: %w", err)
	}
	return out.Bytes(), nil
}
