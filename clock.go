package lifecycle

import "time"

// Clock tells the time and waits for it. The Service reads every timestamp,
// expiry and retry delay from its Clock, so tests can drive time forward
// without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the Clock of the real world.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// IsWall marks systemClock as the wall clock: an idle event stream parks
// only on it (see sse.WallClock).
func (systemClock) IsWall() {}
