package lifecycle_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// An adapter that answers ErrNotFound (the repository or branch it was
// asked about is gone) has failed: the task exists, so the answer is 502
// provider_error, not 404.
func TestProviderErrorWrappingNotFoundIs502(t *testing.T) {
	t.Parallel()
	e, a := newSubmitEnv(t)
	id := e.startedTask("ENG-1")
	a.web.FailNext(memory.OpEnsure, fmt.Errorf("github: repository acme/web: %w", lifecycle.ErrNotFound))
	rec := e.Submit(id, "submit-not-found-1", apitest.SubmitBody())
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), `"provider_error"`) {
		t.Fatalf("submit with the adapter answering ErrNotFound = %d %s, want 502 provider_error", rec.Code, rec.Body)
	}
	if got := e.Task(id)["status"]; got != "in_progress" {
		t.Errorf("status after a failed submit = %v, want in_progress", got)
	}
}
