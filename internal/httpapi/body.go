package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tasklifecycle/lifecycle/internal/httpin"
	"github.com/tasklifecycle/lifecycle/internal/jsonscan"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Limits that hold for every request body.
const (
	// MaxBodyBytes is the largest request body accepted (1 MiB); larger
	// ones get 413 payload_too_large.
	MaxBodyBytes = 1 << 20
	// MaxBodyDepth is how deeply a body may nest objects and arrays; no
	// request of the API needs more than four levels.
	MaxBodyDepth = 32
	// MaxArrayEntries bounds every array of a request body that its
	// jsonscan.Limits do not name otherwise.
	MaxArrayEntries = 100
)

// Limits are what the request bodies of a handler are read and decoded
// within; WithLimits gives them to ReadBody and DecodeJSON.
type Limits struct {
	// Read bounds the reading of a body (see httpin.Read); its Max is
	// MaxBodyBytes.
	Read httpin.Limits
	// Scan bounds the JSON of a body, checked in one pass over its bytes
	// before it is decoded (see jsonscan.Decode).
	Scan *jsonscan.Limits
}

// defaultLimits are the Limits of a request whose context carries none:
// the size and nesting that bound every body, without a budget or a
// read deadline.
var defaultLimits = Limits{
	Read: httpin.Limits{Max: MaxBodyBytes},
	Scan: &jsonscan.Limits{MaxDepth: MaxBodyDepth, MaxArray: MaxArrayEntries},
}

// limitsKey is the context key of a request's Limits.
type limitsKey struct{}

// WithLimits returns ctx carrying l, the Limits ReadBody and DecodeJSON
// read the bodies of requests with that context within.
func WithLimits(ctx context.Context, l *Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l)
}

// limitsFrom returns the Limits ctx carries, or defaultLimits.
func limitsFrom(ctx context.Context) *Limits {
	if l, _ := ctx.Value(limitsKey{}).(*Limits); l != nil {
		return l
	}
	return &defaultLimits
}

// ReadBody reads the request body within the Read limits of its context
// (see WithLimits and ReadBodyWith). On success the caller must call
// release once it no longer needs the body decoded.
func ReadBody(w http.ResponseWriter, r *http.Request) (raw []byte, release func(), err error) {
	return ReadBodyWith(w, r, limitsFrom(r.Context()).Read)
}

// ReadBodyWith reads the request body within limits (see httpin.Read),
// with the API's errors: a body over limits.Max is refused with 413, one
// still arriving after limits.Timeout with 408, and one that finds the
// budget used up with 429. On success the caller must call release once
// it no longer needs the body decoded.
func ReadBodyWith(w http.ResponseWriter, r *http.Request, limits httpin.Limits) (raw []byte, release func(), err error) {
	raw, release, err = httpin.Read(w, r, limits)
	switch {
	case err == nil:
	case errors.Is(err, httpin.ErrTooLarge):
		err = fmt.Errorf("the request body exceeds %d bytes: %w", limits.Max, lifecycletype.ErrPayloadTooLarge)
	case errors.Is(err, httpin.ErrTimeout):
		err = fmt.Errorf("the request body did not arrive within %s: %w", limits.Timeout, lifecycletype.ErrRequestTimeout)
	case errors.Is(err, httpin.ErrBusy):
		err = &lifecycletype.RateLimitError{RetryAfterSeconds: 1, Message: "The server is reading too many large request bodies at once; retry in a second"}
	case errors.Is(err, httpin.ErrUnreadable):
		err = lifecycletype.Invalid("body", "could not be read")
	}
	return raw, release, err
}

// DecodeJSON decodes the request body into dst, refusing unknown members,
// trailing data and bodies over the limits of its context (see ReadBody
// and DecodeStrict). An empty body decodes as {} when allowEmpty is set.
func DecodeJSON(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool) error {
	return DecodeAndCheck(w, r, dst, allowEmpty, nil)
}

// DecodeAndCheck decodes the request body into dst like DecodeJSON, then
// runs check (when not nil) on it, so that one response lists every
// invalid field: those of the wrong JSON type or text, and those check
// refuses.
func DecodeAndCheck(w http.ResponseWriter, r *http.Request, dst any, allowEmpty bool, check func() error) error {
	raw, release, err := ReadBody(w, r)
	if err != nil {
		return err
	}
	defer release()
	return DecodeRaw(r.Context(), raw, dst, limitsFrom(r.Context()).Scan, allowEmpty, check)
}

// DecodeRaw decodes a request body read by ReadBody into dst, within
// scan, and runs check on it; see DecodeAndCheck. It stops when ctx is
// done (the client went away).
func DecodeRaw(ctx context.Context, raw []byte, dst any, scan *jsonscan.Limits, allowEmpty bool, check func() error) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		if allowEmpty {
			return nil
		}
		return lifecycletype.Invalid("body", "a JSON object is required")
	}
	ve, typeOnly := decodeStrict(raw, dst, scan)
	if ve != nil && !typeOnly {
		return ve
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if check == nil {
		if ve == nil {
			return nil
		}
		return ve
	}
	return mergeFieldErrors(ve, check())
}

// mergeFieldErrors adds the fields of the *ValidationError in more (if it
// is one) to those of ve, leaving out fields ve already names, in time
// linear in both, and keeping at most MaxFieldErrors. An error of more
// that is not a validation error is returned as it is.
func mergeFieldErrors(ve *lifecycletype.ValidationError, more error) error {
	if ve == nil {
		return more
	}
	var mv *lifecycletype.ValidationError
	if more != nil && !errors.As(more, &mv) {
		return more
	}
	out := &lifecycletype.ValidationError{Fields: ve.Fields, Truncated: ve.Truncated}
	if mv != nil {
		seen := make(map[string]bool, len(ve.Fields))
		for _, f := range ve.Fields {
			seen[f.Field] = true
		}
		out.Truncated = out.Truncated || mv.Truncated
		for _, f := range mv.Fields {
			if seen[f.Field] {
				continue
			}
			if len(out.Fields) >= lifecycletype.MaxFieldErrors {
				out.Truncated = true
				break
			}
			seen[f.Field] = true
			out.Fields = append(out.Fields, f)
		}
	}
	return out
}

// DecodeStrict decodes one JSON value from raw into dst, refusing unknown
// members and trailing data, after checking the body against scan (see
// jsonscan.Decode). A body with an array over its limit, or nested too
// deeply, is refused without being decoded; strings with invalid UTF-8
// or control characters are refused by name, along with any wrong member
// type. Every refusal is a *lifecycletype.ValidationError.
func DecodeStrict(raw []byte, dst any, scan *jsonscan.Limits) error {
	if ve, _ := decodeStrict(raw, dst, scan); ve != nil {
		return ve
	}
	return nil
}

// decodeStrict is DecodeStrict, saying also whether only member types or
// texts were wrong (typeOnly): then the rest was decoded and can still be
// checked.
func decodeStrict(raw []byte, dst any, scan *jsonscan.Limits) (ve *lifecycletype.ValidationError, typeOnly bool) {
	var v lifecycletype.Validator
	typeOnly = jsonscan.Decode(raw, dst, scan, v.Add)
	return v.Errors(), typeOnly
}
