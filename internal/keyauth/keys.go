package keyauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/authlimit"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Prefix begins every plaintext API key.
const Prefix = "lsk_"

// randomLen is the number of random base62 characters of a generated key.
const randomLen = 40

// NewPlaintext returns a new random plaintext API key.
func NewPlaintext() string { return id.NewN(Prefix, randomLen) }

// Valid reports whether s has the form of an API key: "lsk_" followed by
// at least 32 base62 characters.
func Valid(s string) bool {
	return len(s) >= len(Prefix)+32 && id.Valid(s, Prefix)
}

// bearerToken returns the token of an "Authorization: Bearer ..." header.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(h[len(prefix):]), true
}

// reloadSpacing is how often, at most, refused unknown keys make the
// process read its keys whole, in case one was created through another
// process since the last read.
const reloadSpacing = time.Second

// reloadRetry is how long Keys waits after a failed whole read of the
// keys before a request tries again (the keys are read one by one
// meanwhile).
const reloadRetry = time.Second

// Store is what Keys reads of the Store: the API keys, one by its hash or
// all of them. [lifecycletype.Store] has both.
type Store interface {
	// APIKeyByHash returns the API key whose plaintext hashes to hash, or
	// an error matching ErrNotFound.
	APIKeyByHash(ctx context.Context, hash []byte) (lifecycletype.APIKey, error)
	// ListAPIKeys returns every API key, revoked ones included.
	ListAPIKeys(ctx context.Context) ([]lifecycletype.APIKey, error)
}

// Keys authenticates bearer API keys against the keys it knows (see the
// package comment) and the Store. Its Limiter refuses unknown keys of
// clients that failed too often before any Store read; [Keys.Begin]
// counts other credentials' failures with it.
type Keys struct {
	store Store
	clock lifecycletype.Clock
	ttl   time.Duration
	limit *Limiter // nil: unlimited

	mu sync.RWMutex
	// known holds the keys the process knows, by hash.
	known map[[sha256.Size]byte]knownKey
	// loaded is when the last whole read of the keys that succeeded began
	// (zero: never); started when the last one began, whatever came of
	// it; retryAt when one may be tried again after one failed.
	loaded, started, retryAt time.Time
	// loading is closed when the whole read under way ends; nil: none.
	loading chan struct{}
	// forgotten lists the keys revoked through this process while a whole
	// read is under way: what it read of them may be older.
	forgotten []string
	// ends holds, by key ID, the context cancelled when the key is
	// revoked: its Done is the Done of the key's principals. A key's entry
	// is made when it first authenticates and dropped when it is found
	// revoked.
	ends map[string]keyEnd
	// gen counts the calls of Forget. A read of one key records what it
	// read only when no Forget came since it began: the key it read may
	// be the one just revoked.
	gen uint64
}

// knownKey is a key the process knows, and when the Store was last read
// for it.
type knownKey struct {
	key     lifecycletype.APIKey
	revoked bool      // revoked in the Store, or through this process
	checked time.Time // when the read that found it began
}

// keyEnd is the end of a key: cancelled when the key is revoked.
type keyEnd struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns the Keys of store, on clock, whose known keys are answered
// from memory for ttl (zero or less: read again each time), whose unknown
// keys limit limits (nil: unlimited).
func New(store Store, clock lifecycletype.Clock, ttl time.Duration, limit *Limiter) *Keys {
	return &Keys{store: store, clock: clock, ttl: ttl, limit: limit,
		known: make(map[[sha256.Size]byte]knownKey), ends: make(map[string]keyEnd)}
}

// Authenticate returns the valid key of the Authorization header of r
// (a bearer token). A request without one is refused as it is; others as
// [Keys.AuthenticateKey] says.
func (k *Keys) Authenticate(r *http.Request) (lifecycletype.APIKey, error) {
	token, ok := bearerToken(r)
	if !ok {
		return lifecycletype.APIKey{}, fmt.Errorf("missing API key; send the header \"Authorization: Bearer lsk_...\" with a key of this service: %w", Reason("missing"))
	}
	return k.AuthenticateKey(r, token)
}

// AuthenticateKey returns the valid key of the plaintext that r's client
// sent. A key the process knows is answered by what it knows (see the
// package comment); a malformed key counts as a failure of its client,
// and an unknown key may cost a read only when the limiter admits it,
// counting as a failure when the Store does not have it (or has it
// revoked). It returns an error matching ErrUnauthorized for a key that
// is not valid, and a *RateLimitError when the limiter refuses r's
// client.
func (k *Keys) AuthenticateKey(r *http.Request, token string) (lifecycletype.APIKey, error) {
	if !Valid(token) {
		try, err := k.limit.Admit(r, false)
		if err != nil {
			return lifecycletype.APIKey{}, err
		}
		try.Fail()
		try.End()
		return lifecycletype.APIKey{}, fmt.Errorf("malformed API key; send the header \"Authorization: Bearer lsk_...\" with lsk_ followed by at least 32 letters or digits: %w", Reason("malformed"))
	}
	return k.Find(r.Context(), sha256.Sum256([]byte(token)), r)
}

// Begin admits an attempt of r's client to authenticate with credentials
// the host checks itself, counted by the limiter without taking from the
// budget of reads (see [Limiter.Admit]). With no limiter it admits every
// attempt, and counts none.
func (k *Keys) Begin(r *http.Request) (*authlimit.Try, error) {
	return k.limit.Admit(r, false)
}

// Find returns the valid key with hash, or an error matching
// ErrUnauthorized. An unknown key is limited as r's client's when r is
// not nil (a request); the host's own calls are not limited.
func (k *Keys) Find(ctx context.Context, hash [sha256.Size]byte, r *http.Request) (lifecycletype.APIKey, error) {
	// A failed whole read leaves the keys to be read one by one.
	_ = k.reload(ctx, k.stale)
	if key, ok, err := k.fromKnown(ctx, hash); ok {
		return key, err
	}
	var try *authlimit.Try
	if r != nil {
		t, limited := k.limit.Admit(r, true)
		if limited != nil {
			// The key may have been created through another process since
			// the keys were read: let a whole read under way finish, then
			// read them whole, at most once a reloadSpacing for everyone
			// refused.
			k.awaitReload(ctx)
			if key, ok, err := k.fromKnown(ctx, hash); ok {
				return key, err
			}
			if k.reload(ctx, k.spaced) == nil {
				if key, ok, err := k.fromKnown(ctx, hash); ok {
					return key, err
				}
			}
			return lifecycletype.APIKey{}, limited
		}
		try = t
		defer try.End()
	}
	key, err := k.read(ctx, hash)
	if errors.Is(err, lifecycletype.ErrUnauthorized) {
		try.Fail()
	}
	return key, err
}

// fromKnown answers a key the process knows: from memory while what it
// knows is younger than the TTL, by a read of the key otherwise. ok is
// false when the key is not known.
func (k *Keys) fromKnown(ctx context.Context, hash [sha256.Size]byte) (lifecycletype.APIKey, bool, error) {
	now := k.clock.Now()
	k.mu.RLock()
	known, ok := k.known[hash]
	k.mu.RUnlock()
	switch {
	case !ok:
		return lifecycletype.APIKey{}, false, nil
	case k.ttl > 0 && now.Before(known.checked.Add(k.ttl)):
		if known.revoked {
			return lifecycletype.APIKey{}, true, errRevokedKey
		}
		return known.key, true, nil
	default:
		key, err := k.read(ctx, hash)
		return key, true, err
	}
}

// read reads the key with hash from the Store and records what it found.
func (k *Keys) read(ctx context.Context, hash [sha256.Size]byte) (lifecycletype.APIKey, error) {
	now := k.clock.Now()
	k.mu.RLock()
	gen := k.gen
	k.mu.RUnlock()
	key, err := k.store.APIKeyByHash(ctx, hash[:])
	if errors.Is(err, lifecycletype.ErrNotFound) {
		return lifecycletype.APIKey{}, errUnknownKey
	}
	if err != nil {
		return lifecycletype.APIKey{}, fmt.Errorf("look up API key: %w", err)
	}
	// The store found the key by its hash; compare anyway, in constant time,
	// so that a store with a loose index cannot let a wrong key through.
	if subtle.ConstantTimeCompare(key.Hash, hash[:]) != 1 {
		return lifecycletype.APIKey{}, errUnknownKey
	}
	k.mu.Lock()
	if k.gen == gen {
		k.known[hash] = knownKey{key: key, revoked: key.RevokedAt != nil, checked: now}
	}
	if key.RevokedAt != nil {
		k.ended(key.ID)
	}
	k.mu.Unlock()
	if key.RevokedAt != nil {
		return lifecycletype.APIKey{}, errRevokedKey
	}
	return key, nil
}

// errRevokedKey refuses a revoked key.
var errRevokedKey = fmt.Errorf("revoked API key; ask for a new one: %w", Reason("revoked"))

// errUnknownKey refuses a key the Store does not have.
var errUnknownKey = fmt.Errorf("unknown API key; send \"Authorization: Bearer lsk_...\" with a key issued by this service: %w", Reason("unknown"))

// stale reports whether the keys should be read whole before a request
// is answered: never read, or read longer ago than the TTL (a second when
// the cache is disabled), and not just failed. k.mu is held.
func (k *Keys) stale(now time.Time) bool {
	age := k.ttl
	if age <= 0 {
		age = time.Second
	}
	return (k.loaded.IsZero() || now.Sub(k.loaded) >= age) && !now.Before(k.retryAt)
}

// spaced reports whether a refused unknown key may have the keys read
// whole: when none was begun in the last reloadSpacing, for any reason.
// k.mu is held.
func (k *Keys) spaced(now time.Time) bool {
	return !now.Before(k.started.Add(reloadSpacing)) && !now.Before(k.retryAt)
}

// always says the keys are to be read whole (ReadAll).
func always(time.Time) bool { return true }

// awaitReload waits for the whole read of the keys under way, if any, or
// until ctx is done.
func (k *Keys) awaitReload(ctx context.Context) {
	k.mu.RLock()
	ch := k.loading
	k.mu.RUnlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// ReadAll reads the keys whole from the Store now (or waits for the read
// already under way), which keeps the keys known current and closes the
// Done of every revoked key's principals. The Service's revocation
// watcher calls it.
func (k *Keys) ReadAll(ctx context.Context) error { return k.reload(ctx, always) }

// reload reads the keys whole when need (called with k.mu held, for
// reading or writing) says so, or waits for the read already under way,
// if any, when it does; one read serves every caller that needs one
// meanwhile.
func (k *Keys) reload(ctx context.Context, need func(now time.Time) bool) error {
	// Every request asks; a read lock answers them at once, in parallel,
	// while the keys are fresh.
	k.mu.RLock()
	due := need(k.clock.Now())
	k.mu.RUnlock()
	if !due {
		return nil
	}
	k.mu.Lock()
	now := k.clock.Now()
	if !need(now) {
		k.mu.Unlock()
		return nil
	}
	if ch := k.loading; ch != nil {
		k.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the API keys: %w", ctx.Err())
		}
	}
	ch := make(chan struct{})
	k.loading, k.forgotten, k.started = ch, nil, now
	k.mu.Unlock()

	keys, err := k.store.ListAPIKeys(ctx)

	k.mu.Lock()
	defer k.mu.Unlock()
	k.loading = nil
	close(ch)
	if err != nil {
		if ctx.Err() == nil {
			k.retryAt = now.Add(reloadRetry)
		}
		return fmt.Errorf("read the API keys: %w", err)
	}
	k.apply(keys, now)
	return nil
}

// apply makes keys, read whole from a read that began at readAt, the keys
// the process knows, but for those revoked through it meanwhile, which
// stay revoked, and those found one by one since the read began, which
// stay. It ends the principals of the revoked keys. k.mu is held.
func (k *Keys) apply(keys []lifecycletype.APIKey, readAt time.Time) {
	next := make(map[[sha256.Size]byte]knownKey, len(keys))
	for _, key := range keys {
		if len(key.Hash) != sha256.Size {
			continue
		}
		known := knownKey{key: key, revoked: key.RevokedAt != nil || slices.Contains(k.forgotten, key.ID), checked: readAt}
		next[[sha256.Size]byte(key.Hash)] = known
		if known.revoked {
			k.ended(key.ID)
		}
	}
	for h, known := range k.known {
		if _, ok := next[h]; !ok && !known.checked.Before(readAt) {
			next[h] = known
		}
	}
	k.known, k.loaded, k.forgotten = next, readAt, nil
}

// Live returns the IDs of the valid keys the process knows.
func (k *Keys) Live() map[string]bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	live := make(map[string]bool, len(k.known))
	for _, known := range k.known {
		if !known.revoked {
			live[known.key.ID] = true
		}
	}
	return live
}

// Learn makes a key created through this process known at once.
func (k *Keys) Learn(key *lifecycletype.APIKey) {
	if len(key.Hash) != sha256.Size {
		return
	}
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.known[[sha256.Size]byte(key.Hash)] = knownKey{key: *key, checked: now}
}

// Forget marks a key revoked through this process revoked at once, keeps
// reads under way from recording what they read of it, and closes the
// Done of the key's principals.
func (k *Keys) Forget(keyID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	k.ended(keyID)
	if k.loading != nil {
		k.forgotten = append(k.forgotten, keyID)
	}
	for h, known := range k.known {
		if known.key.ID == keyID {
			known.revoked = true
			k.known[h] = known
		}
	}
}

// ended closes the Done of the principals of a revoked key. k.mu is held.
func (k *Keys) ended(keyID string) {
	if end, ok := k.ends[keyID]; ok {
		delete(k.ends, keyID)
		end.cancel()
	}
}

// Done returns the channel closed when the key with keyID is revoked: the
// Done of its principals.
func (k *Keys) Done(keyID string) <-chan struct{} {
	k.mu.RLock()
	end, ok := k.ends[keyID]
	k.mu.RUnlock()
	if ok {
		return end.ctx.Done()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if end, ok = k.ends[keyID]; !ok {
		end.ctx, end.cancel = context.WithCancel(context.Background())
		k.ends[keyID] = end
	}
	return end.ctx.Done()
}

// DoneContext returns the context whose Done is done, the Done of a
// principal of key keyID, or nil when done is no key's (or the key's
// Done was closed already, and forgotten).
func (k *Keys) DoneContext(keyID string, done <-chan struct{}) context.Context {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if end, ok := k.ends[keyID]; ok && end.ctx.Done() == done {
		return end.ctx
	}
	return nil
}

// Reason is an authentication failure (it matches ErrUnauthorized), by
// the reason lifecycle.auth.failures counts: missing, malformed, unknown
// or revoked.
type Reason string

// Error implements error: the text of ErrUnauthorized.
func (r Reason) Error() string { return lifecycletype.ErrUnauthorized.Error() }

// Is reports whether target is ErrUnauthorized.
func (r Reason) Is(target error) bool { return target == lifecycletype.ErrUnauthorized }

// FailureReason returns the reason lifecycle.auth.failures counts err
// under: one of Reason's, "limited" for a client refused for failing too
// often, "other" for an Authenticator's own refusal.
func FailureReason(err error) string {
	var r Reason
	switch {
	case errors.As(err, &r):
		return string(r)
	case errors.Is(err, lifecycletype.ErrRateLimited):
		return "limited"
	default:
		return "other"
	}
}
