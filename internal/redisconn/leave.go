package redisconn

import "context"

// Why a store call runs on a goroutine of its own. go-redis bounds socket
// I/O by the context's deadline only: a caller that cancels its context
// (no deadline) while Redis does not answer — SIGSTOP, a partition — would
// get its call back at the store's operation timeout, not at the
// cancellation (go-redis v9 has no option for it: ContextTimeoutEnabled
// passes the deadline to the socket, and ctx.Done() is watched only while
// waiting for a pooled connection). So the providers run the Redis part of
// each call with Leavable: the caller returns when its context ends, and
// the call goes on without it until its command is answered or fails at
// the operation timeout (the socket deadline), go-redis then returning or
// dropping the connection as it always does. What is left behind is at
// most one goroutine per call whose command was in flight: a call that
// has not yet taken a connection finds its context done and stops at once
// (go-redis's pool wait and dial watch ctx.Done()), and none sends a
// further command.

// Leavable runs call, the Redis part of one store call whose caller's
// context is caller, and returns its result — or, when caller ends first,
// left == true at once (err nil), call going on on its own goroutine (its result
// dropped). A caller whose context has already ended gets left == true
// without call being run. A context that can never end (Done() == nil)
// runs call on the caller's goroutine.
//
// call must not use anything the caller may change or reuse after it
// returned (a value buffer: the caller copies it first), and must derive
// its context from caller, so that it stops at once between commands once
// the caller has left.
func Leavable[T any](caller context.Context, call func() (T, error)) (v T, left bool, err error) {
	done := caller.Done()
	if done == nil {
		v, err = call()
		return v, false, err
	}
	if caller.Err() != nil {
		return v, true, nil
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1) // buffered: a left call's goroutine never blocks on it
	go func() {
		v, err := call()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, false, r.err
	case <-done:
		// A call that ended at the same moment keeps its answer (an
		// applied write is reported as applied).
		select {
		case r := <-ch:
			return r.v, false, r.err
		default:
			return v, true, nil
		}
	}
}
