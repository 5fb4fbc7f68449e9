package transport

import "github.com/meshnode/meshnode/router"

// Correlation lives in the record bodies (schema: the first body field of
// every request command and of command 20 reply is a nonzero-u64
// "correlation"; the project's relocationPrepare (40) / relocationReady
// (53) pair follows the same rule). The transport owns it: Request and Start
// write a fresh node-wide value into the request body, and the reply carrying
// it back is matched through the node-wide call table (call.go) — from the
// peer the request went to, or, for portable requests and reply slots, from
// any admitted peer.

// setCorrelation writes c into a request body; false if the body is not a
// request.
func setCorrelation(b router.Body, c uint64) bool {
	switch t := b.(type) {
	case *router.SpotRequest:
		t.Correlation = c
	case *router.ActorRequest:
		t.Correlation = c
	case *router.UserSpotCreate:
		t.Correlation = c
	case *router.UserSpotClose:
		t.Correlation = c
	case *router.ActorCreate:
		t.Correlation = c
	case *router.RelocationPrepare:
		t.Correlation = c
	case *router.InstanceSpot:
		if t.OperationKind != router.InstanceRequest {
			return false // a send has no reply route
		}
		t.ReplyRouteID = c
	default:
		return false
	}
	return true
}

// RequestCorrelation returns the correlation of a request record, for a
// Handler building its reply.
func RequestCorrelation(rec *router.Record) (uint64, bool) {
	if rec == nil {
		return 0, false
	}
	switch t := rec.Body.(type) {
	case *router.SpotRequest:
		return t.Correlation, true
	case *router.ActorRequest:
		return t.Correlation, true
	case *router.UserSpotCreate:
		return t.Correlation, true
	case *router.UserSpotClose:
		return t.Correlation, true
	case *router.ActorCreate:
		return t.Correlation, true
	case *router.RelocationPrepare:
		return t.Correlation, true
	case *router.InstanceSpot:
		// A request's reply route id is the correlation of its command 20
		// (§7.1); a send has none.
		return t.ReplyRouteID, t.OperationKind == router.InstanceRequest && t.ReplyRouteID != 0
	}
	return 0, false
}

// replyCorrelation returns the correlation of a terminal answer (command 20
// reply, or 53 relocationReady answering a relocationPrepare).
func replyCorrelation(rec *router.Record) (uint64, bool) {
	switch t := rec.Body.(type) {
	case *router.Reply:
		return t.Correlation, true
	case *router.RelocationReady:
		return t.Correlation, true
	}
	return 0, false
}
