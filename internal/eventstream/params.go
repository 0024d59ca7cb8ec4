package eventstream

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/sse"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Bounds of the heartbeatSeconds parameter, in seconds.
const (
	// DefaultHeartbeat is the heartbeat of a stream that asks for none.
	DefaultHeartbeat = 20
	// MinHeartbeat and MaxHeartbeat bound the heartbeat a stream may ask for.
	MinHeartbeat = 10
	MaxHeartbeat = 60
)

// Filter selects the events a stream carries.
type Filter struct {
	Types  []lifecycletype.EventType // empty: all
	TaskID string                    // "": all
}

// Keep reports whether an event of type typ about task taskID passes f.
func (f *Filter) Keep(typ lifecycletype.EventType, taskID string) bool {
	if f.TaskID != "" && f.TaskID != taskID {
		return false
	}
	return len(f.Types) == 0 || slices.Contains(f.Types, typ)
}

// Params are the validated parameters of a stream request.
type Params struct {
	Filter    Filter
	Cursor    string // "" starts at the live tail
	Heartbeat time.Duration
}

// Problem is a bad parameter of a stream request: the field it names and
// why it is refused.
type Problem struct {
	Field, Reason string
}

// ParseParams reads and checks the query and the Last-Event-ID header of
// a stream request. It returns the parameters and a Problem for every bad
// one, in the order eventTypes, taskId, heartbeatSeconds.
func ParseParams(r *http.Request) (Params, []Problem) {
	q := r.URL.Query()
	p := Params{Heartbeat: DefaultHeartbeat * time.Second}
	var problems []Problem
	if vals, ok := q["eventTypes"]; ok {
		var unknown []string
		empty := false
		for _, part := range strings.Split(strings.Join(vals, ","), ",") {
			t := lifecycletype.EventType(strings.TrimSpace(part))
			switch {
			case t == "":
				empty = true
			case !t.Valid():
				unknown = append(unknown, strconv.Quote(string(t)))
			case !slices.Contains(p.Filter.Types, t):
				p.Filter.Types = append(p.Filter.Types, t)
			}
		}
		allowed := "task.updated, task.reviewed, task.shipped, task.awaiting_user, task.merge_queue, task.stalled or task.ci_failed"
		switch {
		case len(unknown) > 0:
			problems = append(problems, Problem{"eventTypes", fmt.Sprintf("unknown event type %s; allowed: %s", strings.Join(unknown, ", "), allowed)})
		case empty:
			problems = append(problems, Problem{"eventTypes", "must be a comma-separated list without empty items of " + allowed})
		}
	}
	if vals, ok := q["taskId"]; ok {
		if len(vals) != 1 || !id.Valid(vals[0], "tsk_") {
			problems = append(problems, Problem{"taskId", "must be one task ID matching tsk_[A-Za-z0-9]+"})
		} else {
			p.Filter.TaskID = vals[0]
		}
	}
	if vals, ok := q["heartbeatSeconds"]; ok {
		n, err := strconv.Atoi(vals[0])
		if len(vals) != 1 || err != nil || n < MinHeartbeat || n > MaxHeartbeat {
			problems = append(problems, Problem{"heartbeatSeconds", fmt.Sprintf("must be an integer from %d to %d", MinHeartbeat, MaxHeartbeat)})
		} else {
			p.Heartbeat = time.Duration(n) * time.Second
		}
	}
	p.Cursor = sse.LastEventID(r.Header, q, "cursor")
	return p, problems
}
