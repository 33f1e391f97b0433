package disk

import (
	"errors"
	"fmt"
)

// Kinds of failure the Store reports. Test with errors.Is; the error's text
// is a message for people and does not repeat the kind.
var (
	// ErrInvalid: a name or mode breaks the rules.
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: no such pool, pool directory or volume.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the name is taken by something that is not a volume
	// directory (a file, a symlink, a device).
	ErrConflict = errors.New("conflict")
	// ErrInsufficientStorage: the pool has less free space than requested.
	ErrInsufficientStorage = errors.New("insufficient storage")
)

// kindError carries one of the kinds above with its own message.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func kindf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) error { return kindf(ErrInvalid, format, args...) }
