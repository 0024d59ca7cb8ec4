package lifecycle_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// A call made again under its params' IdempotencyKey answers as the first
// did and changes nothing: one event per change, however often it is
// retried.
func TestKeyedTaskChangesActOnce(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	id := e.CreateTask(apitest.TaskBody("ONCE-1"))["id"].(string)
	actor := lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}

	first, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor, IdempotencyKey: "start-once-1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor, IdempotencyKey: "start-once-1"})
	if err != nil {
		t.Fatalf("the retried start: %v", err)
	}
	if again.Status != lifecycle.StatusInProgress || again.ID != id || !again.UpdatedAt.Equal(first.UpdatedAt.Time) {
		t.Errorf("the retry answered %+v, want the first answer %+v", again, first)
	}

	block := lifecycle.RecordBlockerParams{Reason: "missing_secret", ActionRequired: "Add THEME_URL", Actor: actor}
	if _, err := e.Svc.RecordBlocker(ctx, id, keyed(block, "blocker-once-1")); err != nil {
		t.Fatal(err)
	}
	blocked, err := e.Svc.RecordBlocker(ctx, id, keyed(block, "blocker-once-1"))
	if err != nil || blocked.Status != lifecycle.StatusBlocked || blocked.Blocker == nil {
		t.Fatalf("the retried blocker = %+v, %v; want the blocked task", blocked, err)
	}
	other := block
	other.ActionRequired = "something else"
	var ce *lifecycle.ConflictError
	if _, err := e.Svc.RecordBlocker(ctx, id, keyed(other, "blocker-once-1")); !errors.As(err, &ce) || ce.Reason != "idempotency_key_reused" {
		t.Errorf("the key with other parameters = %v, want idempotency_key_reused", err)
	}
	if _, err := e.Svc.RecordBlocker(ctx, id, lifecycle.RecordBlockerParams{IdempotencyKey: "blocker-once-2"}); !errors.Is(err, lifecycle.ErrValidation) {
		t.Errorf("an invalid blocker = %v, want a validation error", err)
	}

	resolve := lifecycle.ResolveBlockerParams{Resolution: "added", Actor: actor}
	for range 2 {
		got, err := e.Svc.ResolveBlocker(ctx, id, lifecycle.ResolveBlockerParams{Resolution: resolve.Resolution, Actor: resolve.Actor, IdempotencyKey: "resolve-once-1"})
		if err != nil || got.Status != lifecycle.StatusInProgress {
			t.Fatalf("resolve = %+v, %v", got, err)
		}
	}
	// Without a key, a call runs as it is: the second start conflicts.
	if _, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor, IdempotencyKey: ""}); !errors.Is(err, lifecycle.ErrConflict) {
		t.Errorf("a start without a key of a started task = %v, want a conflict", err)
	}
	if _, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor, IdempotencyKey: "short"}); !errors.Is(err, lifecycle.ErrValidation) {
		t.Errorf("a key of 5 characters = %v, want a validation error", err)
	}

	evs := e.EventsOf(id)
	if len(evs) != 4 { // created, started, blocked, resolved
		t.Errorf("%d events, want 4 (each change once)", len(evs))
	}
}

func TestAuthenticateAndAPIError(t *testing.T) {
	e := newEnv(t)
	agent := e.Key(lifecycle.ScopeTasksRead)
	req := apitest.NewRequest(t, "POST", "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+agent)
	p, err := e.Svc.Authenticate(req)
	if err != nil || !p.Has(lifecycle.ScopeTasksRead) || p.Has(lifecycle.ScopeTasksWrite) || p.ID == "" {
		t.Fatalf("Authenticate = %+v, %v", p, err)
	}
	req.Header.Set("Authorization", "Bearer lsk_00000000000000000000000000000000000000")
	_, err = e.Svc.Authenticate(req)
	if status, body := e.Svc.APIError(err); status != http.StatusUnauthorized || body.Error.Code != "unauthorized" {
		t.Errorf("an unknown key = %d %+v, want 401 unauthorized", status, body)
	}

	id := e.CreateTask(apitest.TaskBody("ERR-1"))["id"].(string)
	_, err = e.Svc.ResolveBlocker(t.Context(), id, lifecycle.ResolveBlockerParams{})
	status, body := e.Svc.APIError(err)
	if status != http.StatusConflict || body.Error.Code != "conflict" || body.Error.Details == nil ||
		len(body.Error.Details.AvailableActions) != 1 || body.Error.Details.AvailableActions[0] != lifecycle.ActionStart {
		t.Errorf("a refused change = %d %+v, want 409 conflict listing start", status, body)
	}
	if status, body := e.Svc.APIError(errors.New("disk on fire")); status != http.StatusInternalServerError || body.Error.Message == "disk on fire" {
		t.Errorf("an unknown error = %d %+v, want 500 without its text", status, body)
	}
}

// NoteReplays tells a call answered from a record from one that ran.
func TestNoteReplays(t *testing.T) {
	e := newEnv(t)
	id := e.CreateTask(apitest.TaskBody("ONCE-2"))["id"].(string)
	actor := lifecycle.Actor{ID: "agent-web", Role: lifecycle.RoleAgent}
	for i, want := range []bool{false, true} {
		ctx, replayed := lifecycle.NoteReplays(t.Context())
		if _, err := e.Svc.StartTask(ctx, id, lifecycle.StartTaskParams{Actor: actor, IdempotencyKey: "note-replays-1"}); err != nil {
			t.Fatal(err)
		}
		if replayed() != want {
			t.Errorf("call %d: replayed = %v, want %v", i+1, replayed(), want)
		}
	}
}

// keyed returns p under key.
func keyed(p lifecycle.RecordBlockerParams, key string) lifecycle.RecordBlockerParams {
	p.IdempotencyKey = key
	return p
}
