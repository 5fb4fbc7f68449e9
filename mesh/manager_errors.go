package mesh

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// The Manager's closed error vocabulary (spec §7, §7.2, §7.3). Every error a
// Manager method returns matches exactly one of these with errors.Is (plus
// ErrClosed when the node is shutting down); the cause is wrapped with it.
// Where mesh/authority already has the sentinel, it is the same value, so an
// authority error travelling up keeps matching.
var (
	// ErrNotConfigured: this node has no object-role mesh (object role none),
	// so it offers no object create, find or message (§2, §7 InMesh rules).
	ErrNotConfigured = errors.New("mesh: no object-role mesh configured")
	// ErrInvalidOperation: the call itself is invalid — an option given
	// twice, a malformed id or stable type, an InMesh naming two meshes, a
	// stored final result that belongs to another request with the same
	// OperationId (§7).
	ErrInvalidOperation = errors.New("mesh: invalid operation")
	// ErrNotFound: no Ready object (Find, messaging), or InMesh names a mesh
	// that does not exist: no MeshNode of that name holds a live owner lease
	// (§7).
	ErrNotFound = errors.New("mesh: not found")
	// ErrAlreadyExists: Create found a Ready or Creating object of the same
	// type under the id (§7 result table).
	ErrAlreadyExists = errors.New("mesh: already exists")
	// ErrTypeMismatch: the id exists as another object kind or stable type
	// (§7 result table). The same value as authority.ErrTypeMismatch.
	ErrTypeMismatch = authority.ErrTypeMismatch
	// ErrStaleGeneration: the ref's ObjectGeneration is not the current one
	// (§7.2). The same value as authority.ErrStaleGeneration.
	ErrStaleGeneration = authority.ErrStaleGeneration
	// ErrMoving: the object is being relocated; Destroy/Close refuse it
	// (§7.2). A request a move took in and did not run is answered with it
	// too when the move ends with the object owned elsewhere (the requester's
	// send is then retried where the store names; over the wire it reads
	// as ErrUnavailable, a route the target refused).
	ErrMoving = errors.New("mesh: object is moving")
	// ErrHostCommandRunning: a host command (Relocate, or a Drain, which
	// runs until the node stopped) is already running on this node; the new
	// one did not start and changed nothing.
	ErrHostCommandRunning = errors.New("mesh: a host command is already running on this node")
	// ErrDeadlineExceeded: the call's one deadline passed before the
	// operation's completion condition held (§7). Errors carrying it also
	// match context.DeadlineExceeded.
	ErrDeadlineExceeded = errors.New("mesh: deadline exceeded")
	// ErrUnavailable: nothing can serve the call now: no Serving candidate
	// with the type and capacity (then authority.ErrCapacityExhausted may
	// match too), the owner's lease is gone, the target refused new work, or
	// the Location Store failed (locstore.ErrUnavailable is wrapped).
	ErrUnavailable = errors.New("mesh: unavailable")
	// ErrNotMember: InMesh names a mesh that exists (a MeshNode of it holds
	// a live owner lease) but that this node is not a member of. A node
	// joins one RouteMesh and reaches only its members, so it cannot place
	// there; create from a node of that mesh. Errors carrying it also match
	// ErrUnavailable.
	ErrNotMember = errors.New("mesh: this node is not a member of that mesh")
	// ErrRejected: the factory declined the creation (spot.Declined); see
	// *RejectedError for the reason. Nothing was created.
	ErrRejected = errors.New("mesh: creation rejected")
	// ErrCreateFailed: the factory failed (returned an error or panicked);
	// see *CreateFailedError. Nothing was created (§7 "typed Failed").
	ErrCreateFailed = errors.New("mesh: creation failed")
	// ErrRequestFailed: the target handler failed a request (returned an
	// error, panicked, or returned without replying).
	ErrRequestFailed = errors.New("mesh: request failed")

	// ErrCapacityExhausted and ErrGenerationExhausted are authority's.
	ErrCapacityExhausted   = authority.ErrCapacityExhausted
	ErrGenerationExhausted = authority.ErrGenerationExhausted
)

// RejectedError is a declined creation: the factory's reason.
type RejectedError struct {
	ID     string
	Reason string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("mesh: creation of %q rejected: %s", e.ID, e.Reason)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// CreateFailedError is a failed creation: the factory's typed failure.
type CreateFailedError struct {
	ID      string
	Type    string // "factoryError" or "factoryPanic", or the wire failure code name
	Message string
}

func (e *CreateFailedError) Error() string {
	return fmt.Sprintf("mesh: creation of %q failed (%s): %s", e.ID, e.Type, e.Message)
}

// Is makes errors.Is(err, ErrCreateFailed) true.
func (e *CreateFailedError) Is(target error) bool { return target == ErrCreateFailed }

// deadlineErr builds an ErrDeadlineExceeded that also matches
// context.DeadlineExceeded.
func deadlineErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrDeadlineExceeded, context.DeadlineExceeded, fmt.Sprintf(format, args...))
}

// ctxErr is the error of a call whose context ended: ErrDeadlineExceeded
// for its deadline, ErrUnavailable (wrapping the cause) for a cancellation
// — by the caller or because the node is stopping.
func ctxErr(ctx context.Context, format string, args ...any) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return deadlineErr(format, args...)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, fmt.Sprintf(format, args...), context.Cause(ctx))
}

// wrapErr returns "kind: detail: cause" matching kind and cause.
func wrapErr(kind error, cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause == nil {
		return fmt.Errorf("%w: %s", kind, msg)
	}
	return fmt.Errorf("%w: %s: %w", kind, msg, cause)
}

// classify maps an error from below (authority, locstore, transport,
// context) into the vocabulary, keeping the cause. ctx is the call's
// context: an error after its deadline is DeadlineExceeded whatever the
// layer reported.
func classify(ctx context.Context, err error, what string) error {
	switch {
	case err == nil:
		return nil
	case isVocabulary(err):
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w: %s: %w", ErrDeadlineExceeded, context.DeadlineExceeded, what, err)
	case errors.Is(err, authority.ErrInvalidOperation):
		return wrapErr(ErrInvalidOperation, err, "%s", what)
	case errors.Is(err, authority.ErrNotFound):
		return wrapErr(ErrNotFound, err, "%s", what)
	}
	return wrapErr(ErrUnavailable, err, "%s", what)
}

func isVocabulary(err error) bool {
	for _, k := range []error{ErrNotConfigured, ErrInvalidOperation, ErrNotFound, ErrAlreadyExists, ErrTypeMismatch,
		ErrStaleGeneration, ErrMoving, ErrDeadlineExceeded, ErrUnavailable, ErrRejected, ErrCreateFailed,
		ErrRequestFailed, ErrCapacityExhausted, ErrGenerationExhausted, ErrNotMember, ErrClosed} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// opFamily says whether a wire failure is about an Actor or a Spot: the
// failure codes are per family (actorRouteNotFound vs spotRouteNotFound).
type opFamily uint8

const (
	familyActor opFamily = iota + 1
	familySpot
)

// errOtherMesh is resolveMesh's answer for an InMesh naming a mesh other
// than the node's own; the caller asks the store whether it exists
// (otherMesh: NotFound, or ErrNotMember).
var errOtherMesh = errors.New("mesh: InMesh names another mesh")

// errRouteStale is the internal outcome of a route fence the target refused
// because it is not (or no longer) the addressed node run or owner: the
// message was not delivered, so the sender may re-resolve and retry once.
var errRouteStale = errors.New("mesh: route fence refused by the target")

// wireFailure is the one mapping from the vocabulary to a command 20
// terminal result and failure code (docs/OBJECTS.md "Wire mapping").
// Boundary results (timedOut, terminated, invalidState, backpressured)
// carry failure code none, as the codec requires.
func wireFailure(fam opFamily, err error) (router.TerminalResult, router.FrameworkErrorCode) {
	pick := func(actor, spotCode router.FrameworkErrorCode) router.FrameworkErrorCode {
		if fam == familySpot {
			return spotCode
		}
		return actor
	}
	switch {
	case errors.Is(err, errRouteStale):
		return router.ResultInvalidState, router.FailNone
	case errors.Is(err, ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return router.ResultTimedOut, router.FailNone
	case errors.Is(err, spot.ErrMailboxFull):
		return router.ResultBackpressured, router.FailNone
	case errors.Is(err, ErrNotFound):
		return router.ResultNotFound, pick(router.FailActorRouteNotFound, router.FailSpotRouteNotFound)
	case errors.Is(err, ErrStaleGeneration):
		return router.ResultConflict, pick(router.FailActorLocationStale, router.FailSpotGenerationStale)
	case errors.Is(err, ErrMoving):
		if fam == familySpot {
			return router.ResultConflict, router.FailSpotMoving
		}
		// The wire has no actor-moving code; a moving Actor is an invalid
		// state for the request (boundary result, no code).
		return router.ResultInvalidState, router.FailNone
	case errors.Is(err, ErrTypeMismatch):
		return router.ResultConflict, pick(router.FailActorTypeMismatch, router.FailSpotTypeMismatch)
	case errors.Is(err, ErrAlreadyExists):
		return router.ResultConflict, router.FailActorAlreadyExists
	case errors.Is(err, ErrCreateFailed):
		return router.ResultInternalError, pick(router.FailActorCreateFailed, router.FailSpotCreateFailed)
	case errors.Is(err, ErrRejected):
		// A declined Instance Spot activation answering its request
		// (creations carry Rejected in an ok tail instead). Until
		// 2026-12-07 it fell to the handler-error default, and a requester
		// on another node read it as ErrRequestFailed
		// (TestDeclinedInstanceActivationIsErrRejected). A peer of an
		// earlier version reads requestRejected as ErrRequestFailed still.
		return router.ResultRejected, router.FailRequestRejected
	case errors.Is(err, spot.ErrHandlerPanic):
		return router.ResultInternalError, router.FailWorkerFailed
	case errors.Is(err, ErrRequestFailed), errors.Is(err, spot.ErrNoReply):
		return router.ResultInternalError, router.FailRequestFailed
	case errors.Is(err, ErrInvalidOperation):
		return router.ResultInvalidArgument, router.FailNone
	case errors.Is(err, ErrClosed), errors.Is(err, spot.ErrClosed), errors.Is(err, spot.ErrRuntimeDown):
		return router.ResultTerminated, router.FailNone
	case errors.Is(err, ErrUnavailable):
		return router.ResultTerminated, router.FailNone
	}
	// A handler's own error: the request failed in the application.
	return router.ResultInternalError, router.FailRequestFailed
}

// replyError is wireFailure's inverse, for a requester reading a command 20
// that is not ok. what names the request for the message.
func replyError(fam opFamily, rep *router.Reply, what string) error {
	detail := fmt.Sprintf("%s: %s/%s", what, rep.Result, rep.FailureCode)
	if rep.Result == router.ResultTerminated && rep.FailureCode == router.FailNone {
		// What wireFailure sends for a node closing, its lease in doubt,
		// the object's runtime stopping, or a store that node needed
		// failing: "terminated/none" alone told an operator nothing (a
		// try-out: a request to a node that was closing). The store was
		// missing from the list until 2026-12-07, and a review read a
		// Relocation Store failure (a corrupt payload) as a node closing.
		detail = fmt.Sprintf("%s: the node that received it could not serve it (%s: it is closing, its owner lease is in doubt, "+
			"a store it needed failed, or the object was stopping; that node's log says which)", what, rep.Result)
	}
	switch rep.Result {
	case router.ResultInvalidState:
		return fmt.Errorf("%w: %w: %s", ErrUnavailable, errRouteStale, detail)
	case router.ResultTimedOut:
		return deadlineErr("%s", detail)
	case router.ResultBackpressured:
		return fmt.Errorf("%w: %w: %s", ErrUnavailable, spot.ErrMailboxFull, detail)
	case router.ResultInvalidArgument:
		return fmt.Errorf("%w: %s", ErrInvalidOperation, detail)
	case router.ResultTerminated, router.ResultBusy, router.ResultNotConnected, router.ResultNotSupported:
		return fmt.Errorf("%w: %s", ErrUnavailable, detail)
	}
	switch rep.FailureCode {
	case router.FailActorRouteNotFound, router.FailSpotRouteNotFound, router.FailRequestTargetNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, detail)
	case router.FailActorLocationStale, router.FailSpotGenerationStale:
		return fmt.Errorf("%w: %s", ErrStaleGeneration, detail)
	case router.FailSpotMoving:
		return fmt.Errorf("%w: %s", ErrMoving, detail)
	case router.FailActorTypeMismatch, router.FailSpotTypeMismatch:
		return fmt.Errorf("%w: %s", ErrTypeMismatch, detail)
	case router.FailActorAlreadyExists:
		return fmt.Errorf("%w: %s", ErrAlreadyExists, detail)
	case router.FailActorCreateFailed, router.FailSpotCreateFailed:
		return &CreateFailedError{Type: rep.FailureCode.String(), Message: detail}
	case router.FailRequestRejected, router.FailActorCreateRejected:
		// The wire carries no reason: the factory's is in the declining
		// node's answer to its own callers only.
		return &RejectedError{Reason: "declined by its factory on the node that was to host it (" + detail + ")"}
	case router.FailWorkerFailed, router.FailRequestFailed:
		return fmt.Errorf("%w: %s", ErrRequestFailed, detail)
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, detail)
}
