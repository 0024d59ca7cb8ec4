package eventstream

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

func TestParseParams(t *testing.T) {
	for _, tc := range []struct {
		query, lastEventID string
		want               Params
		fields             []string
	}{
		{"", "", Params{Heartbeat: DefaultHeartbeat * time.Second}, nil},
		{"eventTypes=task.shipped,task.updated,task.shipped&taskId=tsk_abc&heartbeatSeconds=30", "evt_x",
			Params{Filter: Filter{Types: []lifecycletype.EventType{"task.shipped", "task.updated"}, TaskID: "tsk_abc"}, Cursor: "evt_x", Heartbeat: 30 * time.Second}, nil},
		{"heartbeatSeconds=9&taskId=x&eventTypes=task.nope", "", Params{}, []string{"eventTypes", "taskId", "heartbeatSeconds"}},
		{"eventTypes=task.shipped,", "", Params{}, []string{"eventTypes"}},
		{"heartbeatSeconds=61", "", Params{}, []string{"heartbeatSeconds"}},
	} {
		r, err := http.NewRequest("GET", "/task-events/stream?"+tc.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.lastEventID != "" {
			r.Header.Set("Last-Event-ID", tc.lastEventID)
		}
		p, problems := ParseParams(r)
		var fields []string
		for _, pr := range problems {
			fields = append(fields, pr.Field)
		}
		if !reflect.DeepEqual(fields, tc.fields) {
			t.Errorf("%q: problems %v, want fields %v", tc.query, problems, tc.fields)
		}
		if tc.fields == nil && !reflect.DeepEqual(p, tc.want) {
			t.Errorf("%q: got %+v, want %+v", tc.query, p, tc.want)
		}
	}
}

func TestFilterKeep(t *testing.T) {
	f := Filter{Types: []lifecycletype.EventType{lifecycletype.EventTaskShipped}, TaskID: "tsk_a"}
	if !f.Keep(lifecycletype.EventTaskShipped, "tsk_a") {
		t.Error("drops a matching event")
	}
	if f.Keep(lifecycletype.EventTaskUpdated, "tsk_a") || f.Keep(lifecycletype.EventTaskShipped, "tsk_b") {
		t.Error("keeps an event it filters out")
	}
	var all Filter
	if !all.Keep(lifecycletype.EventTaskUpdated, "tsk_z") {
		t.Error("the zero Filter drops an event")
	}
}

func TestKeys(t *testing.T) {
	var k Keys
	r, _ := http.NewRequest("POST", "/", http.NoBody)
	a1 := k.Watch("a", r)
	a2 := k.Watch("a", r)
	if a1 != a2 {
		t.Fatal("two streams of one principal got different entries")
	}
	b := k.Watch("b", r)
	if got := len(k.Snapshot()); got != 2 {
		t.Fatalf("snapshot holds %d principals, want 2", got)
	}
	k.Revoke("a")
	if a1.Revoked().Err() == nil {
		t.Error("revoke left the key's streams open")
	}
	if b.Revoked().Err() != nil {
		t.Error("revoke ended another principal's streams")
	}
	if a3 := k.Watch("a", r); a3 == a1 || a3.Revoked().Err() != nil {
		t.Error("a stream opened after revocation is not watched afresh")
	}
	k.Unwatch("b", b)
	if _, ok := k.Snapshot()["b"]; ok {
		t.Error("the last stream's Unwatch left its principal")
	}
}

// events is a Store reader holding some events.
type events []lifecycletype.Event

func (evs events) EventBounds(context.Context) (lifecycletype.EventBounds, error) {
	return lifecycletype.EventBounds{Last: evs[len(evs)-1].Sequence}, nil
}

func (evs events) Events(_ context.Context, f lifecycletype.EventFilter) ([]lifecycletype.Event, error) {
	for _, e := range evs {
		if e.ID == f.ID {
			return []lifecycletype.Event{e}, nil
		}
	}
	return nil, nil
}

func TestStart(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	store := events{
		{ID: "evt_old", Sequence: 3, OccurredAt: lifecycletype.NewTimestamp(now.Add(-73 * time.Hour))},
		{ID: "evt_new", Sequence: 7, OccurredAt: lifecycletype.NewTimestamp(now.Add(-71 * time.Hour))},
		{ID: "evt_last", Sequence: 9, OccurredAt: lifecycletype.NewTimestamp(now)},
	}
	s := New(Config{Store: store, Clock: fakeclock.New(now), EventRetention: 72 * time.Hour})
	for _, tc := range []struct {
		cursor string
		want   start
	}{
		{"", start{9, resumeLive}},
		{"evt_new", start{7, resumeReplay}},
	} {
		got, err := s.start(context.Background(), tc.cursor)
		if err != nil || got != tc.want {
			t.Errorf("cursor %q: got %+v, %v; want %+v", tc.cursor, got, err, tc.want)
		}
	}
	for _, cursor := range []string{"evt_old", "evt_gone", "tsk_new", "evt_"} {
		if _, err := s.start(context.Background(), cursor); !errors.Is(err, lifecycletype.ErrCursorExpired) {
			t.Errorf("cursor %q: got %v, want ErrCursorExpired", cursor, err)
		}
	}
}
