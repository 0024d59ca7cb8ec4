package taskjson

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
// (an Encoder without HTML escaping, and json.Marshal for the compact
// form), without reflection. TestWriterMatchesJSON compares the two on a
// corpus of tasks.

// taskMember is one member of a Task's JSON object.
type taskMember struct {
	name   string
	encode func(e *Writer, t *lifecycletype.Task)
}

// taskMembers are the served members of a Task, in the order of its
// struct fields (encoding/json's order).
var taskMembers = []taskMember{
	{"id", func(e *Writer, t *lifecycletype.Task) { e.str(t.ID) }},
	{"identifier", func(e *Writer, t *lifecycletype.Task) { e.str(t.Identifier) }},
	{"title", func(e *Writer, t *lifecycletype.Task) { e.str(t.Title) }},
	{"description", func(e *Writer, t *lifecycletype.Task) { e.str(t.Description) }},
	{"status", func(e *Writer, t *lifecycletype.Task) { e.str(string(t.Status)) }},
	{"priority", func(e *Writer, t *lifecycletype.Task) { e.str(string(t.Priority)) }},
	{"updatedAt", func(e *Writer, t *lifecycletype.Task) { e.time(t.UpdatedAt) }},
	{"availableActions", func(e *Writer, t *lifecycletype.Task) { e.actions(t.AvailableActions) }},
	{"assignee", func(e *Writer, t *lifecycletype.Task) {
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
	{"assigneeAgentId", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.AssigneeAgentID) }},
	{"assignmentSource", func(e *Writer, t *lifecycletype.Task) { e.strPtr((*string)(t.AssignmentSource)) }},
	{"routingDecisionId", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.RoutingDecisionID) }},
	{"routingReason", func(e *Writer, t *lifecycletype.Task) { e.raw(t.RoutingReason) }},
	{"routingConfidence", func(e *Writer, t *lifecycletype.Task) {
		if t.RoutingConfidence == nil {
			e.null()
			return
		}
		e.float(*t.RoutingConfidence)
	}},
	{"triageQueueId", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.TriageQueueID) }},
	{"submissionId", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.SubmissionID) }},
	{"prUrl", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.PRURL) }},
	{"prNumber", func(e *Writer, t *lifecycletype.Task) {
		if t.PRNumber == nil {
			e.null()
			return
		}
		e.b = strconv.AppendInt(e.b, int64(*t.PRNumber), 10)
	}},
	{"branch", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.Branch) }},
	{"baseBranch", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.BaseBranch) }},
	{"headSha", func(e *Writer, t *lifecycletype.Task) { e.strPtr(t.HeadSHA) }},
	{"acceptanceCriteria", func(e *Writer, t *lifecycletype.Task) { e.strs(t.AcceptanceCriteria) }},
	{"links", func(e *Writer, t *lifecycletype.Task) {
		e.b = append(e.b, `{"issue":`...)
		e.str(t.Links.Issue)
		e.b = append(e.b, `,"parentIssue":`...)
		e.strPtr(t.Links.ParentIssue)
		e.b = append(e.b, '}')
	}},
	{"context", func(e *Writer, t *lifecycletype.Task) {
		e.b = append(e.b, `{"project":`...)
		e.strPtr(t.Context.Project)
		e.b = append(e.b, `,"goal":`...)
		e.str(t.Context.Goal)
		e.b = append(e.b, '}')
	}},
	{"blocker", func(e *Writer, t *lifecycletype.Task) {
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
	{"dependsOn", func(e *Writer, t *lifecycletype.Task) { e.strs(t.DependsOn) }},
	{"waitingOn", func(e *Writer, t *lifecycletype.Task) { e.strs(t.WaitingOn) }},
}

// compactTaskMembers are the members of a compact task: without those of
// CompactLeftOut, in the sorted order in which encoding/json writes the
// keys of a map.
var compactTaskMembers = func() []taskMember {
	var ms []taskMember
	for _, m := range taskMembers {
		if !slices.Contains(CompactLeftOut[:], m.name) {
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

// Writer appends the JSON of tasks to a buffer of its own, which it keeps
// from one encoding to the next. Get one from [Use].
type Writer struct {
	b          []byte
	escapeHTML bool
}

// task appends t's object: every served member, or those of a compact
// task.
func (e *Writer) task(t *lifecycletype.Task, compact bool) {
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

// Bytes returns the bytes appended since the Writer was had from Use. They
// are the Writer's: they change with the next append.
func (e *Writer) Bytes() []byte { return e.b }

func (e *Writer) null() { e.b = append(e.b, "null"...) }

func (e *Writer) strPtr(s *string) {
	if s == nil {
		e.null()
		return
	}
	e.str(*s)
}

func (e *Writer) strs(ss []string) {
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

func (e *Writer) actions(as []lifecycletype.Action) {
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
func (e *Writer) time(t lifecycletype.Timestamp) {
	e.b = append(e.b, '"')
	e.b = t.UTC().AppendFormat(e.b, lifecycletype.TimestampLayout)
	e.b = append(e.b, '"')
}

// raw appends a json.RawMessage as encoding/json does: null when empty,
// else compacted (HTML escaped when e.escapeHTML). An invalid message
// makes the encoding fail, as encoding/json's does.
func (e *Writer) raw(m json.RawMessage) {
	if len(m) == 0 {
		e.null()
		return
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m); err != nil {
		panic(writerError{err})
	}
	if e.escapeHTML {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, buf.Bytes())
		e.b = append(e.b, esc.Bytes()...)
		return
	}
	e.b = append(e.b, buf.Bytes()...)
}

// writerError is the panic of a value encoding/json would refuse.
type writerError struct{ err error }

// float appends f as encoding/json encodes a float64. NaN and the
// infinities, which encoding/json refuses, make the encoding fail.
func (e *Writer) float(f float64) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		panic(writerError{&json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}})
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
func (e *Writer) str(s string) { e.b = jsonenc.AppendString(e.b, s, e.escapeHTML) }

// writers are the Writers of Use.
var writers = sync.Pool{New: func() any { return &Writer{b: make([]byte, 0, 2048)} }}

// Use runs fn with an empty Writer from a pool, and returns what fn
// returns. The Writer, and the bytes it returns, are fn's until fn
// returns: copy what must outlive it.
func Use(fn func(e *Writer) error) error {
	e := writers.Get().(*Writer)
	e.b = e.b[:0]
	defer func() {
		if cap(e.b) <= 64<<10 { // keep no outsized buffer
			writers.Put(e)
		}
	}()
	return fn(e)
}

// AppendEnvelope appends the envelope of t (the body of GET /tasks/{id},
// compact or not) with its final newline: the bytes encoding/json writes
// for ReflectEnvelope(t, compact). It reports false when encoding/json
// would have failed (an invalid routingReason, a confidence that is not a
// number), leaving the Writer's bytes in no particular state.
func (e *Writer) AppendEnvelope(t *lifecycletype.Task, compact bool) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			// A pooled Writer must not keep the compact form's escaping.
			e.escapeHTML = false
			if _, isErr := v.(writerError); !isErr {
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

// AppendList appends a page of tasks, with the cursor of the next page
// ("" on the last), as the body of GET /tasks with its final newline: the
// bytes encoding/json writes for ReflectList(tasks, next). It reports
// false when encoding/json would have failed, leaving the Writer's bytes
// in no particular state.
func (e *Writer) AppendList(tasks []lifecycletype.Task, next string) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if _, isErr := v.(writerError); !isErr {
				panic(v)
			}
			ok = false
		}
	}()
	e.b = append(e.b, `{"data":`...)
	if tasks == nil {
		e.null()
	} else {
		e.b = append(e.b, '[')
		for i := range tasks {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.task(&tasks[i], false)
		}
		e.b = append(e.b, ']')
	}
	e.b = append(e.b, `,"nextCursor":`...)
	if next == "" {
		e.null()
	} else {
		e.str(next)
	}
	e.b = append(e.b, '}', '\n')
	return true
}
