package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
)

func TestAPIKeyEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	created := e.Call(apitest.Request{Method: "POST", Path: "/api-keys", Key: e.Admin, Body: map[string]any{
		"name":   "web agent",
		"scopes": []string{"tasks:read", "tasks:write", "tasks:read"},
		"actor":  map[string]any{"id": "agent-web", "role": "agent"},
	}}, http.StatusCreated)["data"].(map[string]any)
	plaintext, _ := created["key"].(string)
	if !regexp.MustCompile(`^lsk_[A-Za-z0-9]{32,}$`).MatchString(plaintext) {
		t.Fatalf("key = %q, want lsk_ and 32+ base62 characters", plaintext)
	}
	if !idRE("key_").MatchString(created["id"].(string)) || created["revokedAt"] != nil || !timestampRE.MatchString(created["createdAt"].(string)) {
		t.Errorf("created key record = %v", created)
	}
	if diff := cmp.Diff([]any{"tasks:read", "tasks:write"}, created["scopes"]); diff != "" {
		t.Errorf("scopes (-want +got):\n%s", diff)
	}

	// The new key works, within its scopes.
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: plaintext}, http.StatusOK)
	e.Call(apitest.Request{Method: "GET", Path: "/api-keys", Key: plaintext}, http.StatusForbidden)

	// The listing never shows a plaintext or a hash.
	rec := e.Do(apitest.Request{Method: "GET", Path: "/api-keys", Key: e.Admin})
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api-keys = %d", rec.Code)
	}
	if strings.Contains(rec.Body.String(), plaintext) || strings.Contains(rec.Body.String(), `"hash"`) || strings.Contains(rec.Body.String(), `"key":`) {
		t.Errorf("GET /api-keys leaks a secret: %s", rec.Body)
	}

	// Revoking takes effect at once, and twice is fine.
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + created["id"].(string), Key: e.Admin}, http.StatusNoContent)
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/" + created["id"].(string), Key: e.Admin}, http.StatusNoContent)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: plaintext}, http.StatusUnauthorized)
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/key_doesnotexist", Key: e.Admin}, http.StatusNotFound)
	e.Call(apitest.Request{Method: "DELETE", Path: "/api-keys/bogus", Key: e.Admin}, http.StatusNotFound)
}

func TestAPIKeyValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	limited := e.Key(lifecycle.ScopeKeysAdmin, lifecycle.ScopeTasksRead)
	tests := []struct {
		name   string
		key    string
		body   any
		status int
		fields []string
	}{
		{"everything missing", e.Admin, map[string]any{}, 400, []string{"name", "scopes", "actor.id", "actor.role"}},
		{"unknown scope", e.Admin, map[string]any{"name": "k", "scopes": []string{"tasks:delete"}, "actor": map[string]any{"id": "a", "role": "agent"}}, 400, []string{"scopes[0]"}},
		{"bad role", e.Admin, map[string]any{"name": "k", "scopes": []string{"tasks:read"}, "actor": map[string]any{"id": "a", "role": "robot"}}, 400, []string{"actor.role"}},
		{"plaintext not settable", e.Admin, map[string]any{"name": "k", "scopes": []string{"tasks:read"}, "actor": map[string]any{"id": "a", "role": "agent"}, "key": "lsk_x"}, 400, []string{"key"}},
		{"no escalation", limited, map[string]any{"name": "k", "scopes": []string{"ship:write"}, "actor": map[string]any{"id": "a", "role": "agent"}}, 403, nil},
		{"subset allowed", limited, map[string]any{"name": "k", "scopes": []string{"tasks:read"}, "actor": map[string]any{"id": "a", "role": "agent"}}, 201, nil},
		{"no scope", e.Key(lifecycle.ScopeTasksRead), map[string]any{"name": "k", "scopes": []string{"tasks:read"}, "actor": map[string]any{"id": "a", "role": "agent"}}, 403, nil},
	}
	for _, tt := range tests {
		body := e.Call(apitest.Request{Method: "POST", Path: "/api-keys", Key: tt.key, Body: tt.body}, tt.status)
		for _, f := range tt.fields {
			if !hasFieldError(body["error"].(map[string]any), f) {
				t.Errorf("%s: details.fields lacks %q: %v", tt.name, f, body)
			}
		}
	}
}

func TestKeyInstalledWithKnownPlaintext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	known := "lsk_" + strings.Repeat("K", 40)
	params := lifecycle.CreateAPIKeyParams{Name: "demo admin", Scopes: apitest.AllScopes(), Actor: lifecycle.Actor{ID: "admin", Role: lifecycle.RoleUser}, Plaintext: known}
	_, got, err := e.Svc.CreateAPIKey(t.Context(), params)
	if err != nil || got != known {
		t.Fatalf("CreateAPIKey with a plaintext = %q, %v", got, err)
	}
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: known}, http.StatusOK)
	first, _, _ := e.Svc.CreateAPIKey(t.Context(), params)
	if again, got, err := e.Svc.CreateAPIKey(t.Context(), params); err != nil || got != known || again.ID != first.ID {
		t.Errorf("installing the same plaintext with the same scopes again = %s %q, %v; want the installed key %s, no error", again.ID, got, err, first.ID)
	}
	if keys, _ := e.Svc.APIKeys(t.Context()); len(keys) != 2 { // the env's admin key and this one
		t.Errorf("%d keys after installing one twice, want 2", len(keys))
	}

	// Other scopes: an error that names both sets and says what to do,
	// and the installed key keeps its scopes.
	fewer := params
	fewer.Scopes = []lifecycle.Scope{lifecycle.ScopeTasksRead}
	_, _, err = e.Svc.CreateAPIKey(t.Context(), fewer)
	var scopesErr *lifecycle.KeyScopesError
	if !errors.As(err, &scopesErr) || scopesErr.KeyID != first.ID || len(scopesErr.Requested) != 1 || len(scopesErr.Installed) != len(apitest.AllScopes()) || errors.Is(err, lifecycle.ErrConflict) {
		t.Fatalf("installing the plaintext with other scopes: error = %v, want a *KeyScopesError naming both sets", err)
	}
	for _, want := range []string{"tasks:read", "keys:admin", "another plaintext", "revoke"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Key: known, Body: apitest.TaskBody("ENG-1")}, http.StatusCreated)

	// A revoked key is not installed again.
	if _, err := e.Svc.RevokeAPIKey(t.Context(), first.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Svc.CreateAPIKey(t.Context(), params); !errors.As(err, &scopesErr) || !scopesErr.Revoked {
		t.Errorf("installing a revoked plaintext: error = %v, want a *KeyScopesError saying it is revoked", err)
	}
	params.Plaintext = "lsk_short"
	if _, _, err := e.Svc.CreateAPIKey(t.Context(), params); !errors.Is(err, lifecycle.ErrValidation) {
		t.Errorf("installing a malformed plaintext: error = %v, want ErrValidation", err)
	}
}

func TestRevocationElsewhereHonouredAfterCacheTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.KeyCacheTTL = 5 * time.Second })
	key := e.Key(lifecycle.ScopeTasksRead)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: key}, http.StatusOK)

	// A second Service on the same store (another process) revokes it.
	other, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := other.APIKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.RevokeAPIKey(t.Context(), keys[len(keys)-1].ID); err != nil {
		t.Fatal(err)
	}
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: key}, http.StatusOK) // still cached
	e.Clock.Advance(5 * time.Second)
	e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: key}, http.StatusUnauthorized)
}

// headerAuth is a host's own authentication: a trusted header names the user.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (lifecycle.Principal, error) {
	user := r.Header.Get("X-User")
	if user == "" {
		return lifecycle.Principal{}, fmt.Errorf("no X-User: %w", lifecycle.ErrUnauthorized)
	}
	return lifecycle.Principal{ID: "user:" + user, Actor: lifecycle.Actor{ID: user, Role: lifecycle.RoleUser},
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksAdmin}}, nil
}

func TestPluggableAuthenticator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *lifecycle.Config) { c.Authenticator = headerAuth{} })
	e.Call(apitest.Request{Method: "GET", Path: "/tasks"}, http.StatusUnauthorized)
	as := http.Header{"X-User": {"alice"}}
	e.Call(apitest.Request{Method: "POST", Path: "/tasks", Header: as, Body: apitest.TaskBody("ENG-1")}, http.StatusCreated)
	e.Call(apitest.Request{Method: "POST", Path: "/api-keys", Header: as, Body: map[string]any{}}, http.StatusForbidden)
	var data struct{ Actor lifecycle.Actor }
	if err := json.Unmarshal(e.Events()[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Actor != (lifecycle.Actor{ID: "alice", Role: lifecycle.RoleUser}) {
		t.Errorf("event actor = %+v, want alice", data.Actor)
	}
}

// keyLookupGate is a Store whose first read of one key hash after armed
// (or its first whole read of the keys, with lists) reads and then waits,
// so that a revocation can happen between the read and what the
// authenticator does with it.
type keyLookupGate struct {
	lifecycle.Store
	hash    []byte
	lists   bool          // gate ListAPIKeys instead of APIKeyByHash
	armed   chan struct{} // closed to arm the gate
	read    chan struct{} // closed once the gated read has read the keys
	release chan struct{} // closed to let it return
	once    sync.Once
}

func newKeyLookupGate(hash []byte, lists bool) *keyLookupGate {
	return &keyLookupGate{hash: hash, lists: lists, armed: make(chan struct{}), read: make(chan struct{}), release: make(chan struct{})}
}

func (g *keyLookupGate) wait() {
	select {
	case <-g.armed:
	default:
		return
	}
	g.once.Do(func() {
		close(g.read)
		<-g.release
	})
}

func (g *keyLookupGate) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	key, err := g.Store.APIKeyByHash(ctx, hash)
	if !g.lists && bytes.Equal(hash, g.hash) {
		g.wait()
	}
	return key, err
}

func (g *keyLookupGate) ListAPIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	keys, err := g.Store.ListAPIKeys(ctx)
	if g.lists {
		g.wait()
	}
	return keys, err
}

// A read that found a key before it was revoked through this Service
// must not make it known valid again once the revocation has marked it
// revoked: neither the read of one key (of a key created through another
// process, unknown here) nor the whole read of the keys.
func TestRevocationDuringLookupIsNotUndone(t *testing.T) {
	t.Parallel()
	for _, lists := range []bool{false, true} {
		t.Run(map[bool]string{false: "one key", true: "every key"}[lists], func(t *testing.T) {
			t.Parallel()
			plaintext := "lsk_" + strings.Repeat("R", 40)
			gate := newKeyLookupGate(lifecycle.HashAPIKey(plaintext), lists)
			e := newEnv(t, func(c *lifecycle.Config) {
				gate.Store = c.Store
				c.Store = gate
				c.KeyCacheTTL = time.Hour
			})
			e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: e.Admin}, http.StatusOK) // the keys are read whole
			creator := e.Svc
			if !lists {
				other, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock})
				if err != nil {
					t.Fatal(err)
				}
				creator = other // unknown to e.Svc: read by its hash
			}
			key, _, err := creator.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "agent",
				Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead}, Actor: lifecycle.Actor{ID: "agent", Role: lifecycle.RoleAgent}, Plaintext: plaintext})
			if err != nil {
				t.Fatal(err)
			}
			if lists {
				e.Clock.Advance(time.Hour) // what is known is old: the next request reads the keys whole
			}
			close(gate.armed)

			// A request starts and its read finds the key, not yet revoked.
			done := make(chan int)
			go func() { done <- e.Do(apitest.Request{Method: "GET", Path: "/tasks", Key: plaintext}).Code }()
			<-gate.read
			// The key is revoked while the read is under way; then it finishes.
			if _, err := e.Svc.RevokeAPIKey(t.Context(), key.ID); err != nil {
				t.Fatal(err)
			}
			close(gate.release)
			<-done // it began before the revocation: either answer is right

			e.Call(apitest.Request{Method: "GET", Path: "/tasks", Key: plaintext}, http.StatusUnauthorized)
		})
	}
}
