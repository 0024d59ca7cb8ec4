//go:build unix

package console_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// TestConsoleBrowserStalledLive: a task that stays in progress past
// Config.StallAfter is marked stalled by the Service; its task.stalled
// event highlights its card on the open board, with since when, and its
// next activity clears the highlight.
func TestConsoleBrowserStalledLive(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	e := newEnv(t, func(c *lifecycle.Config) {
		c.StallAfter = map[lifecycle.Status]time.Duration{lifecycle.StatusInProgress: time.Minute}
	})
	e.Start()
	id := e.CreateTask(apitest.TaskBody("STL-1"))["id"].(string)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/start", Key: e.Admin}, http.StatusOK)
	site := serveConsole(t, e.Svc, e.Served)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.waitFor(cardIn(id, "in_progress"), testsupport.BrowserTimeout)
	if value[bool](p, `document.querySelector(".card.stalled") !== null`) {
		t.Fatal("a card is stalled before its time")
	}
	apitest.WaitFor(t, func() bool {
		e.Clock.Advance(10 * time.Second)
		return e.Task(id)["stalled"] != nil
	})
	since := e.Task(id)["stalled"].(map[string]any)["since"].(string)
	p.waitFor(fmt.Sprintf(`document.querySelector('.card.stalled[data-task-id=%q] .stalled-note time')?.dateTime === %q && document.getElementById("highlights").textContent === "1 stalled"`, id, since), 5*time.Second)
	e.Call(apitest.Request{Method: "POST", Path: "/tasks/" + id + "/blocker", Key: e.Admin,
		Body: map[string]any{"reason": "needs_decision", "actionRequired": "Decide."}}, http.StatusOK)
	p.waitFor(cardIn(id, "blocked")+` && document.querySelector(".card.stalled") === null && document.getElementById("highlights").hidden`, 5*time.Second)
	p.checkProblems(unauthorizedAt(site))
}
