package mcp

import (
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// TestFirstEventFloor checks the choice of a wait's answer: without
// afterSequence, an event the watch handed over before the read of the
// task, of a version that read showed, is not the answer; the first newer
// one is, whether it came before or after the floor was known.
func TestFirstEventFloor(t *testing.T) {
	t.Parallel()
	ev := func(v int64) *lifecycle.Event { return &lifecycle.Event{ID: "evt", TaskVersion: v} }
	tests := []struct {
		name      string
		needFloor bool
		before    []int64 // versions handed over before setFloor
		floor     int64
		after     []int64 // versions handed over after it
		want      int64   // the answer's version, 0 for none
	}{
		{"an event already read is not the answer", true, []int64{5}, 5, nil, 0},
		{"the next one is", true, []int64{5}, 5, []int64{6, 7}, 6},
		{"a newer held event is", true, []int64{5, 6, 7}, 5, []int64{8}, 6},
		{"held events all old", true, []int64{3, 4}, 5, []int64{6}, 6},
		{"with afterSequence every event counts", false, []int64{2}, 5, []int64{6}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFirstEvent(tt.needFloor)
			for _, v := range tt.before {
				f.offer(ev(v))
			}
			f.setFloor(tt.floor)
			for _, v := range tt.after {
				f.offer(ev(v))
			}
			var got int64
			select {
			case e := <-f.got:
				got = e.TaskVersion
			default:
			}
			if got != tt.want {
				t.Errorf("answer of version %d, want %d", got, tt.want)
			}
		})
	}
}
