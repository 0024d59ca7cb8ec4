package taskjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// taskCorpus returns tasks covering what a Task's encoding meets: every
// status, with and without each optional member, unicode, HTML
// characters, control characters, invalid UTF-8, long text, odd numbers.
func taskCorpus() []lifecycletype.Task {
	texts := []string{
		"",
		"Fix the login redirect",
		"<script>alert('x') && \"quoted\"</script> a > b",
		"naïve café — 日本語 🚀 \u2028 line sep \u2029 para sep",
		"control \x00\x01\x1f \b\f\n\r\t tab \\ backslash \x7f del",
		"invalid \xff\xfe utf-8 \xc3 truncated",
		strings.Repeat("long text with <html> & ünïcödé ", 700),
	}
	statuses := []lifecycletype.Status{lifecycletype.StatusTodo, lifecycletype.StatusInProgress, lifecycletype.StatusInReview, lifecycletype.StatusBlocked, lifecycletype.StatusDone, lifecycletype.StatusCancelled}
	at := lifecycletype.NewTimestamp(time.Date(2026, 11, 21, 10, 4, 5, 123456789, time.UTC))
	var tasks []lifecycletype.Task
	for i, st := range statuses {
		for j, text := range texts {
			t := lifecycletype.Task{
				ID:                 fmt.Sprintf("tsk_%02d%02d", i, j),
				Identifier:         "ENG-" + text,
				Title:              text,
				Description:        text + text,
				Status:             st,
				Priority:           lifecycletype.PriorityHigh,
				UpdatedAt:          at,
				AvailableActions:   []lifecycletype.Action{lifecycletype.ActionStart, lifecycletype.ActionSubmit},
				AcceptanceCriteria: []string{text, "second <b>", ""},
				Links:              lifecycletype.TaskLinks{Issue: "https://issues.example.com/x?a=1&b=<2>"},
				Context:            lifecycletype.TaskContext{Goal: text},
				Labels:             []string{"frontend"},
				Version:            int64(i + j),
			}
			if (i+j)%2 == 0 {
				name := "Agent " + text
				src := lifecycletype.AssignmentClassifier
				conf := []float64{0, 1, 0.5, 0.1234567890123, 1e-7, 3e-10, 1e21, 123456789, math.Copysign(0, -1)}[(i+j)%9]
				num := 4200 + i
				t.Assignee = &lifecycletype.Agent{ID: "agent-" + text, Name: name}
				t.AssigneeAgentID = &t.Assignee.ID
				t.AssignmentSource = &src
				t.RoutingDecisionID = ptr("rtd_" + text)
				t.RoutingReason = json.RawMessage(`{ "rule" : "frontend <&>" ,  "labels": [ "a",  "b\u2028" ] , "text": ` + string(mustJSON(text)) + ` }`)
				t.RoutingConfidence = &conf
				t.SubmissionID = ptr("sub_" + text)
				t.PRURL = ptr("https://github.com/o/r/pull/1")
				t.PRNumber = &num
				t.Branch, t.BaseBranch, t.HeadSHA = ptr("feat/"+text), ptr("main"), ptr("0123456789abcdef")
				t.Links.ParentIssue = ptr("https://issues.example.com/" + text)
				t.Context.Project = ptr("web " + text)
				t.DependsOn = []string{"tsk_" + text, "tsk_b"}
				t.WaitingOn = []string{"tsk_b"}
			} else {
				t.TriageQueueID = ptr("triage-" + text)
				if j%3 == 0 {
					t.AvailableActions = []lifecycletype.Action{}
					t.AcceptanceCriteria = []string{}
					t.DependsOn, t.WaitingOn = []string{}, []string{}
				}
				if j%3 == 1 {
					t.AvailableActions = nil
					t.AcceptanceCriteria = nil
					t.RoutingReason = json.RawMessage("null")
				}
			}
			if st == lifecycletype.StatusBlocked {
				t.Blocker = &lifecycletype.Blocker{Kind: "awaiting_user", SourceRunID: "run " + text, SourceAgentID: "agent",
					Reason: "needs_input", ActionRequired: text, ResumeInstructions: "<resume> & go", CreatedAt: at}
			}
			tasks = append(tasks, t)
		}
	}
	return tasks
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// encodeLine is the reference encoding: encoding/json's Encoder without
// HTML escaping, one value a line, as the API writes its answers.
func encodeLine(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return buf.Bytes()
}

// TestWriterMatchesJSON checks that the Writer writes the bytes
// encoding/json writes for ReflectEnvelope, in both token budgets, on a
// corpus of tasks.
func TestWriterMatchesJSON(t *testing.T) {
	for _, task := range taskCorpus() {
		for _, compact := range []bool{false, true} {
			env, err := ReflectEnvelope(&task, compact)
			if err != nil {
				t.Fatalf("%s: encoding/json: %v", task.ID, err)
			}
			want := encodeLine(t, env)
			e := &Writer{}
			ok := e.AppendEnvelope(&task, compact)
			got := e.Bytes()
			if !ok {
				t.Fatalf("%s compact=%v: the hand-written encoder failed", task.ID, compact)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s compact=%v:\n got %s\nwant %s", task.ID, compact, got, want)
			}
			err = Use(func(e *Writer) error {
				if !e.AppendEnvelope(&task, compact) || !bytes.Equal(e.Bytes(), want) {
					t.Fatalf("%s compact=%v: a pooled Writer wrote %s", task.ID, compact, e.Bytes())
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestWriterGivesUp checks that the Writer refuses a task encoding/json
// refuses (an invalid routingReason, a confidence that is not a number),
// so that its caller falls back to encoding/json.
func TestWriterGivesUp(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, task := range []lifecycletype.Task{
		{ID: "tsk_a", RoutingReason: json.RawMessage(`{"broken":`)},
		{ID: "tsk_b", RoutingConfidence: &nan},
		{ID: "tsk_c", RoutingConfidence: &inf},
	} {
		for _, compact := range []bool{false, true} {
			if (&Writer{}).AppendEnvelope(&task, compact) {
				t.Errorf("%s: the hand-written encoder accepted what encoding/json refuses", task.ID)
			}
		}
		if (&Writer{}).AppendList([]lifecycletype.Task{task}, "") {
			t.Errorf("%s: the hand-written list encoder accepted what encoding/json refuses", task.ID)
		}
	}
}

// TestWriterEscapesAfterFailure: a Writer whose compact encoding failed
// midway (a confidence that is not a number) escapes no HTML in what it
// writes next, as a pooled Writer reused for a whole task or a list must.
func TestWriterEscapesAfterFailure(t *testing.T) {
	nan := math.NaN()
	task := lifecycletype.Task{ID: "tsk_b", Title: "<b> & </b>"}
	for _, list := range []bool{false, true} {
		e := &Writer{}
		if e.AppendEnvelope(&lifecycletype.Task{ID: "tsk_a", RoutingConfidence: &nan}, true) {
			t.Fatal("the hand-written encoder accepted a confidence that is not a number")
		}
		e.b = e.b[:0]
		var want []byte
		var ok bool
		if list {
			want = encodeLine(t, ReflectList([]lifecycletype.Task{task}, ""))
			ok = e.AppendList([]lifecycletype.Task{task}, "")
		} else {
			want = encodeLine(t, StandardEnvelope(&task))
			ok = e.AppendEnvelope(&task, false)
		}
		if !ok || !bytes.Equal(e.Bytes(), want) {
			t.Fatalf("list=%v: after a failure, got %s want %s", list, e.Bytes(), want)
		}
	}
}

// TestWriterAllocations: the Writer allocates nothing into a buffer large
// enough.
func TestWriterAllocations(t *testing.T) {
	task := taskCorpus()[1]
	task.RoutingReason = nil
	e := &Writer{b: make([]byte, 0, 64<<10)}
	if n := testing.AllocsPerRun(100, func() { e.b = e.b[:0]; e.AppendEnvelope(&task, false) }); n != 0 {
		t.Errorf("%v allocations per encoding, want 0", n)
	}
}

// TestListWriterMatchesJSON checks the list's Writer against
// encoding/json: the whole corpus as one page, pages of one task, an
// empty page, with and without a cursor.
func TestListWriterMatchesJSON(t *testing.T) {
	corpus := taskCorpus()
	type page struct {
		tasks []lifecycletype.Task
		next  string
	}
	pages := []page{{corpus, "cDQy"}, {[]lifecycletype.Task{}, ""}, {nil, ""}, {corpus[:1], "<&> \u2028"}}
	for i := range corpus {
		pages = append(pages, page{tasks: corpus[i : i+1]})
	}
	for i, p := range pages {
		want := encodeLine(t, ReflectList(p.tasks, p.next))
		e := &Writer{}
		if !e.AppendList(p.tasks, p.next) {
			t.Fatalf("list %d: the hand-written encoder failed", i)
		}
		if !bytes.Equal(e.Bytes(), want) {
			t.Fatalf("list %d:\n got %s\nwant %s", i, e.Bytes(), want)
		}
	}
}

// BenchmarkWriter encodes one task of the corpus, whole and compact.
func BenchmarkWriter(b *testing.B) {
	task := taskCorpus()[8]
	for _, compact := range []bool{false, true} {
		b.Run(fmt.Sprint("compact=", compact), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Use(func(e *Writer) error {
					e.AppendEnvelope(&task, compact)
					return nil
				})
			}
		})
	}
}
