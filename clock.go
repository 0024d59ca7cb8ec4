package lifecycle

import "time"

// systemClock is the Clock of the real world.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// IsWall marks systemClock as the wall clock: an idle event stream parks
// only on it (see sse.WallClock).
func (systemClock) IsWall() {}
