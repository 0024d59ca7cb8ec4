package lifecycle_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/tasklifecycle/lifecycle"
)

// keyBody is a POST /api-keys body.
func keyBody(actorID string, role lifecycle.Role, scopes ...lifecycle.Scope) map[string]any {
	return map[string]any{"name": "k", "scopes": scopes, "actor": map[string]any{"id": actorID, "role": role}}
}

// A key creates keys only within its own scopes and the actors it may act
// as; only a key with every scope mints system keys; a key cannot revoke a
// key holding scopes it lacks.
func TestKeysAdminIsLeastPrivilege(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	user := e.keyAs(lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}, lifecycle.ScopeKeysAdmin, lifecycle.ScopeTasksRead)
	agent := e.keyAs(lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleAgent}, lifecycle.ScopeKeysAdmin, lifecycle.ScopeTasksRead)
	e.keyAs(lifecycle.Actor{ID: "root", Role: lifecycle.RoleSystem}, lifecycle.ScopeShipWrite, lifecycle.ScopeTasksRead)

	tests := []struct {
		name   string
		key    string
		body   map[string]any
		status int
	}{
		{"user grants a scope it lacks", user, keyBody("a", lifecycle.RoleAgent, lifecycle.ScopeTasksWrite), 403},
		{"user mints a system key", user, keyBody("robot", lifecycle.RoleSystem, lifecycle.ScopeTasksRead), 403},
		{"user creates an agent key within its scopes", user, keyBody("agent-9", lifecycle.RoleAgent, lifecycle.ScopeTasksRead), 201},
		{"user creates a user key", user, keyBody("ops-2", lifecycle.RoleUser, lifecycle.ScopeTasksRead), 201},
		{"agent creates a key for another agent", agent, keyBody("agent-2", lifecycle.RoleAgent, lifecycle.ScopeTasksRead), 403},
		{"agent creates a user key", agent, keyBody("agent-1", lifecycle.RoleUser, lifecycle.ScopeTasksRead), 403},
		{"agent creates a key for itself", agent, keyBody("agent-1", lifecycle.RoleAgent, lifecycle.ScopeTasksRead), 201},
		{"a key with every scope mints a system key", e.admin, keyBody("robot", lifecycle.RoleSystem, lifecycle.ScopeTasksRead), 201},
	}
	for _, tt := range tests {
		rec := e.do(request{method: "POST", path: "/api-keys", key: tt.key, body: tt.body})
		if rec.Code != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, rec.Code, tt.status, rec.Body)
		} else if tt.status == 403 && errorCode(decode(t, rec)) != "insufficient_scope" {
			t.Errorf("%s: %s", tt.name, rec.Body)
		}
	}

	// Revocation: the user key cannot revoke a key with ship:write, but can
	// revoke one within its scopes.
	keys := e.call(request{method: "GET", path: "/api-keys", key: e.admin}, http.StatusOK)["data"].([]any)
	idOf := func(actor string) string {
		for _, k := range keys {
			m := k.(map[string]any)
			if m["actor"].(map[string]any)["id"] == actor {
				return m["id"].(string)
			}
		}
		t.Fatalf("no key for %s", actor)
		return ""
	}
	e.call(request{method: "DELETE", path: "/api-keys/" + idOf("root"), key: user}, http.StatusForbidden)
	e.call(request{method: "DELETE", path: "/api-keys/" + idOf("tester"), key: user}, http.StatusForbidden) // the admin key
	e.call(request{method: "GET", path: "/tasks", key: e.admin}, http.StatusOK)                             // still works
	e.call(request{method: "DELETE", path: "/api-keys/" + idOf("agent-9"), key: user}, http.StatusNoContent)
	e.call(request{method: "DELETE", path: "/api-keys/key_unknownunknownunknown", key: user}, http.StatusNotFound)
}

// POST /api-keys honours Idempotency-Key: a retry replays the same key,
// and the recorded answer does not keep the plaintext in the clear when a
// WebhookSecretKey seals it.
func TestCreateAPIKeyIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.WebhookSecretKey = bytes.Repeat([]byte{7}, 32) })
	h := http.Header{"Idempotency-Key": {"create-key-0001"}}
	body := keyBody("agent-7", lifecycle.RoleAgent, lifecycle.ScopeTasksRead)
	first := e.do(request{method: "POST", path: "/api-keys", key: e.admin, body: body, header: h})
	again := e.do(request{method: "POST", path: "/api-keys", key: e.admin, body: body, header: h})
	if first.Code != 201 || again.Code != 201 || !bytes.Equal(first.Body.Bytes(), again.Body.Bytes()) || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d %s\nagain %d %s", first.Code, first.Body, again.Code, again.Body)
	}
	keys := e.call(request{method: "GET", path: "/api-keys", key: e.admin}, http.StatusOK)["data"].([]any)
	if len(keys) != 2 { // the admin's and this one
		t.Errorf("%d keys after a retried creation, want 2", len(keys))
	}
	plaintext := decode(t, first)["data"].(map[string]any)["key"].(string)
	e.call(request{method: "GET", path: "/tasks", key: plaintext}, http.StatusOK)

	// The same key for another body is a conflict; a bad key is a 400.
	other := keyBody("agent-8", lifecycle.RoleAgent, lifecycle.ScopeTasksRead)
	e.call(request{method: "POST", path: "/api-keys", key: e.admin, body: other, header: h}, http.StatusConflict)
	e.call(request{method: "POST", path: "/api-keys", key: e.admin, body: other, header: http.Header{"Idempotency-Key": {"short"}}}, http.StatusBadRequest)

	// The plaintext is nowhere in the database files.
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(e.store.Path()), "*"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if bytes.Contains(raw, []byte(plaintext)) {
			t.Errorf("%s holds the plaintext key", f)
		}
	}
}
