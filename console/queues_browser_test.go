//go:build unix

package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// JavaScript expressions about the merge queues view.

// queueEntries lists the entries the page shows, each as
// identifier@position:state, in the page's order.
const queueEntries = `[...document.querySelectorAll("#queues tr.entry")].map((r) =>
  r.querySelector(".task-link").textContent + "@" + r.cells[0].textContent + ":" + r.dataset.state).join(",")`

// queueDigest is what the page shows of the entries and candidates of
// its queues: see digestOf.
const queueDigest = queueEntries + ` + " | " + [...document.querySelectorAll("#queues tr.candidate")].map((r) =>
  "#" + r.dataset.candidateId + ":" + r.dataset.kind + ":" + r.dataset.state + ":" +
  [...r.querySelectorAll("li[data-check]")].map((li) => li.dataset.check + "=" + li.querySelector(".badge").textContent).join("+")).join(",")`

// digestOf is queueDigest of q, as the page should show it.
func digestOf(q lifecycle.MergeQueue) string {
	var entries, cands []string
	for _, e := range q.Entries {
		entries = append(entries, fmt.Sprintf("%s@%d:%s", e.TaskIdentifier, e.Position, e.State))
	}
	for _, c := range q.Candidates {
		var checks []string
		for _, ch := range c.Checks {
			checks = append(checks, fmt.Sprintf("%s=%s", ch.Name, ch.Status))
		}
		cands = append(cands, fmt.Sprintf("#%d:%s:%s:%s", c.ID, c.Kind, c.State, strings.Join(checks, "+")))
	}
	return strings.Join(entries, ",") + " | " + strings.Join(cands, ",")
}

// queuePaused is true when the page shows the one queue paused (want
// true) or running (want false).
func queuePaused(want bool) string {
	return fmt.Sprintf(`document.querySelector('#queues article.queue[data-paused="%t"]') !== null`, want)
}

// TestConsoleBrowserMergeQueue: an operator watches two ships go through
// the merge queue. The queues view lists them as they enter (from the
// event stream, without a reload), with their candidate's check running
// while it is blocked; the operator opens a task from the queue, is
// refused a pause with too long a reason, pauses with a reason (a reader
// signed in elsewhere sees it live, without the buttons), resumes, and
// both see the changes land.
func TestConsoleBrowserMergeQueue(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	bc := newBlockingCheck()
	e := newQueueEnv(t, bc.check)
	idA, shaA := e.shippableTask("ENG-1")
	idB, shaB := e.shippableTask("ENG-2")
	operator := e.KeyAs(lifecycle.Actor{ID: "ops-alice", Role: lifecycle.RoleUser}, apitest.AllScopes()...)
	reader := e.KeyAs(lifecycle.Actor{ID: "viewer", Role: lifecycle.RoleUser}, lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead)
	site := serveConsole(t, e.Svc, e.Served)

	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, operator)
	p.click("#nav-queues")
	p.waitFor(`!document.getElementById("queues-view").hidden && document.getElementById("queues-status").textContent.startsWith("0 queues")`, 5*time.Second)
	r := br.newPage(br.newContext())
	r.navigate(site.url())
	signInByTyping(r, reader)
	r.click("#nav-queues")
	r.waitFor(`document.getElementById("queues-status").textContent.startsWith("0 queues")`, 5*time.Second)

	// Both ships enter the queue; their candidates' checks block.
	opA := e.ship(idA, "browser-queue-1", apitest.ShipBody("merge_only", "staging", shaA))
	opB := e.ship(idB, "browser-queue-2", apitest.ShipBody("merge_only", "staging", shaB))
	e.driveUntil("both changes to wait in the queue with a check running", func() bool {
		qs := e.queues()
		return len(qs) == 1 && len(qs[0].Entries) == 2 && e.candidateChecking()
	})
	// The ships run at once: either may have entered first.
	var order []string
	for _, en := range e.queues()[0].Entries {
		order = append(order, fmt.Sprintf("%s@%d", en.TaskIdentifier, en.Position))
	}
	live := fmt.Sprintf(`(%s).replace(/:[a-z]+/g, "") === %q`, queueEntries, strings.Join(order, ","))
	for _, pg := range []*cdpPage{p, r} {
		if !pg.await(live, 10*time.Second) {
			t.Fatalf("the queues view lists %q, want %q", value[string](pg, queueEntries), strings.Join(order, ","))
		}
	}
	// The checks' progress comes with no event: Refresh reads it.
	var want string
	matched := false
	for range 10 {
		want = digestOf(e.queues()[0])
		p.click("#queues-refresh")
		if p.await(fmt.Sprintf("(%s) === %q", queueDigest, want), 2*time.Second) {
			matched = true
			break
		}
	}
	if !matched {
		t.Fatalf("the queues view shows %q, want %q", value[string](p, queueDigest), want)
	}
	if !strings.Contains(want, "queue-check=running") {
		t.Errorf("the queue read %q, want a check running", want)
	}
	if got := value[string](p, `document.querySelector("#queues article.queue .queue-title").textContent`); !strings.HasSuffix(got, " into main") {
		t.Errorf("the queue's title reads %q", got)
	}
	// The board shows where each waits.
	for _, en := range e.queues()[0].Entries {
		p.waitFor(fmt.Sprintf(`document.querySelector('.card[data-task-id=%q] .badge[data-queue-id]')?.textContent.startsWith("queue #%d")`, en.TaskID, en.Position), 5*time.Second)
	}

	// A task in the queue opens its timeline, with its queue events.
	p.click(fmt.Sprintf(`#queues tr.entry[data-task-id=%q] .task-link`, idA))
	p.waitFor(`!document.getElementById("timeline").hidden && document.getElementById("timeline-title").textContent.startsWith("ENG-1") &&
		document.querySelector('#timeline-body .event[data-type="task.merge_queue"]') !== null`, 5*time.Second)
	p.click("#timeline-close")
	p.waitFor(`document.getElementById("timeline").hidden`, 5*time.Second)

	// Only a session with ship:write has the buttons.
	if got := value[bool](p, `!document.querySelector("#queues article.queue > .controls").hidden`); !got {
		t.Error("the operator has no pause button")
	}
	if got := value[bool](r, `document.querySelector("#queues article.queue > .controls").hidden`); !got {
		t.Error("a session without ship:write is shown the pause and resume buttons")
	}

	// A refusal is shown: a reason of 2,000 bytes.
	p.typeInto("#queues article.queue .why-input", strings.Repeat("é", 1000))
	p.click("#queues article.queue button.pause")
	p.waitFor(`document.querySelector("#queues article.queue .result").textContent.startsWith("400 validation_error")`, 5*time.Second)
	if e.queues()[0].Paused {
		t.Fatal("a refused pause paused the queue")
	}

	// Paused with a reason, as the operator; the reader sees it live.
	p.must("Runtime.evaluate", map[string]any{"expression": `document.querySelector("#queues article.queue .why-input").value = ""`}, nil)
	p.typeInto("#queues article.queue .why-input", "release freeze")
	p.click("#queues article.queue button.pause")
	const reason = "Paused: paused by ops-alice: release freeze"
	shown := queuePaused(true) + fmt.Sprintf(` && document.querySelector("#queues .pause-reason").textContent === %q`, reason)
	p.waitFor(shown+` && document.querySelector("#queues article.queue .result").textContent.startsWith("Paused")`+
		` && document.querySelector("#queues button.pause").closest("[hidden]") !== null && !document.querySelector("#queues button.resume").hidden`, 5*time.Second)
	r.waitFor(shown, 5*time.Second)
	if q := e.queues()[0]; !q.Paused || q.PauseReason == nil || *q.PauseReason != "paused by ops-alice: release freeze" {
		t.Errorf("the queue after the pause: %+v", q)
	}
	p.waitFor(fmt.Sprintf(`document.querySelector('.card[data-task-id=%q] .badge[data-queue-id]')?.textContent.includes("(paused)")`, idB), 5*time.Second)

	// The checks pass, but nothing lands while the queue is paused.
	close(bc.release)
	for range 5 {
		e.Clock.Advance(time.Second)
	}
	for _, op := range []string{opA, opB} {
		if st := e.shipStatus(op); st == "succeeded" {
			t.Fatalf("operation %s landed while the queue was paused", op)
		}
	}

	// Resumed: both land, and both pages show it.
	p.click("#queues article.queue button.resume")
	p.waitFor(queuePaused(false)+` && document.querySelector("#queues article.queue .result").textContent.startsWith("Resumed")`, 5*time.Second)
	r.waitFor(queuePaused(false), 5*time.Second)
	e.driveUntil("both changes to land", func() bool { return e.shipStatus(opA) == "succeeded" && e.shipStatus(opB) == "succeeded" })
	landed := `document.querySelectorAll("#queues tr.entry").length === 0 && document.querySelector('#queues [data-stat="landed"] dd')?.textContent === "2"`
	p.waitFor(landed, 10*time.Second)
	r.waitFor(landed, 10*time.Second)
	p.waitFor(cardIn(idA, "done")+" && "+cardIn(idB, "done")+` && document.querySelectorAll("#board .badge[data-queue-id]").length === 0`, 10*time.Second)
	if got := e.Call(apitest.Request{Method: "GET", Path: "/tasks/" + idA, Key: e.Admin}, http.StatusOK)["data"].(map[string]any)["status"]; got != "done" {
		t.Errorf("ENG-1 is %v, want done", got)
	}

	p.checkProblems(func(n networkError) bool {
		return unauthorizedAt(site)(n) || strings.HasSuffix(n.URL, "/pause") && strings.Contains(n.Text, "status of 400")
	})
	r.checkProblems(unauthorizedAt(site))
}
