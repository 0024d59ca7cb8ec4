//go:build unix

package console_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testsupport"
)

// TestConsoleBrowserWaitingLive: a task created with dependsOn shows what
// it waits for; the task.updated that empties its waitingOn clears it.
func TestConsoleBrowserWaitingLive(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	e := newEnv(t)
	dep := e.CreateTask(apitest.TaskBody("DEP-1"))["id"].(string)
	body := apitest.TaskBody("DEP-2")
	body["dependsOn"] = []string{dep}
	waiting := e.CreateTask(body)["id"].(string)
	site := serveConsole(t, e.Svc, e.Served)
	p := br.newPage(br.newContext())
	p.navigate(site.url())
	signInByTyping(p, e.Admin)
	p.waitFor(fmt.Sprintf(`document.querySelector('.card.waiting[data-task-id=%q] .waiting-note')?.textContent === "Waiting on DEP-1" && document.getElementById("highlights").textContent === "1 waiting"`, waiting), testsupport.BrowserTimeout)
	p.click(fmt.Sprintf(`.card[data-task-id=%q] .card-title`, waiting))
	p.waitFor(`document.querySelector("#timeline-body .waiting-box") !== null && document.querySelector("#timeline-body .facts").textContent.includes("Depends onDEP-1")`, 5*time.Second)
	if got := value[string](p, `document.getElementById("timeline-actions").hidden ? "" : [...document.querySelectorAll("#timeline-actions button")].filter((b) => b.closest("[hidden]") === null).map((b) => b.className).join(",")`); got != "act-cancel danger" {
		t.Errorf("actions %q", got)
	}
	p.click("#timeline-close")
	e.Call(apitest.Request{Method: "PUT", Path: "/tasks/" + waiting + "/dependencies", Key: e.Admin, Body: map[string]any{"dependsOn": []string{}}}, http.StatusOK)
	p.waitFor(`document.querySelector(".card.waiting") === null && document.getElementById("highlights").hidden`, 5*time.Second)
	p.checkProblems(unauthorizedAt(site))
}
