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
//
// Only a caller without a deadline is given a goroutine: one with a
// deadline gets its call back by that deadline anyway (go-redis sets it on
// the socket), or by the operation timeout, whichever is first — so a
// cancellation before it waits at most that long, as before. Running every
// call on a goroutine of its own cost about 40 µs per call on the
// benchmark machine (the hand-over between two goroutines around network
// I/O), 10–15 % of a creation's throughput on Redis, and every call on the
// mesh's hot paths has a deadline.

// MayLeave reports whether a call under ctx runs on a goroutine of its own
// (Leavable) and may go on after its caller returned: ctx can end and has
// no deadline. A caller that passes a buffer copies it first then.
func MayLeave(ctx context.Context) bool {
	if ctx.Done() == nil || ctx.Err() != nil {
		return false
	}
	_, bounded := ctx.Deadline()
	return !bounded
}

// Leavable runs call, the Redis part of one store call whose caller's
// context is caller, and returns its result — or, when caller ends first,
// left == true at once (err nil), call going on on its own goroutine (its result
// dropped). A caller whose context has already ended gets left == true
// without call being run. A context that can never end (Done() == nil),
// or that has a deadline (MayLeave), runs call on the caller's goroutine.
//
// call must not use anything the caller may change or reuse after it
// returned (a value buffer: the caller copies it first), and must derive
// its context from caller, so that it stops at once between commands once
// the caller has left.
func Leavable[T any](caller context.Context, call func() (T, error)) (v T, left bool, err error) {
	if caller.Err() != nil {
		return v, true, nil
	}
	if !MayLeave(caller) {
		v, err = call()
		return v, false, err
	}
	done := caller.Done()
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
