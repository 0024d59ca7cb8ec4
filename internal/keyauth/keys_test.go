package keyauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/fakeclock"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// countingStore holds API keys in memory and counts the reads of them.
type countingStore struct {
	mu            sync.Mutex
	keys          []lifecycletype.APIKey
	byHash, lists int
}

func (s *countingStore) APIKeyByHash(_ context.Context, hash []byte) (lifecycletype.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byHash++
	for _, k := range s.keys {
		if string(k.Hash) == string(hash) {
			return k, nil
		}
	}
	return lifecycletype.APIKey{}, lifecycletype.ErrNotFound
}

func (s *countingStore) ListAPIKeys(context.Context) ([]lifecycletype.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	return append([]lifecycletype.APIKey(nil), s.keys...), nil
}

func (s *countingStore) reads() (byHash, lists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byHash, s.lists
}

// testKey returns a plaintext key numbered n and its record.
func testKey(n int) (string, lifecycletype.APIKey) {
	plaintext := Prefix + strings.Repeat("k", 36) + string(rune('a'+n))
	h := sha256.Sum256([]byte(plaintext))
	return plaintext, lifecycletype.APIKey{ID: "key_" + string(rune('a'+n)), Hash: h[:],
		Actor: lifecycletype.Actor{ID: "agent", Role: lifecycletype.RoleAgent}, Scopes: []lifecycletype.Scope{lifecycletype.ScopeTasksRead}}
}

func bearer(plaintext, addr string) *http.Request {
	r, _ := http.NewRequest("GET", "/tasks", nil)
	r.RemoteAddr = addr
	r.Header.Set("Authorization", "Bearer "+plaintext)
	return r
}

// A known key is answered from memory, without a Store read, while its
// copy is younger than the TTL; an unknown key costs a read (when the
// limiter admits it) and fails with reason "unknown"; a key revoked
// through Forget is refused at once and its Done closes.
func TestKnownKeysWithoutReads(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	plain, key := testKey(0)
	store := &countingStore{keys: []lifecycletype.APIKey{key}}
	k := New(store, clock, time.Minute, nil)

	for range 3 {
		got, err := k.Authenticate(bearer(plain, "192.0.2.1:1"))
		if err != nil || got.ID != key.ID {
			t.Fatalf("Authenticate = %v, %v; want %s", got.ID, err, key.ID)
		}
	}
	if byHash, lists := store.reads(); byHash != 0 || lists != 1 {
		t.Errorf("reads of a known key: %d by hash, %d whole; want 0 and 1", byHash, lists)
	}

	unknown, _ := testKey(1)
	_, err := k.Authenticate(bearer(unknown, "192.0.2.1:1"))
	if !errors.Is(err, lifecycletype.ErrUnauthorized) || FailureReason(err) != "unknown" {
		t.Errorf("unknown key: %v (reason %q); want unauthorized, unknown", err, FailureReason(err))
	}
	if byHash, _ := store.reads(); byHash != 1 {
		t.Errorf("reads by hash of an unknown key: %d, want 1", byHash)
	}

	done := k.Done(key.ID)
	if k.DoneContext(key.ID, done) == nil {
		t.Error("DoneContext of a key's Done is nil")
	}
	k.Forget(key.ID)
	select {
	case <-done:
	default:
		t.Error("Done not closed by Forget")
	}
	if _, err := k.Authenticate(bearer(plain, "192.0.2.1:1")); FailureReason(err) != "revoked" {
		t.Errorf("revoked key: %v (reason %q), want revoked", err, FailureReason(err))
	}
	if live := k.Live(); live[key.ID] {
		t.Error("a forgotten key is live")
	}
}

// Missing and malformed keys fail with their reasons; a client that
// failed too often is refused unknown keys before any read, but never a
// valid key it sends.
func TestUnknownKeysAreLimited(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	plain, key := testKey(0)
	store := &countingStore{keys: []lifecycletype.APIKey{key}}
	limit := NewLimiter(LimiterConfig{Clock: clock, Limit: 2, Interval: time.Minute, Clients: 100, UnknownKeyReads: 50,
		Address: func(r *http.Request) string { return r.RemoteAddr }})
	k := New(store, clock, time.Minute, limit)

	r, _ := http.NewRequest("GET", "/tasks", nil)
	if _, err := k.Authenticate(r); FailureReason(err) != "missing" {
		t.Errorf("no key: %v, want reason missing", err)
	}
	if _, err := k.Authenticate(bearer("lsk_short", "192.0.2.1:1")); FailureReason(err) != "malformed" {
		t.Errorf("malformed key: %v, want reason malformed", err)
	}
	unknown, _ := testKey(1)
	if _, err := k.Authenticate(bearer(unknown, "192.0.2.1:1")); FailureReason(err) != "unknown" {
		t.Errorf("unknown key: %v, want reason unknown", err)
	}
	before, _ := store.reads()
	_, err := k.Authenticate(bearer(unknown, "192.0.2.1:1"))
	var limited *lifecycletype.RateLimitError
	if !errors.As(err, &limited) || FailureReason(err) != "limited" {
		t.Fatalf("third failure: %v, want a *RateLimitError", err)
	}
	if after, _ := store.reads(); after != before {
		t.Errorf("a refused unknown key was read by its hash")
	}
	if got, err := k.Authenticate(bearer(plain, "192.0.2.1:1")); err != nil || got.ID != key.ID {
		t.Errorf("a valid key of the limited client: %v, %v", got.ID, err)
	}
}

// The role table: a user key mints agents' keys but not a system key, nor
// scopes it lacks; an agent key only its own; a key holding fewer scopes
// cannot revoke one holding more.
func TestRules(t *testing.T) {
	t.Parallel()
	user := lifecycletype.Actor{ID: "ops", Role: lifecycletype.RoleUser}
	agent := lifecycletype.Actor{ID: "a1", Role: lifecycletype.RoleAgent}
	read := []lifecycletype.Scope{lifecycletype.ScopeTasksRead}
	both := []lifecycletype.Scope{lifecycletype.ScopeTasksRead, lifecycletype.ScopeKeysAdmin}
	tests := []struct {
		name string
		err  error
	}{
		{"user mints an agent", CheckGrant(user, both, agent, read)},
		{"user mints a system key", CheckGrant(user, both, lifecycletype.Actor{ID: "s", Role: lifecycletype.RoleSystem}, read)},
		{"user grants a scope it lacks", CheckGrant(user, read, agent, both)},
		{"agent mints its own", CheckGrant(agent, both, agent, read)},
		{"agent mints another agent", CheckGrant(agent, both, lifecycletype.Actor{ID: "a2", Role: lifecycletype.RoleAgent}, read)},
		{"user revokes an agent's key", CheckRevoke(user, both, &lifecycletype.APIKey{Actor: agent, Scopes: read})},
		{"reader revokes an admin's key", CheckRevoke(user, read, &lifecycletype.APIKey{Actor: agent, Scopes: both})},
	}
	allowed := map[string]bool{"user mints an agent": true, "agent mints its own": true, "user revokes an agent's key": true}
	for _, tt := range tests {
		if allowed[tt.name] != (tt.err == nil) {
			t.Errorf("%s: %v", tt.name, tt.err)
		}
		if tt.err != nil && !errors.Is(tt.err, lifecycletype.ErrInsufficientScope) {
			t.Errorf("%s: %v does not match ErrInsufficientScope", tt.name, tt.err)
		}
	}
}
