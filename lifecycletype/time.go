package lifecycletype

import (
	"fmt"
	"time"
)

// Timestamp is a point in time that encodes in JSON as RFC 3339 in UTC with
// exactly three fractional digits, for example "2026-11-21T10:04:05.123Z",
// the format of every timestamp in the API.
type Timestamp struct {
	time.Time
}

// TimestampLayout is RFC 3339 with milliseconds; with a UTC time the zone
// prints as "Z".
const TimestampLayout = "2006-01-02T15:04:05.000Z07:00"

// NewTimestamp returns t in UTC, truncated to milliseconds.
func NewTimestamp(t time.Time) Timestamp {
	return Timestamp{t.UTC().Truncate(time.Millisecond)}
}

// String returns the timestamp in the API's format.
func (t Timestamp) String() string {
	return t.UTC().Format(TimestampLayout)
}

// MarshalJSON implements json.Marshaler.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimestampLayout)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, TimestampLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON implements json.Unmarshaler. It accepts any RFC 3339 time.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("timestamp %s is not a JSON string", b)
	}
	parsed, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	*t = NewTimestamp(parsed)
	return nil
}

// Clock tells the time and waits for it. The Service reads every timestamp,
// expiry and retry delay from its Clock, so tests can drive time forward
// without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}
