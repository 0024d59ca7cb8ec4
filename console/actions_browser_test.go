//go:build unix

package console_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// JavaScript expressions about the actions panel of the open task.

// actionsShown lists the action buttons shown in the open task's panel,
// by class, in the page's order.
const actionsShown = `document.getElementById("timeline-actions").hidden ? "" :
  [...document.querySelectorAll("#timeline-actions .controls > button, #timeline-actions .controls > span > button")]
    .filter((b) => b.closest("[hidden]") === null).map((b) => b.className.split(" ")[0]).join(",")`

// actionResult is the text of the actions panel's result line.
const actionResult = `document.querySelector("#timeline-actions .result").textContent`

// openTask opens the timeline of the task whose card is on the board,
// closing the one open, and waits until its timeline is read.
func openTask(p *cdpPage, taskID, ident string) {
	p.t.Helper()
	if value[bool](p, `!document.getElementById("timeline").hidden`) { // the drawer covers part of the board
		p.click("#timeline-close")
		p.waitFor(`document.getElementById("timeline").hidden`, 5*time.Second)
	}
	p.click(fmt.Sprintf(`.card[data-task-id=%q] .card-title`, taskID))
	p.waitFor(fmt.Sprintf(`!document.getElementById("timeline").hidden && document.getElementById("timeline-title").textContent.startsWith(%q) &&
		document.querySelector("#timeline-body .events") !== null`, ident+":"), 5*time.Second)
}

// TestConsoleBrowserTaskActions: an operator acts on tasks from the
// console, through the API the console serves, with the session's CSRF
// token and a new Idempotency-Key per click: resolves a blocker with a
// resolution, starts a rework, retries a failed ship (at the task's head,
// with the failed operation's mode and environment) and cancels a task
// after confirming. Each task changes, and its card moves on the board
// when its event arrives. A cancel that another operator made first is
// refused with a 409 the page shows. A session without tasks:admin and
// ship:write sees no cancel and no retry; a change sent without the CSRF
// token is refused.
func TestConsoleBrowserTaskActions(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	b := newBoardEnv(t)
	agent := b.as("web-agent-1", lifecycle.RoleAgent)
	dana := b.as("dana", lifecycle.RoleReviewer)
	call := func(key, method, path string, body any, idem string, want int) map[string]any {
		t.Helper()
		var h http.Header
		if idem != "" {
			h = http.Header{"Idempotency-Key": {idem}}
		}
		return b.Call(apitest.Request{Method: method, Path: path, Key: key, Body: body, Header: h}, want)
	}
	create := func(ident string) string {
		body := apitest.TaskBody(ident)
		body["assigneeAgentId"] = "web-agent-1"
		return b.CreateTask(body)["id"].(string)
	}
	// submitted is a task in review, its CI passed, with the review
	// outcome given, and its head.
	submitted := func(ident, outcome string) (string, string) {
		id := create(ident)
		call(agent, "POST", "/tasks/"+id+"/start", nil, "", http.StatusOK)
		body := apitest.SubmitBody()
		body["pullRequest"] = map[string]any{"reviewers": []string{"dana"}}
		sha := call(agent, "POST", "/tasks/"+id+"/submit", body, "submit-"+ident, http.StatusAccepted)["data"].(map[string]any)["headSha"].(string)
		call(b.Admin, "POST", "/tasks/"+id+"/checks", map[string]any{"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed"}}}, "", http.StatusOK)
		call(dana, "POST", "/tasks/"+id+"/reviews", map[string]any{"outcome": outcome, "body": "Reviewed."}, "", http.StatusCreated)
		return id, sha
	}

	blocked := create("ACT-1")
	call(agent, "POST", "/tasks/"+blocked+"/start", nil, "", http.StatusOK)
	call(agent, "POST", "/tasks/"+blocked+"/blocker", map[string]any{"reason": "missing_credentials", "actionRequired": "Add the KMS_KEY_ID secret."}, "", http.StatusOK)
	rework, _ := submitted("ACT-2", "changes_requested")
	failing, sha := submitted("ACT-3", "approved")
	b.web.FailNext(memory.OpMerge, errors.New("github: 502"))
	failed := b.ship(failing, "act-ship-1", apitest.ShipBody("merge_and_deploy", "staging", sha))
	if op := b.waitShip(failed)["data"].(map[string]any); op["status"] != "failed" {
		t.Fatalf("the first ship of ACT-3: %v, want failed", op)
	}
	todo := create("ACT-4")
	raced := create("ACT-5")
	all := []string{blocked, rework, failing, todo, raced}

	operator := b.KeyAs(lifecycle.Actor{ID: "ops-alice", Role: lifecycle.RoleUser}, apitest.AllScopes()...)
	writer := b.KeyAs(lifecycle.Actor{ID: "viewer", Role: lifecycle.RoleUser}, lifecycle.ScopeTasksRead, lifecycle.ScopeEventsRead, lifecycle.ScopeTasksWrite)
	site := serveConsole(t, b.Svc, b.Served)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, operator)
	p.waitFor(cardCount+" === 5", testsupport.BrowserTimeout)

	// A session with tasks:write but neither tasks:admin nor ship:write
	// may resolve the blocker, and is offered no cancel and no retry.
	r := br.newPage(br.newContext())
	r.navigate(site.url())
	signInByTyping(r, writer)
	r.waitFor(cardCount+" === 5", testsupport.BrowserTimeout)
	for _, tc := range []struct{ id, ident, want string }{
		{blocked, "ACT-1", "act-resolve"},
		{rework, "ACT-2", "act-start"},
		{failing, "ACT-3", ""},
		{todo, "ACT-4", ""},
	} {
		openTask(r, tc.id, tc.ident)
		if got := value[string](r, actionsShown); got != tc.want {
			t.Errorf("a session without tasks:admin and ship:write is offered %q on %s, want %q", got, tc.ident, tc.want)
		}
	}
	// The operator, with every scope, is offered what each task allows.
	for _, tc := range []struct{ id, ident, want string }{
		{blocked, "ACT-1", "act-resolve,act-cancel"},
		{rework, "ACT-2", "act-start,act-cancel"},
		{failing, "ACT-3", "act-retry-ship,act-cancel"},
		{todo, "ACT-4", "act-cancel"},
	} {
		openTask(p, tc.id, tc.ident)
		if got := value[string](p, actionsShown); got != tc.want {
			t.Errorf("the operator is offered %q on %s, want %q", got, tc.ident, tc.want)
		}
	}

	// A change without the session's CSRF token is refused.
	got := value[string](p, fmt.Sprintf(`fetch("api/tasks/%s/cancel", {method: "POST"}).then((r) => r.json().then((b) => r.status + " " + b.error.code))`, todo))
	if got != "403 csrf_failed" {
		t.Errorf("a cancel without the CSRF token got %s, want 403 csrf_failed", got)
	}
	if st := b.Task(todo)["status"]; st != "todo" {
		t.Fatalf("ACT-4 is %v after a refused cancel", st)
	}

	// Resolve the blocker, with a resolution.
	openTask(p, blocked, "ACT-1")
	p.typeInto("#resolution", "Added the KMS_KEY_ID secret to the repository.")
	p.click("#timeline-actions .act-resolve")
	p.waitFor(actionResult+`.startsWith("Resolved: ACT-1 is in progress again")`, 5*time.Second)
	p.waitFor(cardIn(blocked, "in_progress"), 5*time.Second)
	if task := b.Task(blocked); task["status"] != "in_progress" || task["blocker"] != nil {
		t.Errorf("ACT-1 after the resolve: status %v, blocker %v", task["status"], task["blocker"])
	}
	p.waitFor(`[...document.querySelectorAll("#timeline-body .event-summary")].some((e) => e.textContent.includes("Added the KMS_KEY_ID secret"))`, 5*time.Second)
	r.waitFor(cardIn(blocked, "in_progress"), 5*time.Second) // every board follows

	// Start a rework.
	openTask(p, rework, "ACT-2")
	p.click("#timeline-actions .act-start")
	p.waitFor(actionResult+`.startsWith("Started: ACT-2 is in progress again")`, 5*time.Second)
	p.waitFor(cardIn(rework, "in_progress"), 5*time.Second)
	if st := b.Task(rework)["status"]; st != "in_progress" {
		t.Errorf("ACT-2 is %v after the rework started, want in_progress", st)
	}

	// Retry the failed ship: the task's head, the failed operation's mode
	// and environment.
	openTask(p, failing, "ACT-3")
	for _, d := range screenshotDirs(t) {
		p.screenshot(filepath.Join(d, "console-actions.png"))
	}
	if label := value[string](p, `document.querySelector("#timeline-actions .act-retry-ship").textContent`); label != "Retry ship (merge and deploy to staging)" {
		t.Errorf("the retry button reads %q", label)
	}
	p.click("#timeline-actions .act-retry-ship")
	p.waitFor(actionResult+`.startsWith("Ship accepted: operation ")`, 5*time.Second)
	p.waitFor(cardIn(failing, "done"), 10*time.Second)
	ops, err := b.Svc.ShipOperations(t.Context(), failing)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[1].Status != lifecycle.ShipSucceeded || ops[1].Mode != lifecycle.ShipMergeAndDeploy ||
		ops[1].TargetEnvironment != "staging" || ops[1].ExpectedHeadSHA != sha {
		t.Errorf("ship operations after the retry: %+v", ops)
	}
	if got := value[string](p, actionResult); !strings.Contains(got, ops[len(ops)-1].OperationID) {
		t.Errorf("the page shows %q, want the new operation %s", got, ops[len(ops)-1].OperationID)
	}

	// Cancel asks first: Keep it, or Escape, sends nothing (and Escape
	// leaves the timeline open).
	openTask(p, todo, "ACT-4")
	p.click("#timeline-actions .act-cancel")
	p.waitFor(`!document.querySelector("#timeline-actions .confirm").hidden`, 5*time.Second)
	if q := value[string](p, `document.querySelector("#timeline-actions .confirm-question").textContent`); !strings.HasPrefix(q, "Cancel ACT-4?") {
		t.Errorf("the confirmation asks %q", q)
	}
	p.click("#timeline-actions .act-keep")
	p.waitFor(`document.querySelector("#timeline-actions .confirm").hidden`, 5*time.Second)
	p.click("#timeline-actions .act-cancel")
	p.waitFor(`!document.querySelector("#timeline-actions .confirm").hidden`, 5*time.Second)
	p.must("Input.dispatchKeyEvent", map[string]any{"type": "keyDown", "key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27}, nil)
	p.waitFor(`document.querySelector("#timeline-actions .confirm").hidden && !document.getElementById("timeline").hidden`, 5*time.Second)
	p.click("#timeline-actions .act-cancel")
	p.typeInto("#cancel-reason", "Not needed after the redesign.")
	p.click("#timeline-actions .act-confirm-cancel")
	p.waitFor(actionResult+` === "Cancelled: ACT-4."`, 5*time.Second)
	p.waitFor(cardIn(todo, "cancelled"), 5*time.Second)
	if st := b.Task(todo)["status"]; st != "cancelled" {
		t.Errorf("ACT-4 is %v after the cancel, want cancelled", st)
	}
	p.waitFor(`document.getElementById("timeline-actions").hidden || `+actionsShown+` === ""`, 5*time.Second)

	// Another operator cancels ACT-5 just before this one's cancel
	// arrives: the page shows the 409 and its message, and the board the
	// other's change.
	openTask(p, raced, "ACT-5")
	cancelPath := "/console/api/tasks/" + raced + "/cancel"
	site.setBefore(func(req *http.Request) {
		if req.Method == http.MethodPost && req.URL.Path == cancelPath {
			call(b.Admin, "POST", "/tasks/"+raced+"/cancel", map[string]any{"reason": "Cancelled by the other operator."}, "", http.StatusOK)
		}
	})
	p.click("#timeline-actions .act-cancel")
	p.click("#timeline-actions .act-confirm-cancel")
	p.waitFor(actionResult+`.startsWith("409 conflict (not_cancellable): Task ACT-5 is cancelled and cannot be cancelled")`, 5*time.Second)
	p.waitFor(cardIn(raced, "cancelled"), 5*time.Second)
	site.setBefore(nil)

	// Every change went through the API with the CSRF token and a key of
	// its own.
	keys := map[string]bool{}
	for _, id := range all {
		for _, action := range []string{"cancel", "resolve-blocker", "start", "ship"} {
			for _, req := range site.requests("/console/api/tasks/" + id + "/" + action) {
				if !req.csrf {
					if id == todo && action == "cancel" && req.status == http.StatusForbidden {
						continue // the refused fetch above
					}
					t.Errorf("%s %s came without the CSRF token", req.method, req.path)
				}
				if req.idempotencyKey == "" || keys[req.idempotencyKey] {
					t.Errorf("%s %s came with Idempotency-Key %q, want a new one", req.method, req.path, req.idempotencyKey)
				}
				keys[req.idempotencyKey] = true
			}
		}
	}
	if len(keys) != 5 {
		t.Errorf("%d actions sent, want 5", len(keys))
	}
	checkNoDuplicates(t, p, all)
	p.checkProblems(func(n networkError) bool {
		return unauthorizedAt(site)(n) || strings.HasSuffix(n.URL, "/cancel") && (strings.Contains(n.Text, "status of 409") || strings.Contains(n.Text, "status of 403"))
	})
	r.checkProblems(unauthorizedAt(site))
}

// TestConsoleBrowserHighlights: the board highlights a task whose
// stalled member is set, with since when, and shows what a task whose
// waitingOn is not empty waits for, by identifier, which opens that
// task; the toolbar counts both; a card whose members go back to null
// and [] loses its highlight when its next event arrives. The cards'
// members are set by rewriting the console's answers, so that the page
// is tested against the agreed names whichever Service serves them.
func TestConsoleBrowserHighlights(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	e := newEnv(t)
	stalled := e.CreateTask(apitest.TaskBody("HL-1"))["id"].(string)
	waiting := e.CreateTask(apitest.TaskBody("HL-2"))["id"].(string)
	dep := e.CreateTask(apitest.TaskBody("HL-3"))["id"].(string)
	site := serveConsole(t, e.Svc, e.Served)
	// Stalled an hour ago, by the Service's clock, after an hour without
	// activity.
	since, last := lifecycle.NewTimestamp(apitest.Epoch.Add(-time.Hour)).String(), lifecycle.NewTimestamp(apitest.Epoch.Add(-2*time.Hour)).String()
	highlight := make(chan bool, 1)
	highlight <- true
	site.setRewrite(func(body []byte) []byte {
		on := <-highlight
		highlight <- on
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Errorf("decode the board: %v", err)
			return body
		}
		for _, v := range out["data"].([]any) {
			card := v.(map[string]any)
			if _, ok := card["stalled"]; !ok {
				t.Errorf("card %v has no stalled member", card["identifier"])
			}
			if card["waitingOn"] == nil {
				t.Errorf("card %v has waitingOn %v, want []", card["identifier"], card["waitingOn"])
			}
			switch {
			case !on:
			case card["id"] == stalled:
				card["stalled"] = map[string]any{"since": since, "lastActivityAt": last}
			case card["id"] == waiting:
				card["waitingOn"] = []string{dep}
			}
		}
		raw, err := json.Marshal(out)
		if err != nil {
			t.Errorf("encode the board: %v", err)
			return body
		}
		return raw
	})

	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.waitFor(cardCount+" === 3", testsupport.BrowserTimeout)
	type cardView struct {
		Classes, Stalled, Since, Waiting string
		Links                            []string
	}
	view := func(id string) cardView {
		return value[cardView](p, fmt.Sprintf(`(() => {
  const c = document.querySelector('.card[data-task-id=%q]');
  const note = c.querySelector(".stalled-note"), w = c.querySelector(".waiting-note");
  return {Classes: c.className, Stalled: note ? note.textContent : "", Since: note ? note.querySelector("time").dateTime : "",
    Waiting: w ? w.textContent : "", Links: w ? [...w.querySelectorAll(".task-link")].map((a) => a.dataset.taskId) : []};
})()`, id))
	}
	if v := view(stalled); v.Classes != "card stalled" || !strings.HasPrefix(v.Stalled, "Stalled since ") || !strings.Contains(v.Stalled, "last activity") || v.Since != since || v.Waiting != "" {
		t.Errorf("the stalled card shows %+v", v)
	}
	if v := view(waiting); v.Classes != "card waiting" || v.Waiting != "Waiting on HL-3" || len(v.Links) != 1 || v.Links[0] != dep || v.Stalled != "" {
		t.Errorf("the waiting card shows %+v", v)
	}
	if v := view(dep); v.Classes != "card" || v.Stalled != "" || v.Waiting != "" {
		t.Errorf("a card with neither shows %+v", v)
	}
	if got := value[string](p, `document.getElementById("highlights").textContent`); got != "1 stalled · 1 waiting" {
		t.Errorf("the toolbar reads %q, want 1 stalled · 1 waiting", got)
	}
	for _, d := range screenshotDirs(t) {
		p.screenshot(filepath.Join(d, "console-highlights.png"))
	}
	// The task it waits for opens from the card.
	p.click(fmt.Sprintf(`.card[data-task-id=%q] .waiting-note .task-link`, waiting))
	p.waitFor(`!document.getElementById("timeline").hidden && document.getElementById("timeline-title").textContent.startsWith("HL-3:")`, 5*time.Second)
	p.click("#timeline-close")

	// The members go back to null and []: the next event of each task
	// reads its card again, without the highlight.
	<-highlight
	highlight <- false
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + stalled + "/start", Key: e.Admin}, http.StatusOK)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + waiting + "/start", Key: e.Admin}, http.StatusOK)
	p.waitFor(cardIn(stalled, "in_progress")+" && "+cardIn(waiting, "in_progress")+
		` && document.querySelectorAll("#board .card.stalled, #board .card.waiting").length === 0 && document.getElementById("highlights").hidden`, 5*time.Second)
	p.checkProblems(unauthorizedAt(site))
}
