package lifecycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// taskCorpus returns tasks covering what a Task's encoding meets: every
// status, with and without each optional member, unicode, HTML
// characters, control characters, invalid UTF-8, long text, odd numbers.
func taskCorpus() []Task {
	texts := []string{
		"",
		"Fix the login redirect",
		"<script>alert('x') && \"quoted\"</script> a > b",
		"naïve café — 日本語 🚀 \u2028 line sep \u2029 para sep",
		"control \x00\x01\x1f \b\f\n\r\t tab \\ backslash \x7f del",
		"invalid \xff\xfe utf-8 \xc3 truncated",
		strings.Repeat("long text with <html> & ünïcödé ", 700),
	}
	statuses := []Status{StatusTodo, StatusInProgress, StatusInReview, StatusBlocked, StatusDone, StatusCancelled}
	at := NewTimestamp(time.Date(2026, 11, 21, 10, 4, 5, 123456789, time.UTC))
	var tasks []Task
	for i, st := range statuses {
		for j, text := range texts {
			t := Task{
				ID:                 fmt.Sprintf("tsk_%02d%02d", i, j),
				Identifier:         "ENG-" + text,
				Title:              text,
				Description:        text + text,
				Status:             st,
				Priority:           PriorityHigh,
				UpdatedAt:          at,
				AvailableActions:   []Action{ActionStart, ActionSubmit},
				AcceptanceCriteria: []string{text, "second <b>", ""},
				Links:              TaskLinks{Issue: "https://issues.example.com/x?a=1&b=<2>"},
				Context:            TaskContext{Goal: text},
				Labels:             []string{"frontend"},
				Version:            int64(i + j),
			}
			if (i+j)%2 == 0 {
				name := "Agent " + text
				src := AssignmentClassifier
				conf := []float64{0, 1, 0.5, 0.1234567890123, 1e-7, 3e-10, 1e21, 123456789, math.Copysign(0, -1)}[(i+j)%9]
				num := 4200 + i
				t.Assignee = &Agent{ID: "agent-" + text, Name: name}
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
			} else {
				t.TriageQueueID = ptr("triage-" + text)
				if j%3 == 0 {
					t.AvailableActions = []Action{}
					t.AcceptanceCriteria = []string{}
				}
				if j%3 == 1 {
					t.AvailableActions = nil
					t.AcceptanceCriteria = nil
					t.RoutingReason = json.RawMessage("null")
				}
			}
			if st == StatusBlocked {
				t.Blocker = &Blocker{Kind: BlockerKindAwaitingUser, SourceRunID: "run " + text, SourceAgentID: "agent",
					Reason: "needs_input", ActionRequired: text, ResumeInstructions: "<resume> & go", CreatedAt: at}
			}
			tasks = append(tasks, t)
		}
	}
	return tasks
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestTaskEncoderMatchesJSON checks that the hand-written encoder of
// writeTask writes the bytes of the encoding/json path, in both token
// budgets, on a corpus of tasks.
func TestTaskEncoderMatchesJSON(t *testing.T) {
	for _, task := range taskCorpus() {
		for _, compact := range []bool{false, true} {
			want, err := encodeTaskJSON(&task, compact)
			if err != nil {
				t.Fatalf("%s: encoding/json: %v", task.ID, err)
			}
			e := &jsonWriter{}
			ok := e.taskEnvelope(&task, compact)
			got := e.b
			if !ok {
				t.Fatalf("%s compact=%v: the hand-written encoder failed", task.ID, compact)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s compact=%v:\n got %s\nwant %s", task.ID, compact, got, want)
			}
			w := httptest.NewRecorder()
			if err := writeTask(w, 201, &task, compact); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Body.Bytes(), want) || w.Code != 201 || w.Header().Get("Content-Length") != fmt.Sprint(len(want)) {
				t.Fatalf("%s compact=%v: writeTask wrote %d %q %s", task.ID, compact, w.Code, w.Header(), w.Body.Bytes())
			}
		}
	}
}

// TestTaskEncoderFallsBack checks that a task encoding/json refuses (an
// invalid routingReason, a confidence that is not a number) is written as
// the encoding/json path writes it.
func TestTaskEncoderFallsBack(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, task := range []Task{
		{ID: "tsk_a", RoutingReason: json.RawMessage(`{"broken":`)},
		{ID: "tsk_b", RoutingConfidence: &nan},
		{ID: "tsk_c", RoutingConfidence: &inf},
	} {
		for _, compact := range []bool{false, true} {
			if (&jsonWriter{}).taskEnvelope(&task, compact) {
				t.Errorf("%s: the hand-written encoder accepted what encoding/json refuses", task.ID)
			}
			want, wantErr := encodeTaskJSON(&task, compact)
			w := httptest.NewRecorder()
			err := writeTask(w, 200, &task, compact)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s compact=%v: writeTask error %v, encoding/json %v", task.ID, compact, err, wantErr)
			}
			if err == nil && !bytes.Equal(w.Body.Bytes(), want) {
				t.Fatalf("%s compact=%v: got %s want %s", task.ID, compact, w.Body.Bytes(), want)
			}
		}
	}
}

// TestTaskEncoderAllocations: the hand-written encoder allocates nothing
// into a buffer large enough.
func TestTaskEncoderAllocations(t *testing.T) {
	task := taskCorpus()[1]
	task.RoutingReason = nil
	e := &jsonWriter{b: make([]byte, 0, 64<<10)}
	if n := testing.AllocsPerRun(100, func() { e.b = e.b[:0]; e.taskEnvelope(&task, false) }); n != 0 {
		t.Errorf("%v allocations per encoding, want 0", n)
	}
}

// TestTaskListEncoderMatchesJSON checks the list's hand-written encoder
// against encoding/json: the whole corpus as one page, pages of one task,
// an empty page, with and without a cursor.
func TestTaskListEncoderMatchesJSON(t *testing.T) {
	corpus := taskCorpus()
	lists := []TaskList{{Tasks: corpus, NextCursor: encodeCursor(42)}, {Tasks: []Task{}}, {Tasks: nil}}
	for i := range corpus {
		lists = append(lists, TaskList{Tasks: corpus[i : i+1]})
	}
	for i, list := range lists {
		want := encodeTaskListJSON(list)
		e := &jsonWriter{}
		if !e.taskList(list) {
			t.Fatalf("list %d: the hand-written encoder failed", i)
		}
		if !bytes.Equal(e.b, want) {
			t.Fatalf("list %d:\n got %s\nwant %s", i, e.b, want)
		}
		w := httptest.NewRecorder()
		writeTaskList(w, list)
		if !bytes.Equal(w.Body.Bytes(), want) || w.Code != 200 {
			t.Fatalf("list %d: writeTaskList wrote %d %s", i, w.Code, w.Body.Bytes())
		}
	}
	bad := TaskList{Tasks: []Task{{ID: "tsk_a", RoutingReason: json.RawMessage(`{`)}}}
	w := httptest.NewRecorder()
	writeTaskList(w, bad)
	if want := encodeTaskListJSON(bad); !bytes.Equal(w.Body.Bytes(), want) {
		t.Fatalf("invalid task: got %s want %s", w.Body.Bytes(), want)
	}
}
