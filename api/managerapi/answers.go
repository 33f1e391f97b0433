package managerapi

import (
	"errors"
	"fmt"
	"net/http"
)

// Answer is what the outcome of a manager call means to its caller: the one
// vocabulary every caller (create, delete, resize, backfill, sweeper) uses
// to decide what to do next, instead of comparing reasons and statuses
// itself. Classify maps an error to it.
type Answer int

// The answers a manager call can have.
const (
	// AnswerOK: the call succeeded (err == nil).
	AnswerOK Answer = iota
	// AnswerUnreachable: no answer at all: a transport error, a time
	// limit, no manager to call (an error without an *Error in its
	// chain).
	AnswerUnreachable
	// AnswerBusy: 429 TooManyRequests.
	AnswerBusy
	// AnswerServerError: a 5xx other than 507 (ReasonInternal, or any 5xx
	// status).
	AnswerServerError
	// AnswerDenied: 401 Unauthorized or 403 Forbidden.
	AnswerDenied
	// AnswerOwnerConflict: 409 OwnerConflict; OwnerOf names the
	// directory's owner ("" for a directory without an owner record).
	AnswerOwnerConflict
	// AnswerPoolMissing: 404 PoolNotFound: the pool is not configured on
	// the node or its directory does not exist. Never a sign that a
	// volume directory is gone.
	AnswerPoolMissing
	// AnswerVolumeMissing: 404 NotFound: no such volume (or no such
	// route).
	AnswerVolumeMissing
	// AnswerNotEmpty: 409 NotEmpty: a delete with IfEmpty found data.
	AnswerNotEmpty
	// AnswerNotEnforced: 422 NotEnforced: the pool cannot enforce the
	// volume's size.
	AnswerNotEnforced
	// AnswerNoSpace: 507 InsufficientStorage.
	AnswerNoSpace
	// AnswerConflict: 409 Conflict: a file or symlink holds the name, a
	// filesystem is mounted inside, a shrink.
	AnswerConflict
	// AnswerInvalid: any other 4xx (400, 405, 413, ...): the request
	// itself is wrong, and sending it again changes nothing.
	AnswerInvalid
)

// Classify returns what err, the error of a manager call (nil for
// success), means to the caller.
//
// An *Error in err's chain (see errors.As) is classified by its Reason
// when it has one this package knows, else by its StatusCode:
//
//   - 401 and 403 are AnswerDenied, 429 AnswerBusy, 507 AnswerNoSpace,
//     any other 5xx AnswerServerError;
//   - a bare 404 (no reason) is AnswerVolumeMissing and a bare 409
//     AnswerConflict, as the client names them ReasonNotFound and
//     ReasonConflict;
//   - any other 4xx is AnswerInvalid, and so is a 404 or 409 with a reason
//     this package does not know (a newer manager's): only ReasonNotFound
//     or a bare 404 says that a volume is missing, so an unknown kind of
//     404 is never taken for a removed directory;
//   - a status that is no error (0, 1xx, 2xx, 3xx) is AnswerServerError.
//
// ReasonInternal with a 4xx status (the client's name for a bare status
// no reason has, 422 say) is classified by that status too.
func Classify(err error) Answer {
	if err == nil {
		return AnswerOK
	}
	var e *Error
	if !errors.As(err, &e) || e == nil {
		return AnswerUnreachable
	}
	if e.Reason == ReasonInternal && isClientError(e.StatusCode) {
		return statusAnswer(e.StatusCode, false)
	}
	if a, ok := reasonAnswer(e.Reason); ok {
		return a
	}
	return statusAnswer(e.StatusCode, e.Reason == "")
}

// reasonAnswer returns the answer of reason r, and false for a reason it
// has no case for (which Classify then classifies by status). Every Reason
// constant must have a case: answers_test.go checks it.
func reasonAnswer(r Reason) (Answer, bool) {
	switch r {
	case ReasonBadRequest, ReasonMethodNotAllowed, ReasonRequestTooLarge:
		return AnswerInvalid, true
	case ReasonUnauthorized, ReasonForbidden:
		return AnswerDenied, true
	case ReasonNotFound:
		return AnswerVolumeMissing, true
	case ReasonPoolNotFound:
		return AnswerPoolMissing, true
	case ReasonConflict:
		return AnswerConflict, true
	case ReasonOwnerConflict:
		return AnswerOwnerConflict, true
	case ReasonNotEmpty:
		return AnswerNotEmpty, true
	case ReasonTooManyRequests:
		return AnswerBusy, true
	case ReasonInsufficientStorage:
		return AnswerNoSpace, true
	case ReasonNotEnforced:
		return AnswerNotEnforced, true
	case ReasonInternal:
		return AnswerServerError, true
	}
	return 0, false
}

// statusAnswer classifies an answer by its HTTP status alone. bare says
// that the answer had no reason at all: only then do 404 and 409 have a
// meaning of their own.
func statusAnswer(code int, bare bool) Answer {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return AnswerDenied
	case code == http.StatusTooManyRequests:
		return AnswerBusy
	case code == http.StatusInsufficientStorage:
		return AnswerNoSpace
	case code >= 500 && code <= 599:
		return AnswerServerError
	case bare && code == http.StatusNotFound:
		return AnswerVolumeMissing
	case bare && code == http.StatusConflict:
		return AnswerConflict
	case isClientError(code):
		return AnswerInvalid
	}
	return AnswerServerError
}

// isClientError reports whether code is a 4xx status.
func isClientError(code int) bool { return code >= 400 && code <= 499 }

// Retryable reports whether the same call may succeed later without anyone
// changing anything: true for AnswerUnreachable, AnswerBusy and
// AnswerServerError only.
func (a Answer) Retryable() bool {
	switch a {
	case AnswerUnreachable, AnswerBusy, AnswerServerError:
		return true
	}
	return false
}

// Retryable reports whether the call that returned err may succeed when
// tried again as it is: Classify(err).Retryable(). Fan-outs take it as
// their retry rule.
func Retryable(err error) bool {
	return Classify(err).Retryable()
}

// String names the answer for logs and messages: "OK", "Unreachable",
// "Busy", "ServerError", "Denied", "OwnerConflict", "PoolMissing",
// "VolumeMissing", "NotEmpty", "NotEnforced", "NoSpace", "Conflict",
// "Invalid"; "Answer(N)" for a value that is none of them.
func (a Answer) String() string {
	switch a {
	case AnswerOK:
		return "OK"
	case AnswerUnreachable:
		return "Unreachable"
	case AnswerBusy:
		return "Busy"
	case AnswerServerError:
		return "ServerError"
	case AnswerDenied:
		return "Denied"
	case AnswerOwnerConflict:
		return "OwnerConflict"
	case AnswerPoolMissing:
		return "PoolMissing"
	case AnswerVolumeMissing:
		return "VolumeMissing"
	case AnswerNotEmpty:
		return "NotEmpty"
	case AnswerNotEnforced:
		return "NotEnforced"
	case AnswerNoSpace:
		return "NoSpace"
	case AnswerConflict:
		return "Conflict"
	case AnswerInvalid:
		return "Invalid"
	}
	return fmt.Sprintf("Answer(%d)", int(a))
}

// OwnerOf returns the current owner that an OwnerConflict answer names (""
// for a directory without an owner record); ok is true only when
// Classify(err) is AnswerOwnerConflict.
func OwnerOf(err error) (owner string, ok bool) {
	if Classify(err) != AnswerOwnerConflict {
		return "", false
	}
	var e *Error
	if !errors.As(err, &e) {
		return "", false // never: Classify found one
	}
	return e.Owner, true
}
