package lifecycle

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/tasklifecycle/lifecycle/internal/jsonenc"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// This file encodes a Task by hand: the bytes encoding/json writes for it
// (the Encoder of encodeJSON, without HTML escaping, and json.Marshal for
// the compact form), without reflection. TestTaskEncoderMatchesJSON
// compares the two on a corpus of tasks.

// taskMember is one member of a Task's JSON object.
type taskMember struct {
	name   string
	encode func(e *jsonWriter, t *Task)
}

// taskMembers are the served members of a Task, in the order of its
// struct fields (encoding/json's order).
var taskMembers = []taskMember{
	{"id", func(e *jsonWriter, t *Task) { e.str(t.ID) }},
	{"identifier", func(e *jsonWriter, t *Task) { e.str(t.Identifier) }},
	{"title", func(e *jsonWriter, t *Task) { e.str(t.Title) }},
	{"description", func(e *jsonWriter, t *Task) { e.str(t.Description) }},
	{"status", func(e *jsonWriter, t *Task) { e.str(string(t.Status)) }},
	{"priority", func(e *jsonWriter, t *Task) { e.str(string(t.Priority)) }},
	{"updatedAt", func(e *jsonWriter, t *Task) { e.time(t.UpdatedAt) }},
	{"availableActions", func(e *jsonWriter, t *Task) { e.actions(t.AvailableActions) }},
	{"assignee", func(e *jsonWriter, t *Task) {
		if t.Assignee == nil {
			e.null()
			return
		}
		e.b = append(e.b, `{"id":`...)
		e.str(t.Assignee.ID)
		e.b = append(e.b, `,"name":`...)
		e.str(t.Assignee.Name)
		e.b = append(e.b, '}')
	}},
	{"assigneeAgentId", func(e *jsonWriter, t *Task) { e.strPtr(t.AssigneeAgentID) }},
	{"assignmentSource", func(e *jsonWriter, t *Task) { e.strPtr((*string)(t.AssignmentSource)) }},
	{"routingDecisionId", func(e *jsonWriter, t *Task) { e.strPtr(t.RoutingDecisionID) }},
	{"routingReason", func(e *jsonWriter, t *Task) { e.raw(t.RoutingReason) }},
	{"routingConfidence", func(e *jsonWriter, t *Task) {
		if t.RoutingConfidence == nil {
			e.null()
			return
		}
		e.float(*t.RoutingConfidence)
	}},
	{"triageQueueId", func(e *jsonWriter, t *Task) { e.strPtr(t.TriageQueueID) }},
	{"submissionId", func(e *jsonWriter, t *Task) { e.strPtr(t.SubmissionID) }},
	{"prUrl", func(e *jsonWriter, t *Task) { e.strPtr(t.PRURL) }},
	{"prNumber", func(e *jsonWriter, t *Task) {
		if t.PRNumber == nil {
			e.null()
			return
		}
		e.b = strconv.AppendInt(e.b, int64(*t.PRNumber), 10)
	}},
	{"branch", func(e *jsonWriter, t *Task) { e.strPtr(t.Branch) }},
	{"baseBranch", func(e *jsonWriter, t *Task) { e.strPtr(t.BaseBranch) }},
	{"headSha", func(e *jsonWriter, t *Task) { e.strPtr(t.HeadSHA) }},
	{"acceptanceCriteria", func(e *jsonWriter, t *Task) { e.strs(t.AcceptanceCriteria) }},
	{"links", func(e *jsonWriter, t *Task) {
		e.b = append(e.b, `{"issue":`...)
		e.str(t.Links.Issue)
		e.b = append(e.b, `,"parentIssue":`...)
		e.strPtr(t.Links.ParentIssue)
		e.b = append(e.b, '}')
	}},
	{"context", func(e *jsonWriter, t *Task) {
		e.b = append(e.b, `{"project":`...)
		e.strPtr(t.Context.Project)
		e.b = append(e.b, `,"goal":`...)
		e.str(t.Context.Goal)
		e.b = append(e.b, '}')
	}},
	{"blocker", func(e *jsonWriter, t *Task) {
		bl := t.Blocker
		if bl == nil {
			e.null()
			return
		}
		e.b = append(e.b, `{"kind":`...)
		e.str(bl.Kind)
		e.b = append(e.b, `,"sourceRunId":`...)
		e.str(bl.SourceRunID)
		e.b = append(e.b, `,"sourceAgentId":`...)
		e.str(bl.SourceAgentID)
		e.b = append(e.b, `,"reason":`...)
		e.str(bl.Reason)
		e.b = append(e.b, `,"actionRequired":`...)
		e.str(bl.ActionRequired)
		e.b = append(e.b, `,"resumeInstructions":`...)
		e.str(bl.ResumeInstructions)
		e.b = append(e.b, `,"createdAt":`...)
		e.time(bl.CreatedAt)
		e.b = append(e.b, '}')
	}},
}

// compactTaskMembers are the members of a compact task: without those of
// compactLeftOut, in the sorted order in which encoding/json writes the
// keys of a map.
var compactTaskMembers = func() []taskMember {
	var ms []taskMember
	for _, m := range taskMembers {
		if !slices.Contains(compactLeftOut[:], m.name) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b taskMember) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return ms
}()

// jsonWriter appends JSON to b.
type jsonWriter struct {
	b          []byte
	escapeHTML bool
}

// task appends t's object: every served member, or those of a compact
// task.
func (e *jsonWriter) task(t *Task, compact bool) {
	ms := taskMembers
	if compact {
		ms = compactTaskMembers
	}
	e.b = append(e.b, '{')
	for i, m := range ms {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, '"')
		e.b = append(e.b, m.name...)
		e.b = append(e.b, '"', ':')
		m.encode(e, t)
	}
	e.b = append(e.b, '}')
}

func (e *jsonWriter) null() { e.b = append(e.b, "null"...) }

func (e *jsonWriter) strPtr(s *string) {
	if s == nil {
		e.null()
		return
	}
	e.str(*s)
}

func (e *jsonWriter) strs(ss []string) {
	if ss == nil {
		e.null()
		return
	}
	e.b = append(e.b, '[')
	for i, s := range ss {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
}

func (e *jsonWriter) actions(as []Action) {
	if as == nil {
		e.null()
		return
	}
	e.b = append(e.b, '[')
	for i, a := range as {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(string(a))
	}
	e.b = append(e.b, ']')
}

// time appends t as Timestamp.MarshalJSON does.
func (e *jsonWriter) time(t Timestamp) {
	e.b = append(e.b, '"')
	e.b = t.UTC().AppendFormat(e.b, lifecycletype.TimestampLayout)
	e.b = append(e.b, '"')
}

// raw appends a json.RawMessage as encoding/json does: null when empty,
// else compacted (HTML escaped when e.escapeHTML). An invalid message
// makes the encoding fail, as encoding/json's does.
func (e *jsonWriter) raw(m json.RawMessage) {
	if len(m) == 0 {
		e.null()
		return
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		panic(jsonWriterError{err})
	}
	if e.escapeHTML {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, buf.Bytes())
		e.b = append(e.b, esc.Bytes()...)
		return
	}
	e.b = append(e.b, buf.Bytes()...)
}

// jsonWriterError is the panic of a value encoding/json would refuse.
type jsonWriterError struct{ err error }

// float appends f as encoding/json encodes a float64. NaN and the
// infinities, which encoding/json refuses, make the encoding fail.
func (e *jsonWriter) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		panic(jsonWriterError{&json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}})
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	e.b = strconv.AppendFloat(e.b, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9.
		n := len(e.b)
		if n >= 4 && e.b[n-4] == 'e' && e.b[n-3] == '-' && e.b[n-2] == '0' {
			e.b[n-2] = e.b[n-1]
			e.b = e.b[:n-1]
		}
	}
}

// str appends s as a JSON string as encoding/json does (see
// jsonenc.AppendString), escaping <, > and & when e.escapeHTML.
func (e *jsonWriter) str(s string) { e.b = jsonenc.AppendString(e.b, s, e.escapeHTML) }

// taskWriters are the jsonWriters of writeTask.
var taskWriters = sync.Pool{New: func() any { return &jsonWriter{b: make([]byte, 0, 2048)} }}

// withTaskWriter runs fn with an empty jsonWriter of taskWriters, whose
// bytes are fn's until it returns.
func withTaskWriter(fn func(e *jsonWriter) error) error {
	e := taskWriters.Get().(*jsonWriter)
	e.b = e.b[:0]
	defer func() {
		if cap(e.b) <= 64<<10 { // keep no outsized buffer
			taskWriters.Put(e)
		}
	}()
	return fn(e)
}

// taskEnvelope appends the body writeTask writes for t, with its final
// newline, to e.b. It reports false when encoding/json would have failed
// (an invalid routingReason, a confidence that is not a number), leaving
// e.b in no particular state.
func (e *jsonWriter) taskEnvelope(t *Task, compact bool) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if _, isErr := v.(jsonWriterError); !isErr {
				panic(v)
			}
			ok = false
		}
	}()
	if compact && len(t.RoutingReason) > 0 && !json.Valid(t.RoutingReason) {
		// The compact form leaves routingReason out, but encoding/json
		// encodes the whole task first, and fails.
		return false
	}
	e.b = append(e.b, `{"data":`...)
	// The compact form is what json.Marshal writes, HTML escaped.
	e.escapeHTML = compact
	e.task(t, compact)
	e.escapeHTML = false
	e.b = append(e.b, `,"availableActions":`...)
	e.actions(t.AvailableActions)
	if compact {
		e.b = append(e.b, `,"meta":{"tokenBudgetHint":"compact","truncatedFields":["description","routingReason"]}}`+"\n"...)
	} else {
		e.b = append(e.b, `,"meta":{"tokenBudgetHint":"standard","truncatedFields":[]}}`+"\n"...)
	}
	return true
}

// taskList appends the body writeTaskList writes for list, with its final
// newline, to e.b. It reports false when encoding/json would have failed.
func (e *jsonWriter) taskList(list TaskList) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if _, isErr := v.(jsonWriterError); !isErr {
				panic(v)
			}
			ok = false
		}
	}()
	e.b = append(e.b, `{"data":`...)
	if list.Tasks == nil {
		e.null()
	} else {
		e.b = append(e.b, '[')
		for i := range list.Tasks {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.task(&list.Tasks[i], false)
		}
		e.b = append(e.b, ']')
	}
	e.b = append(e.b, `,"nextCursor":`...)
	if list.NextCursor == "" {
		e.null()
	} else {
		e.str(list.NextCursor)
	}
	e.b = append(e.b, '}', '\n')
	return true
}
