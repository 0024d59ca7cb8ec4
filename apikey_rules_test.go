package lifecycle_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

// keyBody is a POST /api-keys body.
func keyBody(actorID string, role lifecycle.Role, scopes ...lifecycle.Scope) map[string]any {
	return map[string]any{"name": "k", "scopes": scopes, "actor": map[string]any{"id": actorID, "role": role}}
}

// A key creates keys only within its own scopes and the actors it may act
// as; a key cannot revoke a key holding scopes it lacks.
func TestKeysAdminIsLeastPrivilege(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	user := e.KeyAs(lifecycle.Actor{ID: "ops", Role: lifecycle.RoleUser}, lifecycle.ScopeKeysAdmin, lifecycle.ScopeTasksRead)
	agent := e.KeyAs(lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleAgent}, lifecycle.ScopeKeysAdmin, lifecycle.ScopeTasksRead)
	e.KeyAs(lifecycle.Actor{ID: "root", Role: lifecycle.RoleSystem}, lifecycle.ScopeShipWrite, lifecycle.ScopeTasksRead)

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
		{"a user key with every scope mints a system key", e.Admin, keyBody("robot", lifecycle.RoleSystem, lifecycle.ScopeTasksRead), 403},
	}
	for _, tt := range tests {
		rec := e.Do(apitest.Request{Method: "POST", Path: "/api-keys", Key: tt.key, Body: tt.body})
		if rec.Code != tt.status {
			t.Errorf("%s: %d, want %d: %s", tt.name, rec.Code, tt.status, rec.Body)
		} else if tt.status == 403 && apitest.ErrorCode(apitest.Decode(t, rec)) != "insufficient_scope" {
			t.Errorf("%s: %s", tt.name, rec.Body)
		}
	}

	// Revocation: the user key cannot revoke a key with ship:write, but can
	// revoke one within its scopes.
	keys := e.Call(apitest.Request{Method: "GET", Path: "/api-keys", Key: e.Admin}, http.StatusOK)["data"].([]any)
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
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + idOf("root"), Key: user}, http.StatusForbidden)
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + idOf("root"), Key: e.Admin}, http.StatusForbidden) // a system key, to a user key
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + idOf("tester"), Key: user}, http.StatusForbidden)  // the admin key
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin}, http.StatusOK)                              // still works
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + idOf("agent-9"), Key: user}, http.StatusNoContent)
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/key_unknownunknownunknown", Key: user}, http.StatusNotFound)
}

// The rule table of package keyauth (rules.go), over HTTP: for each role of a creator
// holding every scope, which actors it may mint keys for and revoke the keys
// of. No key mints a principal it could not act as itself, system included:
// an agent with keys:admin and every scope mints neither the system nor a
// reviewer (who would approve its own work), nor a user.
func TestKeyRulesHoldForEveryRole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	creators := map[lifecycle.Role]lifecycle.Actor{
		lifecycle.RoleSystem:   {ID: "root", Role: lifecycle.RoleSystem},
		lifecycle.RoleUser:     {ID: "ops", Role: lifecycle.RoleUser},
		lifecycle.RoleAgent:    {ID: "agent-1", Role: lifecycle.RoleAgent},
		lifecycle.RoleReviewer: {ID: "rev-1", Role: lifecycle.RoleReviewer},
	}
	keys := map[lifecycle.Role]string{}
	for role, actor := range creators {
		keys[role] = e.KeyAs(actor, apitest.AllScopes()...)
	}
	targets := []struct {
		name  string
		actor lifecycle.Actor
	}{
		{"the system", lifecycle.Actor{ID: "system", Role: lifecycle.RoleSystem}},
		{"another system actor", lifecycle.Actor{ID: "robot", Role: lifecycle.RoleSystem}},
		{"a user", lifecycle.Actor{ID: "ops-2", Role: lifecycle.RoleUser}},
		{"agent-1", lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleAgent}},
		{"another agent", lifecycle.Actor{ID: "agent-2", Role: lifecycle.RoleAgent}},
		{"rev-1", lifecycle.Actor{ID: "rev-1", Role: lifecycle.RoleReviewer}},
		{"another reviewer", lifecycle.Actor{ID: "rev-2", Role: lifecycle.RoleReviewer}},
		{"a reviewer named as agent-1", lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleReviewer}},
	}
	// allowed[creator role] lists the targets it may mint keys for.
	allowed := map[lifecycle.Role][]string{
		lifecycle.RoleSystem:   {"the system", "another system actor", "a user", "agent-1", "another agent", "rev-1", "another reviewer", "a reviewer named as agent-1"},
		lifecycle.RoleUser:     {"a user", "agent-1", "another agent", "rev-1", "another reviewer", "a reviewer named as agent-1"},
		lifecycle.RoleAgent:    {"agent-1"},
		lifecycle.RoleReviewer: {"rev-1"},
	}
	for role, key := range keys {
		for _, target := range targets {
			want := http.StatusForbidden
			if slices.Contains(allowed[role], target.name) {
				want = http.StatusCreated
			}
			body := keyBody(target.actor.ID, target.actor.Role, lifecycle.ScopeTasksRead)
			rec := e.Do(apitest.Request{Method: "POST", Path: "/api-keys", Key: key, Body: body})
			if rec.Code != want {
				t.Errorf("a key of role %s mints a key for %s: %d, want %d: %s", role, target.name, rec.Code, want, rec.Body)
				continue
			}
			if want == http.StatusForbidden && apitest.ErrorCode(apitest.Decode(t, rec)) != "insufficient_scope" {
				t.Errorf("a key of role %s mints a key for %s: %s", role, target.name, rec.Body)
			}
		}
	}

	// Revocation follows the same table: each creator revokes a key of
	// each target, minted by the host.
	for role, key := range keys {
		for _, target := range targets {
			victim, _, err := e.Svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "victim", Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead}, Actor: target.actor})
			if err != nil {
				t.Fatal(err)
			}
			want := http.StatusForbidden
			if slices.Contains(allowed[role], target.name) {
				want = http.StatusNoContent
			}
			rec := e.Do(apitest.Request{Method: "DELETE", Path: "/api-keys/" + victim.ID, Key: key})
			if rec.Code != want {
				t.Errorf("a key of role %s revokes a key of %s: %d, want %d: %s", role, target.name, rec.Code, want, rec.Body)
			}
		}
	}
}

// The escalation of issue 21: an agent key holding keys:admin cannot
// become the system, and so cannot mint the reviewer that approves its work.
func TestAgentKeyCannotBecomeTheSystem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	agent := e.KeyAs(lifecycle.Actor{ID: "agent-1", Role: lifecycle.RoleAgent}, apitest.AllScopes()...)
	for _, body := range []map[string]any{
		keyBody("system", lifecycle.RoleSystem, apitest.AllScopes()...),
		keyBody("agent-1", lifecycle.RoleSystem, lifecycle.ScopeKeysAdmin),
		keyBody("reviewer-1", lifecycle.RoleReviewer, lifecycle.ScopeReviewsWrite),
		keyBody("agent-1", lifecycle.RoleReviewer, lifecycle.ScopeReviewsWrite),
		keyBody("ops", lifecycle.RoleUser, lifecycle.ScopeKeysAdmin),
	} {
		rec := e.Do(apitest.Request{Method: "POST", Path: "/api-keys", Key: agent, Body: body})
		if rec.Code != http.StatusForbidden || apitest.ErrorCode(apitest.Decode(t, rec)) != "insufficient_scope" {
			t.Errorf("the agent minted %v: %d %s", body["actor"], rec.Code, rec.Body)
		}
	}
	if n := len(e.Call(apitest.Request{Method: "GET", Path: "/api-keys", Key: e.Admin}, http.StatusOK)["data"].([]any)); n != 2 {
		t.Errorf("%d keys, want the admin's and the agent's", n)
	}
}

// POST /api-keys honours Idempotency-Key: a retry creates no second key,
// and replays the key's record without its plaintext ("key": null and
// meta.keyOmitted), which is recorded nowhere, with or without a
// WebhookSecretKey.
func TestCreateAPIKeyIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  func(*lifecycle.Config)
	}{
		{"without a WebhookSecretKey", func(*lifecycle.Config) {}},
		{"with a WebhookSecretKey", func(c *lifecycle.Config) { c.WebhookSecretKey = bytes.Repeat([]byte{7}, 32) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.cfg)
			h := http.Header{"Idempotency-Key": {"create-key-0001"}}
			body := keyBody("agent-7", lifecycle.RoleAgent, lifecycle.ScopeTasksRead)
			first := e.Call(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: body, Header: h}, http.StatusCreated)["data"].(map[string]any)
			plaintext, _ := first["key"].(string)
			if !strings.HasPrefix(plaintext, "lsk_") {
				t.Fatalf("the first answer holds no key: %v", first)
			}
			e.Clock.Advance(time.Hour)
			again := e.Do(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: body, Header: h})
			if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || strings.Contains(again.Body.String(), plaintext) {
				t.Fatalf("replay: %d %q %s", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
			}
			replay := apitest.Decode(t, again)
			data, meta := replay["data"].(map[string]any), replay["meta"].(map[string]any)
			if k, ok := data["key"]; !ok || k != nil || meta["keyOmitted"] != true || !strings.Contains(meta["message"].(string), "shown once") {
				t.Errorf("replay: %s", again.Body)
			}
			delete(first, "key")
			delete(data, "key")
			if fmt.Sprint(first) != fmt.Sprint(data) {
				t.Errorf("the replay's record %v differs from the first answer's %v", data, first)
			}
			keys := e.Call(apitest.Request{Method: "GET", Path: "/api-keys", Key: e.Admin}, http.StatusOK)["data"].([]any)
			if len(keys) != 2 { // the admin's and this one
				t.Errorf("%d keys after a retried creation, want 2", len(keys))
			}
			e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: plaintext}, http.StatusOK)

			// The same key for another body is a conflict; a bad key is a 400.
			other := keyBody("agent-8", lifecycle.RoleAgent, lifecycle.ScopeTasksRead)
			e.Call(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: other, Header: h}, http.StatusConflict)
			e.Call(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: other, Header: http.Header{"Idempotency-Key": {"short"}}}, http.StatusBadRequest)

			// The plaintext is nowhere in the database files.
			files, _ := filepath.Glob(filepath.Join(filepath.Dir(e.Store.Path()), "*"))
			for _, f := range files {
				raw, _ := os.ReadFile(f)
				if bytes.Contains(raw, []byte(plaintext)) {
					t.Errorf("%s holds the plaintext key", f)
				}
			}
		})
	}
}

// An answer to POST /api-keys recorded by an earlier version, which held the
// plaintext (in the form of a webhook secret: plain, or sealed with the
// WebhookSecretKey), is replayed without it.
func TestEarlierRecordedKeyIsReplayedWithoutIt(t *testing.T) {
	t.Parallel()
	secretKey := bytes.Repeat([]byte{7}, 32)
	for _, tt := range []struct {
		name string
		cfg  func(*lifecycle.Config)
		form func(t *testing.T, scope lifecycle.IdempotencyScope, answer []byte) []byte
	}{
		{"plain", func(*lifecycle.Config) {}, func(_ *testing.T, _ lifecycle.IdempotencyScope, answer []byte) []byte {
			return append([]byte{0}, answer...)
		}},
		{"sealed", func(c *lifecycle.Config) { c.WebhookSecretKey = secretKey }, func(t *testing.T, scope lifecycle.IdempotencyScope, answer []byte) []byte {
			block, err := aes.NewCipher(secretKey)
			if err != nil {
				t.Fatal(err)
			}
			gcm, _ := cipher.NewGCM(block)
			nonce := bytes.Repeat([]byte{1}, gcm.NonceSize())
			aad := scope.PrincipalID + "\n" + scope.Method + " " + scope.Route + "\n" + scope.ResourceID + "\n" + scope.Key
			return gcm.Seal(append([]byte{1}, nonce...), nonce, answer, []byte(aad))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.cfg)
			h := http.Header{"Idempotency-Key": {"create-key-0002"}}
			body := keyBody("agent-7", lifecycle.RoleAgent, lifecycle.ScopeTasksRead)
			rec := e.Do(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: body, Header: h})
			plaintext := apitest.Decode(t, rec)["data"].(map[string]any)["key"].(string)
			// Rewrite the record as an earlier version kept it: the whole answer.
			scope := lifecycle.IdempotencyScope{PrincipalID: e.keyID("tester"), Method: "POST", Route: "/api-keys", Key: "create-key-0002"}
			err := e.Store.Update(t.Context(), func(tx lifecycle.Tx) error {
				return tx.UpdateIdempotencyRecord(t.Context(), scope, func(r *lifecycle.IdempotencyRecord) (*lifecycle.IdempotencyRecord, error) {
					if r == nil {
						return nil, lifecycle.ErrNotFound
					}
					r.Body = tt.form(t, scope, rec.Body.Bytes())
					return r, nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			again := e.Do(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: body, Header: h})
			if again.Code != http.StatusCreated || strings.Contains(again.Body.String(), plaintext) || !strings.Contains(again.Body.String(), `"key":null`) ||
				!strings.Contains(again.Body.String(), `"keyOmitted":true`) {
				t.Fatalf("replay of an earlier record: %d %s", again.Code, again.Body)
			}
		})
	}
}
