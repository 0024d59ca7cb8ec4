package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// What the merge queue serves matches docs/openapi.yaml: the queue while
// a change waits in it, the ship operation's merge_queue wait, the
// refusals of pause, and every event of the tasks that went through it
// (entered, testing, failed, reworked with its checks, landed with its
// commit); the change sent back offers start.
func TestMergeQueueMatchesTheDocument(t *testing.T) {
	t.Parallel()
	requireGit(t)
	s := loadSpec(t)
	e, _ := newQueueEnv(t, func(_ context.Context, c artifact.QueueCandidate) error {
		if treeHas(t, c.GitDir, c.SHA, "ENG-2") {
			return errors.New("ENG-2 breaks the build")
		}
		return nil
	})
	var opIDs, ids []string
	for _, ident := range []string{"ENG-1", "ENG-2"} {
		id, sha := e.shippableTask(ident)
		op := accepted(t, e.ship(id, "doc-ship-"+ident, apitest.ShipBody("merge_only", "staging", sha)))
		opIDs, ids = append(opIDs, op.OperationID), append(ids, id)
	}

	// While the changes wait, the operations say so, and the queue lists
	// them (every answer is validated by the env's mount).
	testenv.WaitFor(t, 10*time.Second, "the ship operations to wait in the merge queue", func() bool {
		for _, id := range opIDs {
			if op := e.shipOperation(id); op.Wait == nil || op.Wait.Reason != lifecycle.WaitMergeQueue {
				return false
			}
		}
		return true
	})
	qs := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues", Key: e.Admin}, http.StatusOK)["data"].([]any)
	if len(qs) != 1 {
		t.Fatalf("queues = %v, want one", qs)
	}
	qid := qs[0].(map[string]any)["id"].(string)
	q := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues/" + qid, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)
	if entries := q["entries"].([]any); len(entries) != 2 || entries[0].(map[string]any)["taskId"] != ids[0] {
		t.Errorf("the queue's entries = %v, want ENG-1 then ENG-2", entries)
	}
	long := map[string]any{"reason": strings.Repeat("x", 1001)}
	if rec := e.Do(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/pause", Key: e.Admin, Body: long}); rec.Code != http.StatusBadRequest {
		t.Errorf("pause with a reason of 1001 bytes = %d %s, want 400", rec.Code, rec.Body)
	}
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/mq_none/pause", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/mq_none/resume", Key: e.Admin}, http.StatusNotFound)

	ops := e.driveQueue(opIDs...)
	if ops[0].Status != lifecycle.ShipSucceeded || ops[1].Status != lifecycle.ShipFailed || ops[1].Error == nil || ops[1].Error.Code != "checks_failed" {
		t.Fatalf("operations = %+v, want ENG-1 landed and ENG-2 failed checks_failed", ops)
	}

	schema := s.doc.Components.Schemas["Event"].Value
	changes := map[string][]string{}
	for i, id := range ids {
		for _, ev := range e.EventsOf(id) {
			if err := schema.VisitJSON(ev); err != nil {
				t.Errorf("event %v does not match the Event schema: %v", ev, err)
			}
			data := ev["data"].(map[string]any)
			switch ev["type"] {
			case "task.merge_queue":
				changes[id] = append(changes[id], data["change"].(string))
				queue := data["queue"].(map[string]any)
				switch data["change"] {
				case "landed":
					if queue["landedSha"] == nil || queue["position"] != float64(0) {
						t.Errorf("landed event of task %d = %v, want landedSha and position 0", i+1, queue)
					}
				case "reworked":
					rw, _ := queue["rework"].(map[string]any)
					if rw == nil || rw["reason"] != "checks_failed" {
						t.Errorf("reworked event of task %d = %v, want rework checks_failed", i+1, queue)
					}
				}
			}
		}
	}
	if c := changes[ids[0]]; len(c) < 2 || c[0] != "entered" || c[len(c)-1] != "landed" {
		t.Errorf("task.merge_queue changes of ENG-1 = %v, want entered first and landed last", c)
	}
	if c := changes[ids[1]]; len(c) < 2 || c[0] != "entered" || c[len(c)-1] != "reworked" {
		t.Errorf("task.merge_queue changes of ENG-2 = %v, want entered first and reworked last", c)
	}
	if task := e.Task(ids[1]); !strings.Contains(fmt.Sprint(task["availableActions"]), "start") {
		t.Errorf("ENG-2 sent back offers %v, want start", task["availableActions"])
	}
}

// The queue's events reach webhooks as they reach the stream: a
// subscription to task.merge_queue receives each change's, signed (a
// pause by an operator with its reason); receiving them all is the test,
// as rc.next fails when none comes.
func TestMergeQueueEventsReachWebhooks(t *testing.T) {
	t.Parallel()
	requireGit(t)
	rc := newReceiver(t)
	e, _ := newQueueEnv(t, nil, rc.trust)
	e.subscribe(map[string]any{"url": rc.url("/hooks"), "eventTypes": []string{"task.merge_queue"}, "secret": hookSecret})
	id, sha := e.shippableTask("ENG-1")
	op := accepted(t, e.ship(id, "hook-ship", apitest.ShipBody("merge_only", "staging", sha)))
	testenv.WaitFor(t, 10*time.Second, "the ship to wait in the merge queue", func() bool {
		o := e.shipOperation(op.OperationID)
		return o.Wait != nil && o.Wait.Reason == lifecycle.WaitMergeQueue
	})
	qid := e.Call(apitest.Request{Method: "GET", Path: "/merge-queues", Key: e.Admin}, http.StatusOK)["data"].([]any)[0].(map[string]any)["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/pause", Key: e.Admin, Body: map[string]any{"reason": "release freeze"}}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/merge-queues/" + qid + "/resume", Key: e.Admin}, http.StatusOK)
	if ops := e.driveQueue(op.OperationID); ops[0].Status != lifecycle.ShipSucceeded {
		t.Fatalf("operation = %+v, want landed", ops[0])
	}
	// Deliveries may arrive in another order than the events'.
	want := []string{"entered", "paused", "resumed", "landed"}
	var changes []string
	for slices.ContainsFunc(want, func(c string) bool { return !slices.Contains(changes, c) }) {
		d := rc.next()
		var ev struct {
			Type string `json:"type"`
			Data struct {
				TaskID string `json:"taskId"`
				Change string `json:"change"`
				Queue  struct {
					Paused      bool   `json:"paused"`
					PauseReason string `json:"pauseReason"`
					LandedSHA   string `json:"landedSha"`
				} `json:"queue"`
			} `json:"data"`
		}
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatalf("delivery %s: %v", d.body, err)
		}
		if ev.Type != "task.merge_queue" || ev.Data.TaskID != id || d.header.Get("X-Service-Event-Type") != "task.merge_queue" {
			t.Fatalf("delivered %s of %s (header %q), want task.merge_queue of %s", ev.Type, ev.Data.TaskID, d.header.Get("X-Service-Event-Type"), id)
		}
		if got, want := d.header.Get("X-Service-Signature"), hexHMAC(hookSecret, d.body); got != want {
			t.Errorf("signature %q, want %q", got, want)
		}
		switch ev.Data.Change {
		case "paused":
			if !ev.Data.Queue.Paused || !strings.Contains(ev.Data.Queue.PauseReason, "release freeze") {
				t.Errorf("paused event's queue = %+v, want paused with the reason", ev.Data.Queue)
			}
		case "landed":
			if ev.Data.Queue.LandedSHA == "" {
				t.Errorf("landed event without landedSha")
			}
		}
		changes = append(changes, ev.Data.Change)
	}
}
