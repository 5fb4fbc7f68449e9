package router

import (
	"fmt"
)

// Command is a service record's command id (head prefix byte 3).
type Command uint8

// Commands spoken by meshnode. Ids 1..50 are service wire v1 (ZLink) with
// the schema's body layout; 40, 52 and 53.. carry the project's own
// relocation handoff layout (docs/PROTOCOL.md).
const (
	CmdHello                  Command = 1
	CmdAdmit                  Command = 2
	CmdReject                 Command = 3
	CmdLivenessProbe          Command = 5
	CmdLivenessAck            Command = 6
	CmdReply                  Command = 20
	CmdSpotSend               Command = 21
	CmdSpotRequest            Command = 22
	CmdActorSend              Command = 24
	CmdActorRequest           Command = 25
	CmdInstanceSpot           Command = 39
	CmdRelocationPrepare      Command = 40 // project layout: Restore request
	CmdSessionRelocationRoute Command = 44
	CmdUserSpotCreate         Command = 47
	CmdUserSpotClose          Command = 48
	CmdActorCreate            Command = 49
	CmdMessageFollow          Command = 50
	CmdRelocationState        Command = 52 // project layout: one state chunk
	CmdRelocationReady        Command = 53 // project layout: relay-ready or explicit failure
	CmdRelocationCutover      Command = 54 // project layout: one-way cutover boundary
	CmdRelocationCancel       Command = 55 // project layout: one-way cancel before relay-ready
	CmdLinkSequence           Command = 56 // project layout: numbers the one-way messages after it (transport)
)

// Flag bits of the head prefix (schema "flags").
const (
	FlagMetadata      uint8 = 0x01 // frame 1 is the metadata frame
	FlagBoundSession  uint8 = 0x02 // with FlagSourceSpotID: bound-session tail present
	FlagSourceSpotID  uint8 = 0x04 // with FlagBoundSession: bound-session tail present
	FlagExtension     uint8 = 0x08 // command body extension (no spoken command allows it)
	flagBoundSessionT       = FlagBoundSession | FlagSourceSpotID
)

// Head prefix constants.
const (
	Magic0        = 'Z'
	Magic1        = 'M'
	WireMajor     = 1
	HeadPrefixLen = 5
)

type payloadRule uint8

const (
	payloadForbidden payloadRule = iota
	payloadOptional
	payloadRequired
)

func (p payloadRule) String() string {
	return [...]string{"forbidden", "optional", "required"}[p]
}

type commandSpec struct {
	name    string
	allowed uint8 // allowed flag bits
	// allOrNone lists flag bits that must be set together or not at all.
	allOrNone uint8
	payload   payloadRule
	reference bool // layout exact to service wire v1
	newBody   func() Body
}

var commandTable = [256]*commandSpec{
	CmdHello:                  {name: "hello", reference: true, newBody: func() Body { return new(Hello) }},
	CmdAdmit:                  {name: "admit", reference: true, newBody: func() Body { return new(Admit) }},
	CmdReject:                 {name: "reject", reference: true, newBody: func() Body { return new(Reject) }},
	CmdLivenessProbe:          {name: "livenessProbe", reference: true, newBody: func() Body { return new(LivenessProbe) }},
	CmdLivenessAck:            {name: "livenessAck", reference: true, newBody: func() Body { return new(LivenessAck) }},
	CmdReply:                  {name: "reply", reference: true, payload: payloadOptional, newBody: func() Body { return new(Reply) }},
	CmdSpotSend:               {name: "spotSend", reference: true, allowed: FlagMetadata, payload: payloadRequired, newBody: func() Body { return new(SpotSend) }},
	CmdSpotRequest:            {name: "spotRequest", reference: true, allowed: FlagMetadata, payload: payloadRequired, newBody: func() Body { return new(SpotRequest) }},
	CmdActorSend:              {name: "actorSend", reference: true, allowed: FlagMetadata | flagBoundSessionT, allOrNone: flagBoundSessionT, payload: payloadRequired, newBody: func() Body { return new(ActorSend) }},
	CmdActorRequest:           {name: "actorRequest", reference: true, allowed: FlagMetadata | flagBoundSessionT, allOrNone: flagBoundSessionT, payload: payloadRequired, newBody: func() Body { return new(ActorRequest) }},
	CmdInstanceSpot:           {name: "instanceSpot", reference: true, allowed: FlagMetadata, payload: payloadRequired, newBody: func() Body { return new(InstanceSpot) }},
	CmdRelocationPrepare:      {name: "relocationPrepare", newBody: func() Body { return new(RelocationPrepare) }},
	CmdSessionRelocationRoute: {name: "sessionRelocationRoute", reference: true, newBody: func() Body { return new(SessionRelocationRoute) }},
	CmdUserSpotCreate:         {name: "userSpotCreate", reference: true, newBody: func() Body { return new(UserSpotCreate) }},
	CmdUserSpotClose:          {name: "userSpotClose", reference: true, newBody: func() Body { return new(UserSpotClose) }},
	CmdActorCreate:            {name: "actorCreate", reference: true, newBody: func() Body { return new(ActorCreate) }},
	CmdMessageFollow:          {name: "messageFollow", reference: true, newBody: func() Body { return new(MessageFollow) }},
	CmdRelocationState:        {name: "relocationState", newBody: func() Body { return new(RelocationState) }},
	CmdRelocationReady:        {name: "relocationReady", newBody: func() Body { return new(RelocationReady) }},
	CmdRelocationCutover:      {name: "relocationCutover", newBody: func() Body { return new(RelocationCutover) }},
	CmdRelocationCancel:       {name: "relocationCancel", newBody: func() Body { return new(RelocationCancel) }},
	CmdLinkSequence:           {name: "linkSequence", newBody: func() Body { return new(LinkSequence) }},
}

func (c Command) String() string {
	if s := commandTable[c]; s != nil {
		return s.name
	}
	return fmt.Sprintf("command(%d)", uint8(c))
}

// Known reports whether this node speaks command c.
func (c Command) Known() bool { return commandTable[c] != nil }

// ExactToReference reports whether c's layout is service wire v1's exactly
// (false for the project's own relocation handoff records).
func (c Command) ExactToReference() bool {
	s := commandTable[c]
	return s != nil && s.reference
}

// Commands lists every spoken command in id order.
func Commands() []Command {
	var out []Command
	for i, s := range commandTable {
		if s != nil {
			out = append(out, Command(i))
		}
	}
	return out
}

// Body is a command's typed body. The set is closed: each spoken command has
// exactly one concrete body type in this package.
type Body interface {
	Command() Command
	code(c *codec)
}

// Record is one service record: a multipart message of frame 0 (head prefix +
// body), frame 1 (metadata) when FlagMetadata is set, then the application
// payload envelope when the command carries one.
//
// A decoded Record aliases the frames it was decoded from (byte fields such
// as RIDs, Metadata and Payload.Data are sub-slices): callers must not modify
// the frames while the Record is in use.
type Record struct {
	Command  Command
	Flags    uint8    // raw flag bits as on the wire
	Metadata []byte   // metadata frame when FlagMetadata is set; nil otherwise
	Body     Body     // concrete type per command, e.g. *Hello, *LivenessProbe, *Reply
	Payload  *Payload // application payload envelope; nil when absent
}

// NewRecord builds a record for body, deriving Command and Flags from what is
// present: FlagMetadata when metadata is non-nil and, for actorSend /
// actorRequest, both bound-session flags when the body has a bound-session
// tail.
func NewRecord(body Body, metadata []byte, payload *Payload) *Record {
	r := &Record{Body: body, Metadata: metadata, Payload: payload}
	if body != nil {
		r.Command = body.Command()
	}
	if metadata != nil {
		r.Flags |= FlagMetadata
	}
	switch b := body.(type) {
	case *ActorSend:
		if b.BoundSession != nil {
			r.Flags |= flagBoundSessionT
		}
	case *ActorRequest:
		if b.BoundSession != nil {
			r.Flags |= flagBoundSessionT
		}
	}
	return r
}

func protoErr(k ErrorKind, cmd Command, field, detail string) *ProtocolError {
	return &ProtocolError{Kind: k, Command: cmd, Field: field, Detail: detail}
}

// checkFlags applies the command's allowed and all-or-none flag rules.
func checkFlags(cmd Command, spec *commandSpec, flags uint8) *ProtocolError {
	if bad := flags &^ spec.allowed; bad != 0 {
		return protoErr(ForbiddenFlag, cmd, "flags", fmt.Sprintf("flag bits 0x%02x not allowed", bad))
	}
	if set := flags & spec.allOrNone; set != 0 && set != spec.allOrNone {
		return protoErr(MissingFlag, cmd, "flags", fmt.Sprintf("flag bits 0x%02x must be set together", spec.allOrNone))
	}
	return nil
}

// Decode parses a service record from its multipart frames. Any malformed
// input yields a *ProtocolError (errors.Is(err, ErrProtocol)); validation
// runs in wire order — head prefix, flags, frame count, metadata, body,
// payload — and stops at the first problem. Nothing is allocated in
// proportion to a declared length before that length has been checked
// against the schema bound and the bytes actually present.
func Decode(frames [][]byte) (*Record, error) {
	r, perr := decode(frames)
	if perr != nil {
		return nil, perr
	}
	return r, nil
}

func decode(frames [][]byte) (*Record, *ProtocolError) {
	if len(frames) == 0 {
		return nil, protoErr(FrameCount, 0, "", "no frames")
	}
	f0 := frames[0]
	if (len(f0) > 0 && f0[0] != Magic0) || (len(f0) > 1 && f0[1] != Magic1) {
		return nil, protoErr(BadMagic, 0, "magic", "frame 0 does not start with 'Z' 'M'")
	}
	if len(f0) < HeadPrefixLen {
		return nil, protoErr(Truncated, 0, "head", fmt.Sprintf("head prefix needs %d bytes, frame 0 has %d", HeadPrefixLen, len(f0)))
	}
	if f0[2] != WireMajor {
		return nil, protoErr(BadWireMajor, 0, "wireMajor", fmt.Sprintf("wire major %d, want %d", f0[2], WireMajor))
	}
	cmd := Command(f0[3])
	spec := commandTable[cmd]
	if spec == nil {
		return nil, protoErr(UnknownCommand, cmd, "", fmt.Sprintf("command id %d is not spoken", f0[3]))
	}
	flags := f0[4]
	if perr := checkFlags(cmd, spec, flags); perr != nil {
		return nil, perr
	}
	hasMeta := flags&FlagMetadata != 0
	want := 1
	if hasMeta {
		want++
	}
	hasPayload := false
	switch spec.payload {
	case payloadRequired:
		want++
		hasPayload = true
	case payloadOptional:
		if len(frames) == want+1 {
			want++
			hasPayload = true
		}
	}
	if len(frames) != want {
		return nil, protoErr(FrameCount, cmd, "", fmt.Sprintf("%d frames, want %d (metadata flag %t, payload %s)", len(frames), want, hasMeta, spec.payload))
	}
	r := &Record{Command: cmd, Flags: flags}
	body := spec.newBody()
	c := newDecoder(cmd, flags, f0[HeadPrefixLen:])
	body.code(c)
	if c.err == nil && c.remaining() != 0 {
		c.fail(TrailingBytes, "", fmt.Sprintf("%d bytes after the body", c.remaining()))
	}
	if c.err != nil {
		return nil, c.err
	}
	r.Body = body
	next := 1
	if hasMeta {
		if perr := validateMetadata(cmd, frames[next]); perr != nil {
			return nil, perr
		}
		r.Metadata = frames[next]
		next++
	}
	if hasPayload {
		p, perr := decodePayload(cmd, frames[next])
		if perr != nil {
			return nil, perr
		}
		r.Payload = p
	}
	if v, ok := body.(recordValidator); ok {
		if perr := v.validateRecord(r); perr != nil {
			return nil, perr
		}
	}
	return r, nil
}

// recordValidator is implemented by bodies with rules that span the body and
// the rest of the record (e.g. a failed reply must not carry a payload).
type recordValidator interface {
	validateRecord(r *Record) *ProtocolError
}

// Encode renders r as multipart frames after validating it with exactly the
// decoder's rules, so that Decode(Encode(r)) succeeds and yields r again.
// r.Command may be 0 (taken from the body). Flags must match what is present
// (see NewRecord): FlagMetadata iff Metadata is non-nil, and for actorSend /
// actorRequest both bound-session flags iff the body has a bound-session
// tail.
func Encode(r *Record) ([][]byte, error) {
	frames, perr := encode(r, nil)
	if perr != nil {
		return nil, perr
	}
	return frames, nil
}

func encode(r *Record, js *jsonWriter) ([][]byte, *ProtocolError) {
	if r == nil || r.Body == nil {
		return nil, protoErr(MissingField, 0, "body", "record has no body")
	}
	cmd := r.Body.Command()
	if r.Command != 0 && r.Command != cmd {
		return nil, protoErr(Constraint, r.Command, "body", fmt.Sprintf("body is a %s body", cmd))
	}
	spec := commandTable[cmd]
	if perr := checkFlags(cmd, spec, r.Flags); perr != nil {
		return nil, perr
	}
	hasMeta := r.Flags&FlagMetadata != 0
	if hasMeta != (r.Metadata != nil) {
		if hasMeta {
			return nil, protoErr(FrameCount, cmd, "metadata", "metadata flag set without a metadata frame")
		}
		return nil, protoErr(MissingFlag, cmd, "flags", "metadata frame present without the metadata flag")
	}
	switch {
	case spec.payload == payloadForbidden && r.Payload != nil:
		return nil, protoErr(FrameCount, cmd, "payload", "command carries no payload")
	case spec.payload == payloadRequired && r.Payload == nil:
		return nil, protoErr(FrameCount, cmd, "payload", "command requires a payload")
	}
	frames := make([][]byte, 0, 3)
	c := newEncoder(cmd, r.Flags, make([]byte, 0, 64))
	c.js = js
	c.buf = append(c.buf, Magic0, Magic1, WireMajor, byte(cmd), r.Flags)
	if js != nil {
		js.open("body", '{')
	}
	r.Body.code(c)
	if c.err != nil {
		return nil, c.err
	}
	if js != nil {
		js.close()
	}
	frames = append(frames, c.buf)
	if hasMeta {
		entries, perr := decodeMetadata(cmd, r.Metadata)
		if perr != nil {
			return nil, perr
		}
		if js != nil {
			mc := newEncoder(cmd, 0, nil)
			mc.js = js
			mc.obj("metadata", func() { metadataCode(mc, &entries) })
		}
		frames = append(frames, r.Metadata)
	}
	if r.Payload != nil {
		p, perr := encodePayload(cmd, r.Payload, js)
		if perr != nil {
			return nil, perr
		}
		frames = append(frames, p)
	}
	if v, ok := r.Body.(recordValidator); ok {
		if perr := v.validateRecord(r); perr != nil {
			return nil, perr
		}
	}
	return frames, nil
}
