package broker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

func TestAppendEventJSONMatchesEncoder(t *testing.T) {
	t.Parallel()
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	odd := "evt_\"quoted\"\u2028"
	base := lifecycletype.Event{
		ID: "evt_4kQ9xZ0123456789abcdefgh", Type: lifecycletype.EventTaskShipped, Sequence: 1234567890123, TaskVersion: 42,
		OccurredAt: lifecycletype.NewTimestamp(time.Date(2026, 11, 21, 10, 4, 5, 123456789, time.UTC)),
	}
	tests := []struct {
		name  string
		edit  func(e *lifecycletype.Event)
		valid bool
	}{
		{"as the Service writes it", func(e *lifecycletype.Event) {
			e.Data = mustMarshal(t, lifecycletype.TaskUpdatedData{EventData: lifecycletype.EventData{TaskID: "tsk_a", Summary: "Task <a> & \"b\" done\n\u2028", AvailableActions: []lifecycletype.Action{}}})
		}, true},
		{"with a trace ID", func(e *lifecycletype.Event) { e.TraceID = &trace; e.Data = []byte(`{"a":1}`) }, true},
		{"spaces inside strings", func(e *lifecycletype.Event) { e.Data = []byte(`{"a":"x y","b":[1,2],"c":{"d":"\" }"}}`) }, true},
		{"whitespace outside strings", func(e *lifecycletype.Event) { e.Data = []byte("{\"a\": 1,\n\t\"b\" : [1, 2] }") }, true},
		{"raw HTML characters and U+2028", func(e *lifecycletype.Event) { e.Data = []byte("{\"a\":\"<b>&\u2028\"}") }, true},
		{"an ID that needs escaping", func(e *lifecycletype.Event) { e.ID = odd; e.Data = []byte(`{}`) }, true},
		{"a trace ID that needs escaping", func(e *lifecycletype.Event) { e.TraceID = &odd; e.Data = []byte(`{}`) }, true},
		{"a zone other than UTC", func(e *lifecycletype.Event) {
			e.OccurredAt = lifecycletype.Timestamp{Time: time.Date(2026, 11, 21, 11, 4, 5, 0, time.FixedZone("CET", 3600))}
			e.Data = []byte(`{}`)
		}, true},
		{"invalid data", func(e *lifecycletype.Event) { e.Data = []byte(`{"a": }`) }, false},
		{"a control character in a string", func(e *lifecycletype.Event) { e.Data = []byte("{\"a\":\"\x01\"}") }, false},
		{"an unterminated string", func(e *lifecycletype.Event) { e.Data = []byte(`{"a":"}`) }, false},
		{"not an object", func(e *lifecycletype.Event) { e.Data = []byte(`[1]`) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := base
			tt.edit(&e)
			got, err := appendEventJSON([]byte("prefix"), &e)
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			encErr := enc.Encode(&e)
			if !tt.valid {
				if err == nil || encErr == nil {
					t.Fatalf("error %v (encoder %v), want one for invalid data", err, encErr)
				}
				e.Data = json.RawMessage("null")
				want.Reset()
				enc.Encode(&e)
			} else if err != nil || encErr != nil {
				t.Fatalf("error %v (encoder %v)", err, encErr)
			}
			if w := "prefix" + strings.TrimSuffix(want.String(), "\n"); string(got) != w {
				t.Errorf("got  %s\nwant %s", got, w)
			}
			if bytes.ContainsAny(got, "\r\n") {
				t.Errorf("%q is not one line", got)
			}
		})
	}
}

func TestAppendFrame(t *testing.T) {
	t.Parallel()
	e := lifecycletype.Event{ID: "evt_a", Type: lifecycletype.EventTaskUpdated, Sequence: 7, TaskVersion: 2, Data: []byte(`{"x":1}`),
		OccurredAt: lifecycletype.NewTimestamp(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))}
	got, err := AppendFrame(nil, &e)
	want := "retry: 5000\nid: evt_a\nevent: task.updated\n" +
		`data: {"id":"evt_a","type":"task.updated","occurredAt":"2026-11-21T10:00:00.000Z","sequence":7,"taskVersion":2,"traceId":null,"data":{"x":1}}` + "\n\n"
	if err != nil || string(got) != want {
		t.Errorf("AppendFrame = %q, %v; want %q", got, err, want)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
