package broker

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tasklifecycle/lifecycle/internal/sse"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// RetryMillis is the reconnection delay every frame's retry field asks of
// clients.
const RetryMillis = 5000

// AppendFrame appends the server-sent event frame of e to dst: its retry,
// id, event and data fields and a blank line. The data is the event's JSON
// envelope on one line, encoded like every response body of the API (see
// appendEventJSON). When the stored data of e is found not to be valid JSON
// the frame carries "data": null and the error is returned, so that the
// caller logs it and the event, with its id, still reaches the client.
func AppendFrame(dst []byte, e *lifecycletype.Event) ([]byte, error) {
	dst, err := appendEventJSON(sse.AppendHead(dst, RetryMillis, e.ID, string(e.Type)), e)
	return append(dst, "\n\n"...), err
}

// appendEventJSON appends the JSON envelope of e exactly as a json.Encoder
// without HTML escaping writes it, minus the newline. The Service writes
// events with plain identifiers and data from json.Marshal, which is
// compact; such data is trusted to be the valid JSON the Service stored and
// is copied as it is, at a fraction of the encoder's cost (replay is bound
// by it). Anything else goes through encoding/json, which compacts the data
// onto one line, or finds it invalid.
func appendEventJSON(dst []byte, e *lifecycletype.Event) ([]byte, error) {
	if !sse.PlainString(e.ID) || !sse.PlainString(string(e.Type)) || (e.TraceID != nil && !sse.PlainString(*e.TraceID)) || !sse.CompactObject(e.Data) {
		return appendEventJSONSlow(dst, e)
	}
	dst = append(dst, `{"id":"`...)
	dst = append(dst, e.ID...)
	dst = append(dst, `","type":"`...)
	dst = append(dst, e.Type...)
	dst = append(dst, `","occurredAt":"`...)
	dst = e.OccurredAt.UTC().AppendFormat(dst, lifecycletype.TimestampLayout)
	dst = append(dst, `","sequence":`...)
	dst = strconv.AppendInt(dst, e.Sequence, 10)
	dst = append(dst, `,"taskVersion":`...)
	dst = strconv.AppendInt(dst, e.TaskVersion, 10)
	if e.TraceID == nil {
		dst = append(dst, `,"traceId":null`...)
	} else {
		dst = append(dst, `,"traceId":"`...)
		dst = append(dst, *e.TraceID...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"data":`...)
	dst = append(dst, e.Data...)
	return append(dst, '}'), nil
}

// appendEventJSONSlow is appendEventJSON through encoding/json.
func appendEventJSONSlow(dst []byte, e *lifecycletype.Event) ([]byte, error) {
	out, err := sse.AppendJSON(dst, e)
	if err != nil {
		bad := *e
		bad.Data = json.RawMessage("null")
		out, _ = sse.AppendJSON(dst, &bad) // a valid envelope always encodes
		err = fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	return out, err
}
