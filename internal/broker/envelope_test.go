package broker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/telemetry"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// hookBody is an event's envelope as the Service writes it.
var hookBody = []byte(`{"id":"evt_1","type":"task.updated","occurredAt":"2026-11-21T10:00:00.000Z","sequence":1,"taskVersion":1,` +
	`"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","data":{"task":{"id":"tsk_1"}}}`)

// The envelope's occurredAt and traceId are read as the Service writes
// them, and not from within the data.
func TestEnvelopeMembers(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 123*int(time.Millisecond), time.UTC)
	trace := "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, e := range []lifecycletype.Event{
		{ID: "evt_1", Type: lifecycletype.EventTaskUpdated, OccurredAt: lifecycletype.NewTimestamp(at), Sequence: 7, TraceID: &trace,
			Data: json.RawMessage(`{"note":"\"traceId\":\"00000000000000000000000000000001\""}`)},
		{ID: "evt_\u00e9", Type: lifecycletype.EventTaskUpdated, OccurredAt: lifecycletype.NewTimestamp(at), Sequence: 7, TraceID: &trace, Data: json.RawMessage(`{ "a": 1 }`)},
	} {
		body, err := appendEventJSON(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		if got := telemetry.OccurredAt(body); got != at.UnixNano() {
			t.Errorf("occurredAt of %s = %v, want %v", body, time.Unix(0, got).UTC(), at)
		}
		if tid, ok := telemetry.EventTraceID(body); !ok || tid.String() != trace {
			t.Errorf("traceId of %s = %v %v, want %s", body, tid, ok, trace)
		}
	}
	none := lifecycletype.Event{ID: "evt_2", Type: lifecycletype.EventTaskUpdated, OccurredAt: lifecycletype.NewTimestamp(at), Data: json.RawMessage(`{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736"}`)}
	body, _ := appendEventJSON(nil, &none)
	if tid, ok := telemetry.EventTraceID(body); ok {
		t.Errorf("traceId of %s = %v, want none", body, tid)
	}
	for _, bad := range []string{`{}`, `{"occurredAt":"2026-11-21"}`, `{"occurredAt":"2026-11-21T10:04:05.1x3Z"}`, `{"traceId":"zz"}`,
		`{"traceId":"00000000000000000000000000000000"}`} {
		if telemetry.OccurredAt([]byte(bad)) != 0 {
			t.Errorf("occurredAt of %s is not 0", bad)
		}
		if _, ok := telemetry.EventTraceID([]byte(bad)); ok {
			t.Errorf("%s has a traceId", bad)
		}
	}
	if n := testing.AllocsPerRun(100, func() { telemetry.OccurredAt(hookBody); telemetry.EventTraceID(hookBody) }); n != 0 {
		t.Errorf("reading the envelope allocates %.0f times", n)
	}
}
