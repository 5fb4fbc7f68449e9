package router

import "fmt"

// Reply (command 20) is the terminal result of every request: correlation,
// terminal result, failure code, then a request-specific tail, optionally
// followed by an application payload frame. It goes back on the ROUTER to
// the requester.
//
// The tail's layout depends on the original operation, which only the
// requester knows (schema: discriminator from context). Decode therefore
// keeps a non-empty tail of an ok reply as *RawReplyTail; the requester calls
// Record.ResolveReplyTail with the operation kind it recorded for the
// correlation.
type Reply struct {
	Correlation uint64 // nonzero
	Result      TerminalResult
	FailureCode FrameworkErrorCode
	Tail        ReplyTail // nil when empty
}

// Command implements Body.
func (*Reply) Command() Command { return CmdReply }

// ReplyTail is the request-specific tail of an ok reply: *RawReplyTail
// (undetermined), *ActorLookupTail, *ActorJoinTail, *StreamBindTail,
// *UserSpotCreateTail, *UserSpotCloseTail or *ActorCreateTail.
type ReplyTail interface {
	// OperationKind is the original operation this tail answers (OpNone for
	// a raw tail).
	OperationKind() MeshOperationKind
	code(c *codec)
}

// RawReplyTail is a tail not yet interpreted (see Reply). Bytes aliases the
// decoded frame.
type RawReplyTail struct {
	Bytes []byte
}

// ActorLookupTail answers actorLookup.
type ActorLookupTail struct {
	Actor                    ActorRef
	SpotID                   string
	SpotGeneration           uint64
	AuthorityOwnerGeneration uint64
}

// ActorJoinTail answers actorJoin (actor-join-reply-tail): the accepted case
// carries the spot; the rejected case carries an optional spot.
type ActorJoinTail struct {
	Result ActorJoinResult
	Spot   *SpotRef // required when accepted; optional when rejected
}

// StreamBindTail answers streamBind.
type StreamBindTail struct {
	BindingGeneration        uint64
	AuthorityOwnerGeneration uint64
}

// UserSpotCreateTail answers userSpotCreate (command 47): Existing, Created
// or Rejected, with the exact SpotRef in all three states.
type UserSpotCreateTail struct {
	Result CreateResult
	Spot   SpotRef
}

// UserSpotCloseTail answers userSpotClose (command 48). Closed is false only
// for an idempotent missing spot or active membership.
type UserSpotCloseTail struct {
	Closed bool
}

// ActorCreateTail answers actorCreate (command 49) (actor-create-terminal):
// Existing and Created carry the actor; Rejected carries nothing.
type ActorCreateTail struct {
	Result CreateResult
	Actor  *ActorRef // set iff Result is CreateExisting or CreateCreated
}

// OperationKind implements ReplyTail.
func (*RawReplyTail) OperationKind() MeshOperationKind { return OpNone }

// OperationKind implements ReplyTail.
func (*ActorLookupTail) OperationKind() MeshOperationKind { return OpActorLookup }

// OperationKind implements ReplyTail.
func (*ActorJoinTail) OperationKind() MeshOperationKind { return OpActorJoin }

// OperationKind implements ReplyTail.
func (*StreamBindTail) OperationKind() MeshOperationKind { return OpStreamBind }

// OperationKind implements ReplyTail.
func (*UserSpotCreateTail) OperationKind() MeshOperationKind { return OpUserSpotCreate }

// OperationKind implements ReplyTail.
func (*UserSpotCloseTail) OperationKind() MeshOperationKind { return OpUserSpotClose }

// OperationKind implements ReplyTail.
func (*ActorCreateTail) OperationKind() MeshOperationKind { return OpActorCreate }

func (t *RawReplyTail) code(c *codec) {
	// Only ever encoded: decoding produces it directly in Reply.code.
	if c.err != nil {
		return
	}
	c.buf = append(c.buf, t.Bytes...)
	if c.js != nil {
		c.js.open("tail", '{')
		c.js.hex("unresolvedHex", t.Bytes)
		c.js.close()
	}
}

func (t *ActorLookupTail) code(c *codec) {
	c.obj("tail", func() {
		t.Actor.code(c, "actor")
		c.text8("spotId", &t.SpotID)
		c.nz64("spotGeneration", &t.SpotGeneration)
		c.nz64("authorityOwnerGeneration", &t.AuthorityOwnerGeneration)
	})
}

func (t *ActorJoinTail) code(c *codec) {
	c.obj("tail", func() {
		c.obj("join", func() {
			enum32(c, "joinResult", &t.Result)
			c.delimited("length", 2, 65535, func() {
				switch t.Result {
				case JoinAccepted:
					if p := unionCase(c, "spot", &t.Spot); p != nil {
						p.code(c, "spot")
					}
				case JoinRejected:
					optionalSpotRef(c, "spot", &t.Spot)
				}
			})
		})
	})
}

// optionalSpotRef walks optional-spot-ref: hasSpot bool8, u16 length, then
// the spot-ref when hasSpot is true.
func optionalSpotRef(c *codec, name string, p **SpotRef) {
	c.obj(name, func() {
		has := *p != nil
		c.boolean("hasSpot", &has)
		c.delimited("length", 2, 65535, func() {
			if !has {
				if c.decoding {
					*p = nil
				}
				return
			}
			if s := unionCase(c, "spot", p); s != nil {
				s.code(c, "spot")
			}
		})
	})
}

func (t *StreamBindTail) code(c *codec) {
	c.obj("tail", func() {
		c.nz64("bindingGeneration", &t.BindingGeneration)
		c.nz64("authorityOwnerGeneration", &t.AuthorityOwnerGeneration)
	})
}

func (t *UserSpotCreateTail) code(c *codec) {
	c.obj("tail", func() {
		enum8(c, "createResult", &t.Result)
		t.Spot.code(c, "spot")
	})
}

func (t *UserSpotCloseTail) code(c *codec) {
	c.obj("tail", func() { c.boolean("closed", &t.Closed) })
}

func (t *ActorCreateTail) code(c *codec) {
	c.obj("tail", func() {
		c.obj("creation", func() {
			enum8(c, "createResult", &t.Result)
			c.delimited("length", 2, 65535, func() {
				switch t.Result {
				case CreateExisting, CreateCreated:
					if p := unionCase(c, "actor", &t.Actor); p != nil {
						p.code(c, "actor")
					}
				case CreateRejected:
					c.unionOthers("actor", t.Actor != nil)
					if c.decoding {
						t.Actor = nil
					}
				}
			})
		})
	})
}

// newReplyTail returns an empty typed tail for an original operation kind,
// or nil when that operation's ok reply has no tail.
func newReplyTail(kind MeshOperationKind) ReplyTail {
	switch kind {
	case OpActorLookup:
		return new(ActorLookupTail)
	case OpActorJoin:
		return new(ActorJoinTail)
	case OpStreamBind:
		return new(StreamBindTail)
	case OpUserSpotCreate:
		return new(UserSpotCreateTail)
	case OpUserSpotClose:
		return new(UserSpotCloseTail)
	case OpActorCreate:
		return new(ActorCreateTail)
	}
	return nil
}

// failureCode walks framework-error-code; values outside the service-wire set
// (including the public-only 23..32) are UnknownFrameworkError.
func failureCode(c *codec, name string, v *FrameworkErrorCode) {
	if c.err != nil {
		return
	}
	if c.decoding {
		x, ok := c.readUint(name, 4)
		if !ok {
			return
		}
		if !FrameworkErrorCode(x).valid() {
			c.fail(UnknownFrameworkError, name, fmt.Sprintf("failure code %d is not valid on the service wire", x))
			return
		}
		*v = FrameworkErrorCode(x)
		return
	}
	if !v.valid() {
		c.fail(UnknownFrameworkError, name, fmt.Sprintf("failure code %d is not valid on the service wire", uint32(*v)))
		return
	}
	c.writeUint(4, uint64(*v))
	if c.js != nil {
		c.js.str(name, v.String())
	}
}

func (r *Reply) code(c *codec) {
	c.nz64("correlation", &r.Correlation)
	enum32(c, "terminalResult", &r.Result)
	failureCode(c, "failureCode", &r.FailureCode)
	if c.err != nil {
		return
	}
	// Terminal shape (schema terminal-failure-integrity).
	switch {
	case r.Result == ResultOK:
		c.constraint("failureCode", r.FailureCode != FailNone, "an ok reply carries failure code none")
	case r.Result.isBoundaryFailure():
		c.constraint("failureCode", r.FailureCode != FailNone, r.Result.String()+" carries failure code none")
	default:
		c.constraint("failureCode", r.FailureCode == FailNone || r.FailureCode.TerminalResult() != r.Result,
			fmt.Sprintf("%s requires the failure code that maps to it, got %s", r.Result, r.FailureCode))
	}
	if c.err != nil {
		return
	}
	if c.decoding {
		// The tail is the rest of frame 0. Only an ok reply has one; for any
		// other result the leftover bytes are reported as trailing bytes.
		if r.Result == ResultOK && c.remaining() > 0 {
			r.Tail = &RawReplyTail{Bytes: c.buf[c.off:len(c.buf):len(c.buf)]}
			c.off = len(c.buf)
		}
		return
	}
	if r.Tail == nil {
		return
	}
	if r.Result != ResultOK {
		c.fail(Constraint, "tail", "only an ok reply has a request-specific tail")
		return
	}
	if raw, ok := r.Tail.(*RawReplyTail); ok && len(raw.Bytes) == 0 {
		return
	}
	r.Tail.code(c)
}

func (r *Reply) validateRecord(rec *Record) *ProtocolError {
	if rec.Payload == nil {
		return nil
	}
	if r.Result != ResultOK {
		return protoErr(Constraint, CmdReply, "payload", "a failed reply carries no application payload")
	}
	var existing bool
	switch t := r.Tail.(type) {
	case *UserSpotCreateTail:
		existing = t.Result == CreateExisting
	case *ActorCreateTail:
		existing = t.Result == CreateExisting
	}
	if existing {
		return protoErr(Constraint, CmdReply, "payload", "an Existing creation result carries no application payload")
	}
	return nil
}

// ResolveReplyTail interprets the tail of a decoded reply record for the
// original operation kind the requester recorded for its correlation,
// replacing a *RawReplyTail with the typed tail (or nil for operations whose
// ok reply has no tail). A tail that does not fit is a *ProtocolError; the
// record is then left unchanged.
func (r *Record) ResolveReplyTail(kind MeshOperationKind) error {
	rep, ok := r.Body.(*Reply)
	if !ok {
		return protoErr(Constraint, r.Command, "", "not a reply record")
	}
	var raw []byte
	switch t := rep.Tail.(type) {
	case nil:
	case *RawReplyTail:
		raw = t.Bytes
	default:
		if t.OperationKind() == kind {
			return nil
		}
		return protoErr(Constraint, CmdReply, "tail", fmt.Sprintf("tail already resolved as %s", t.OperationKind()))
	}
	if !kind.valid() {
		return protoErr(EnumRange, CmdReply, "tail", fmt.Sprintf("undefined operation kind %d", uint32(kind)))
	}
	var typed ReplyTail
	if rep.Result == ResultOK {
		typed = newReplyTail(kind)
	}
	if typed == nil {
		if len(raw) != 0 {
			return protoErr(TrailingBytes, CmdReply, "tail", fmt.Sprintf("%d bytes, but a %s reply has no tail", len(raw), kind))
		}
		rep.Tail = nil
		return nil
	}
	c := newDecoder(CmdReply, r.Flags, raw)
	typed.code(c)
	if c.err == nil && c.remaining() != 0 {
		c.fail(TrailingBytes, "tail", fmt.Sprintf("%d bytes after the %s tail", c.remaining(), kind))
	}
	if c.err != nil {
		return c.err
	}
	prev := rep.Tail
	rep.Tail = typed
	if perr := rep.validateRecord(r); perr != nil {
		rep.Tail = prev
		return perr
	}
	return nil
}
