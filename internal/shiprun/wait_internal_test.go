package shiprun

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// TestTemporaryWait checks what an operation shows while it waits for a
// temporary failure: the wait its Reason names, or none.
func TestTemporaryWait(t *testing.T) {
	at := lifecycletype.NewTimestamp(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, tc := range []struct {
		err    error
		reason string // "": no wait
		says   string
	}{
		{errors.New("boom"), "", ""},
		{&lifecycletype.TemporaryError{RetryAfter: time.Second}, "", ""},
		{fmt.Errorf("merge: %w", &lifecycletype.TemporaryError{Reason: lifecycletype.WaitMergeabilityUnknown}), lifecycletype.WaitMergeabilityUnknown, "still working out whether it can merge"},
		{&lifecycletype.TemporaryError{Reason: lifecycletype.WaitMergeTrain}, lifecycletype.WaitMergeTrain, "merge train"},
		{&lifecycletype.TemporaryError{Reason: "ci_still_running"}, "ci_still_running", "asked to wait (ci_still_running)"},
	} {
		w := temporaryWait(tc.err, "merge", at)
		if tc.reason == "" {
			if w != nil {
				t.Errorf("temporaryWait(%v) = %+v, want nil", tc.err, w)
			}
			continue
		}
		if w == nil || w.Reason != tc.reason || !w.Until.Equal(at.Time) || !strings.Contains(w.Message, tc.says) || !strings.Contains(w.Message, at.String()) {
			t.Errorf("temporaryWait(%v) = %+v, want reason %s until %s saying %q", tc.err, w, tc.reason, at, tc.says)
		}
		if got := waitReason(tc.err); got != tc.reason {
			t.Errorf("waitReason(%v) = %q, want %q", tc.err, got, tc.reason)
		}
	}
}
