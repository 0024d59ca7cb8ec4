package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle/internal/jsonscan"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// fields returns the names of the fields of err, a *ValidationError.
func fields(t *testing.T, err error) []string {
	t.Helper()
	var ve *lifecycletype.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ValidationError", err)
	}
	names := make([]string, len(ve.Fields))
	for i, f := range ve.Fields {
		names[i] = f.Field
	}
	return names
}

// A body whose only faults are member types is still checked, and one
// answer lists the faults of both; other faults stop the decoding.
func TestDecodeRawMergesTypeFaultsWithTheCheck(t *testing.T) {
	t.Parallel()
	scan := &jsonscan.Limits{MaxDepth: MaxBodyDepth, MaxArray: MaxArrayEntries}
	var dst struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	check := func() error { return lifecycletype.Invalid("b", "is required") }
	err := DecodeRaw(context.Background(), []byte(`{"a":"x"}`), &dst, scan, false, check)
	if got := strings.Join(fields(t, err), ","); got != "a,b" {
		t.Errorf("fields = %s, want a,b", got)
	}
	err = DecodeRaw(context.Background(), []byte(`{"c":1}`), &dst, scan, false, check)
	if got := strings.Join(fields(t, err), ","); got != "c" {
		t.Errorf("an unknown member: fields = %s, want c alone", got)
	}
	if err := DecodeRaw(context.Background(), nil, &dst, scan, true, check); err != nil {
		t.Errorf("an empty body allowed empty = %v", err)
	}
	if got := fields(t, DecodeRaw(context.Background(), nil, &dst, scan, false, nil)); got[0] != "body" {
		t.Errorf("an empty body: fields = %v, want body", got)
	}
}

// mergeFieldErrors leaves out fields named twice, keeps at most
// MaxFieldErrors, and returns an error that is not a validation error
// as it is.
func TestMergeFieldErrors(t *testing.T) {
	t.Parallel()
	ve := lifecycletype.Invalid("a", "bad")
	var v lifecycletype.Validator
	for i := range lifecycletype.MaxFieldErrors {
		v.Add(fmt.Sprintf("f%d", i), "bad")
	}
	v.Add("a", "again")
	merged := mergeFieldErrors(ve, v.Err())
	var out *lifecycletype.ValidationError
	if !errors.As(merged, &out) || len(out.Fields) != lifecycletype.MaxFieldErrors || !out.Truncated {
		t.Fatalf("merged = %v, want %d fields, truncated", merged, lifecycletype.MaxFieldErrors)
	}
	other := errors.New("store down")
	if got := mergeFieldErrors(ve, other); got != other {
		t.Errorf("mergeFieldErrors(ve, %v) = %v, want it as it is", other, got)
	}
}

// A body over the Read limits of its context is refused with 413 before
// it is decoded; without limits in the context, 1 MiB holds.
func TestDecodeJSONHoldsTheContextsLimits(t *testing.T) {
	t.Parallel()
	lim := &Limits{Read: defaultLimits.Read, Scan: defaultLimits.Scan}
	lim.Read.Max = 8
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"a":"0123456789"}`))
	r = r.WithContext(WithLimits(r.Context(), lim))
	var dst map[string]string
	if err := DecodeJSON(httptest.NewRecorder(), r, &dst, false); !errors.Is(err, lifecycletype.ErrPayloadTooLarge) {
		t.Errorf("over the context's limit: err = %v, want ErrPayloadTooLarge", err)
	}
	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"a":"0123456789"}`))
	if err := DecodeJSON(httptest.NewRecorder(), r, &dst, false); err != nil || dst["a"] != "0123456789" {
		t.Errorf("without limits: err = %v, dst = %v", err, dst)
	}
}

// Every answer written from an error says when to retry where there is
// something to say.
func TestWriteErrorRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err        error
		status     int
		retryAfter string
	}{
		{fmt.Errorf("get task: %w", lifecycletype.ErrUnavailable), http.StatusServiceUnavailable, StoreRetryAfter},
		{&lifecycletype.RateLimitError{RetryAfterSeconds: 7, Message: "Slow down"}, http.StatusTooManyRequests, "7"},
		{fmt.Errorf("task %q not found: %w", "x", lifecycletype.ErrNotFound), http.StatusNotFound, ""},
		{errors.New("boom"), http.StatusInternalServerError, ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		status, body := ErrorResponse(tt.err)
		WriteError(rec, tt.err, status, body)
		if rec.Code != tt.status || rec.Header().Get("Retry-After") != tt.retryAfter {
			t.Errorf("%v: %d Retry-After %q, want %d %q", tt.err, rec.Code, rec.Header().Get("Retry-After"), tt.status, tt.retryAfter)
		}
	}
	if _, body := ErrorResponse(fmt.Errorf("task %q not found: %w", "x", lifecycletype.ErrNotFound)); body.Error.Message != `Task "x" not found.` {
		t.Errorf("message = %q", body.Error.Message)
	}
}
