package telemetry

import (
	"fmt"
	"testing"
	"time"
)

// webhookBatch is the most pending retries a webhook worker reads at once:
// a full page.
const webhookBatch = 256

// pending is a pending retry as a worker reads it: its delivery ID and
// its event's envelope.
type pending struct {
	id   string
	body []byte
}

func ident(p *pending) (string, []byte) { return p.id, p.body }

// A worker's Backlog counts pending retries beyond those it tracks, and
// finds the oldest again when it is delivered.
func TestBacklogPending(t *testing.T) {
	var g Backlog
	body := func(sec int) []byte {
		return fmt.Appendf(nil, `{"occurredAt":"2026-11-21T10:00:%02d.000Z"}`, sec)
	}
	at := func(sec int) int64 { return time.Date(2026, 11, 21, 10, 0, sec, 0, time.UTC).UnixNano() }
	PendingRead(&g, []pending{{"dlv_a", body(5)}, {"dlv_b", body(3)}}, ident, true)
	if st := g.State("sub_1"); st.PendingN != 2 || st.Oldest != at(3) {
		t.Fatalf("pending %d oldest %d, want 2 and %d", st.PendingN, st.Oldest, at(3))
	}
	// dlv_b's retry succeeds; a first attempt fails.
	g.flying = 1
	g.Attempted("dlv_b", "dlv_c", body(3), false)
	g.Attempted("", "dlv_d", body(9), true)
	if st := g.State("sub_1"); st.PendingN != 2 || st.Oldest != at(5) || st.Flying != 0 {
		t.Fatalf("pending %d oldest %d flying %d, want 2, %d and 0", st.PendingN, st.Oldest, st.Flying, at(5))
	}
	// A full page: more may be pending than the worker knows of.
	page := make([]pending, webhookBatch)
	for i := range page {
		page[i] = pending{fmt.Sprintf("dlv_p%d", i), body(1)}
	}
	PendingRead(&g, page, ident, false)
	if st := g.State("sub_1"); st.PendingN != webhookBatch+2 || st.Oldest != at(1) {
		t.Fatalf("pending %d oldest %d, want %d and %d", st.PendingN, st.Oldest, webhookBatch+2, at(1))
	}
	// Every one read again, fewer than a page: exactly those.
	PendingRead(&g, []pending{{"dlv_d", body(9)}}, ident, true)
	if st := g.State("sub_1"); st.PendingN != 1 || st.Oldest != at(9) {
		t.Fatalf("pending %d oldest %d, want 1 and %d", st.PendingN, st.Oldest, at(9))
	}
	// Beyond maxTrackedPending, failures are counted, not tracked; the
	// delivery of one not tracked is counted too.
	g.flying = maxTrackedPending + 10
	for i := range maxTrackedPending + 10 {
		g.Attempted("", fmt.Sprintf("dlv_x%d", i), body(20), true)
	}
	g.Attempted(fmt.Sprintf("dlv_x%d", maxTrackedPending+5), "dlv_y", nil, false)
	if st := g.State("sub_1"); len(g.pending) != maxTrackedPending || st.PendingN != maxTrackedPending+10 || st.Oldest != at(9) {
		t.Errorf("%d tracked, %d pending, oldest %d; want %d, %d and %d", len(g.pending), st.PendingN, st.Oldest,
			maxTrackedPending, maxTrackedPending+10, at(9))
	}
}
