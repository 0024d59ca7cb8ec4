package mcp

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func collect(s *notificationStore, session, stream string, after int) []string {
	var out []string
	for d, err := range s.After(context.Background(), session, stream, after) {
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		out = append(out, string(d))
	}
	return out
}

// The store keeps the last notifications of each session's stream, and
// nothing of the answers to calls.
func TestNotificationStore(t *testing.T) {
	ctx := context.Background()
	s := newNotificationStore(3)
	s.Open(ctx, "s1", "")
	s.Open(ctx, "s1", "post-1")
	for i := range 5 {
		s.Append(ctx, "s1", "", []byte(fmt.Sprint(i)))
	}
	s.Append(ctx, "s1", "post-1", []byte("answer"))
	if got := collect(s, "s1", "", -1); !slices.Equal(got, []string{"2", "3", "4"}) {
		t.Errorf("a new stream gets %v, want the last 3", got)
	}
	if got := collect(s, "s1", "", 2); !slices.Equal(got, []string{"3", "4"}) {
		t.Errorf("a stream resumed after index 2 gets %v", got)
	}
	if got := collect(s, "s1", "", 4); len(got) != 0 {
		t.Errorf("a stream that saw everything gets %v", got)
	}
	if got := collect(s, "s1", "post-1", -1); len(got) != 0 {
		t.Errorf("a call's stream gets %v, want nothing kept", got)
	}
	s.SessionClosed(ctx, "s1")
	if got := collect(s, "s1", "", -1); len(got) != 0 {
		t.Errorf("a closed session's stream gets %v", got)
	}
}
