package lifecycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/taskjson"
)

// writeCorpus returns a few tasks for the writers of task.go: HTML and
// unicode text, every optional member set or not, empty and missing
// lists. Package taskjson checks its encoder on a larger corpus.
func writeCorpus() []Task {
	at := NewTimestamp(time.Date(2026, 11, 21, 10, 4, 5, 123456789, time.UTC))
	conf := 0.75
	num := 4200
	src := AssignmentClassifier
	full := Task{
		ID: "tsk_full", Identifier: "ENG-1", Title: "<script>alert('x') && \"quoted\"</script>",
		Description: "naïve café — 日本語 🚀 \u2028", Status: StatusBlocked, Priority: PriorityHigh, UpdatedAt: at,
		AvailableActions: []Action{ActionStart, ActionSubmit}, AcceptanceCriteria: []string{"a <b>", ""},
		Links:    TaskLinks{Issue: "https://issues.example.com/x?a=1&b=<2>", ParentIssue: ptr("https://issues.example.com/0")},
		Context:  TaskContext{Goal: "goal & more", Project: ptr("web")},
		Assignee: &Agent{ID: "agent-web", Name: "Web"}, AssigneeAgentID: ptr("agent-web"), AssignmentSource: &src,
		RoutingDecisionID: ptr("rtd_1"), RoutingReason: json.RawMessage(`{ "rule" : "frontend <&>" }`), RoutingConfidence: &conf,
		SubmissionID: ptr("sub_1"), PRURL: ptr("https://github.com/o/r/pull/1"), PRNumber: &num,
		Branch: ptr("feat/x"), BaseBranch: ptr("main"), HeadSHA: ptr("0123456789abcdef"),
		Blocker: &Blocker{Kind: BlockerKindAwaitingUser, SourceRunID: "run", SourceAgentID: "agent",
			Reason: "needs_input", ActionRequired: "<act>", ResumeInstructions: "go & resume", CreatedAt: at},
	}
	return []Task{
		full,
		{ID: "tsk_empty", Status: StatusTodo, UpdatedAt: at, AvailableActions: []Action{}, AcceptanceCriteria: []string{}},
		{ID: "tsk_nil", Status: StatusDone, UpdatedAt: at, RoutingReason: json.RawMessage("null"), TriageQueueID: ptr("triage")},
	}
}

// TestTaskEncoderMatchesJSON checks that writeTask writes, with its status
// and Content-Length, the bytes of the hand-written encoder, which are
// those of the encoding/json path, in both token budgets.
func TestTaskEncoderMatchesJSON(t *testing.T) {
	for _, task := range writeCorpus() {
		for _, compact := range []bool{false, true} {
			want, err := encodeTaskJSON(&task, compact)
			if err != nil {
				t.Fatalf("%s: encoding/json: %v", task.ID, err)
			}
			_ = taskjson.Use(func(e *taskjson.Writer) error {
				if !e.AppendEnvelope(&task, compact) {
					t.Fatalf("%s compact=%v: the hand-written encoder failed", task.ID, compact)
				}
				if got := e.Bytes(); !bytes.Equal(got, want) {
					t.Fatalf("%s compact=%v:\n got %s\nwant %s", task.ID, compact, got, want)
				}
				return nil
			})
			w := httptest.NewRecorder()
			if err := writeTask(w, 201, &task, compact); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Body.Bytes(), want) || w.Code != 201 || w.Header().Get("Content-Length") != fmt.Sprint(len(want)) {
				t.Fatalf("%s compact=%v: writeTask wrote %d %q %s", task.ID, compact, w.Code, w.Header(), w.Body.Bytes())
			}
			if got, err := encodeTask(&task, compact); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s compact=%v: encodeTask = %s, %v", task.ID, compact, got, err)
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
			if (&taskjson.Writer{}).AppendEnvelope(&task, compact) {
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

// TestTaskListEncoderMatchesJSON checks writeTaskList against
// encoding/json: the corpus as one page, pages of one task, an empty
// page, with and without a cursor, and a page with a task that does not
// encode.
func TestTaskListEncoderMatchesJSON(t *testing.T) {
	corpus := writeCorpus()
	lists := []TaskList{{Tasks: corpus, NextCursor: encodeCursor(42)}, {Tasks: []Task{}}, {Tasks: nil}}
	for i := range corpus {
		lists = append(lists, TaskList{Tasks: corpus[i : i+1]})
	}
	for i, list := range lists {
		want := encodeTaskListJSON(list)
		e := &taskjson.Writer{}
		if !e.AppendList(list.Tasks, list.NextCursor) {
			t.Fatalf("list %d: the hand-written encoder failed", i)
		}
		if !bytes.Equal(e.Bytes(), want) {
			t.Fatalf("list %d:\n got %s\nwant %s", i, e.Bytes(), want)
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
