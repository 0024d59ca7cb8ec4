package lifecycle

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/authlimit"
)

// The known keys. The table of API keys is small, so the Service keeps it
// whole in memory, by hash: every key of the Store, valid or revoked, read
// with one ListAPIKeys when the copy is older than Config.KeyCacheTTL (and
// every KeyCacheTTL/2 by the revocation watcher while the Service runs),
// and kept current at once for the keys created and revoked through this
// Service. A known key is answered from memory while its copy is younger
// than KeyCacheTTL, and read again by its hash otherwise (or always, when
// the cache is disabled), without the limiter: a valid key is never
// refused for its address's failures.
//
// Only a key the Service does not know goes through the limiter of failed
// authentications (authLimiter): it may cost a read by its hash (a key
// created through another process a moment ago is found so) when its
// client, its network and the process-wide budget of reads allow;
// otherwise it may ask for the keys to be read whole again, at most once
// a reloadSpacing for the whole process, and is answered 429 if that does
// not find it.

// reloadSpacing is how often, at most, refused unknown keys make the
// Service read its keys whole, in case one was created through another
// process since the last read.
const reloadSpacing = time.Second

// reloadRetry is how long the Service waits after a failed whole read of
// its keys before a request tries again (the keys are read one by one
// meanwhile).
const reloadRetry = time.Second

// keyAuthenticator authenticates bearer API keys against the keys it knows
// (see above) and the Store. Its limiter refuses unknown keys of clients
// that failed too often before any Store read; Service.BeginAuthentication
// counts other credentials' failures with it.
type keyAuthenticator struct {
	store Store
	clock Clock
	ttl   time.Duration
	limit *authLimiter // nil: unlimited

	mu sync.RWMutex
	// known holds the keys the Service knows, by hash.
	known map[[sha256.Size]byte]knownKey
	// loaded is when the last whole read of the keys that succeeded began
	// (zero: never); started when the last one began, whatever came of
	// it; retryAt when one may be tried again after one failed.
	loaded, started, retryAt time.Time
	// loading is closed when the whole read under way ends; nil: none.
	loading chan struct{}
	// forgotten lists the keys revoked through this Service while a whole
	// read is under way: what it read of them may be older.
	forgotten []string
	// ends holds, by key ID, the context cancelled when the key is
	// revoked: its Done is the Done of the key's principals. A key's entry
	// is made when it first authenticates and dropped when it is found
	// revoked.
	ends map[string]keyEnd
	// gen counts the calls of forget. A read of one key records what it
	// read only when no forget came since it began: the key it read may
	// be the one just revoked.
	gen uint64
}

// knownKey is a key the Service knows, and when the Store was last read
// for it.
type knownKey struct {
	key     APIKey
	revoked bool      // revoked in the Store, or through this Service
	checked time.Time // when the read that found it began
}

func newKeyAuthenticator(store Store, clock Clock, ttl time.Duration, limit *authLimiter) *keyAuthenticator {
	return &keyAuthenticator{store: store, clock: clock, ttl: ttl, limit: limit,
		known: make(map[[sha256.Size]byte]knownKey), ends: make(map[string]keyEnd)}
}

// Authenticate implements Authenticator. A request without a key is
// refused as it is; others as authenticateKey says.
func (a *keyAuthenticator) Authenticate(r *http.Request) (Principal, error) {
	token, ok := bearerToken(r)
	if !ok {
		return Principal{}, fmt.Errorf("missing API key; send the header \"Authorization: Bearer lsk_...\" with a key of this service: %w", authReason("missing"))
	}
	return a.authenticateKey(r, token)
}

// authenticateKey returns the principal of the plaintext key that r's
// client sent. A key the Service knows is answered by what it knows (see
// the comment at the top of this file); a malformed key counts as a
// failure of its client, and an unknown key may cost a read only when the
// limiter admits it, counting as a failure when the Store does not have
// it (or has it revoked).
func (a *keyAuthenticator) authenticateKey(r *http.Request, token string) (Principal, error) {
	if !validAPIKey(token) {
		try, err := a.limit.admit(r, false)
		if err != nil {
			return Principal{}, err
		}
		try.Fail()
		try.End()
		return Principal{}, fmt.Errorf("malformed API key; send the header \"Authorization: Bearer lsk_...\" with lsk_ followed by at least 32 letters or digits: %w", authReason("malformed"))
	}
	key, err := a.find(r.Context(), sha256.Sum256([]byte(token)), r)
	if err != nil {
		return Principal{}, err
	}
	return a.principal(&key), nil
}

// AuthenticateKeyFrom returns the principal of a plaintext API key that
// r's client sent other than in an Authorization header (a sign-in form,
// say), authenticated as the same key in r's Authorization header would
// be: a valid key is served whatever r's client did before; an unknown key
// costs a Store read only when the limiter of failed authentications
// ([Config.AuthFailureLimit]) admits r's client, and a malformed, unknown
// or revoked key counts as its failure. It returns an error matching
// ErrUnauthorized when the key is not valid (or the Service authenticates
// with a host's [Config.Authenticator] and has no keys of its own), and a
// *RateLimitError (429 with Retry-After) for an unknown key of a client
// that failed too often.
func (s *Service) AuthenticateKeyFrom(r *http.Request, plaintext string) (Principal, error) {
	if s.keys == nil {
		return Principal{}, errNoOwnKeys
	}
	return s.keys.authenticateKey(r, plaintext)
}

// find returns the valid key with hash, or an error matching
// ErrUnauthorized. An unknown key is limited as r's client's when r is
// not nil (a request); the host's own calls are not limited.
func (a *keyAuthenticator) find(ctx context.Context, hash [sha256.Size]byte, r *http.Request) (APIKey, error) {
	// A failed whole read leaves the keys to be read one by one.
	_ = a.reload(ctx, a.stale)
	if key, ok, err := a.fromKnown(ctx, hash); ok {
		return key, err
	}
	var try *authlimit.Try
	if r != nil {
		t, limited := a.limit.admit(r, true)
		if limited != nil {
			// The key may have been created through another process since
			// the keys were read: let a whole read under way finish, then
			// read them whole, at most once a reloadSpacing for everyone
			// refused.
			a.awaitReload(ctx)
			if key, ok, err := a.fromKnown(ctx, hash); ok {
				return key, err
			}
			if a.reload(ctx, a.spaced) == nil {
				if key, ok, err := a.fromKnown(ctx, hash); ok {
					return key, err
				}
			}
			return APIKey{}, limited
		}
		try = t
		defer try.End()
	}
	key, err := a.read(ctx, hash)
	if errors.Is(err, ErrUnauthorized) {
		try.Fail()
	}
	return key, err
}

// fromKnown answers a key the Service knows: from memory while what it
// knows is younger than the cache's TTL, by a read of the key otherwise.
// ok is false when the key is not known.
func (a *keyAuthenticator) fromKnown(ctx context.Context, hash [sha256.Size]byte) (APIKey, bool, error) {
	now := a.clock.Now()
	a.mu.RLock()
	k, ok := a.known[hash]
	a.mu.RUnlock()
	switch {
	case !ok:
		return APIKey{}, false, nil
	case a.ttl > 0 && now.Before(k.checked.Add(a.ttl)):
		if k.revoked {
			return APIKey{}, true, errRevokedKey
		}
		return k.key, true, nil
	default:
		key, err := a.read(ctx, hash)
		return key, true, err
	}
}

// read reads the key with hash from the Store and records what it found.
func (a *keyAuthenticator) read(ctx context.Context, hash [sha256.Size]byte) (APIKey, error) {
	now := a.clock.Now()
	a.mu.RLock()
	gen := a.gen
	a.mu.RUnlock()
	key, err := a.store.APIKeyByHash(ctx, hash[:])
	if errors.Is(err, ErrNotFound) {
		return APIKey{}, errUnknownKey
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("look up API key: %w", err)
	}
	// The store found the key by its hash; compare anyway, in constant time,
	// so that a store with a loose index cannot let a wrong key through.
	if subtle.ConstantTimeCompare(key.Hash, hash[:]) != 1 {
		return APIKey{}, errUnknownKey
	}
	a.mu.Lock()
	if a.gen == gen {
		a.known[hash] = knownKey{key: key, revoked: key.RevokedAt != nil, checked: now}
	}
	if key.RevokedAt != nil {
		a.ended(key.ID)
	}
	a.mu.Unlock()
	if key.RevokedAt != nil {
		return APIKey{}, errRevokedKey
	}
	return key, nil
}

// errRevokedKey refuses a revoked key.
var errRevokedKey = fmt.Errorf("revoked API key; ask for a new one: %w", authReason("revoked"))

// stale reports whether the keys should be read whole before a request
// is answered: never read, or read longer ago than the cache's TTL (a
// second when the cache is disabled), and not just failed. a.mu is held.
func (a *keyAuthenticator) stale(now time.Time) bool {
	age := a.ttl
	if age <= 0 {
		age = time.Second
	}
	return (a.loaded.IsZero() || now.Sub(a.loaded) >= age) && !now.Before(a.retryAt)
}

// spaced reports whether a refused unknown key may have the keys read
// whole: when none was begun in the last reloadSpacing, for any reason.
// a.mu is held.
func (a *keyAuthenticator) spaced(now time.Time) bool {
	return !now.Before(a.started.Add(reloadSpacing)) && !now.Before(a.retryAt)
}

// always says the keys are to be read whole (the revocation watcher).
func always(time.Time) bool { return true }

// awaitReload waits for the whole read of the keys under way, if any, or
// until ctx is done.
func (a *keyAuthenticator) awaitReload(ctx context.Context) {
	a.mu.RLock()
	ch := a.loading
	a.mu.RUnlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// reload reads the keys whole when need (called with a.mu held) says so,
// or waits for the read already under way, if any, when it does; one
// read serves every caller that needs one meanwhile.
func (a *keyAuthenticator) reload(ctx context.Context, need func(now time.Time) bool) error {
	a.mu.Lock()
	now := a.clock.Now()
	if !need(now) {
		a.mu.Unlock()
		return nil
	}
	if ch := a.loading; ch != nil {
		a.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the API keys: %w", ctx.Err())
		}
	}
	ch := make(chan struct{})
	a.loading, a.forgotten, a.started = ch, nil, now
	a.mu.Unlock()

	keys, err := a.store.ListAPIKeys(ctx)

	a.mu.Lock()
	defer a.mu.Unlock()
	a.loading = nil
	close(ch)
	if err != nil {
		if ctx.Err() == nil {
			a.retryAt = now.Add(reloadRetry)
		}
		return fmt.Errorf("read the API keys: %w", err)
	}
	a.apply(keys, now)
	return nil
}

// apply makes keys, read whole from a read that began at readAt, the keys
// the Service knows, but for those revoked through it meanwhile, which
// stay revoked, and those found one by one since the read began, which
// stay. It ends the principals of the revoked keys. a.mu is held.
func (a *keyAuthenticator) apply(keys []APIKey, readAt time.Time) {
	next := make(map[[sha256.Size]byte]knownKey, len(keys))
	for _, k := range keys {
		if len(k.Hash) != sha256.Size {
			continue
		}
		known := knownKey{key: k, revoked: k.RevokedAt != nil || slices.Contains(a.forgotten, k.ID), checked: readAt}
		next[[sha256.Size]byte(k.Hash)] = known
		if known.revoked {
			a.ended(k.ID)
		}
	}
	for h, k := range a.known {
		if _, ok := next[h]; !ok && !k.checked.Before(readAt) {
			next[h] = k
		}
	}
	a.known, a.loaded, a.forgotten = next, readAt, nil
}

// liveKeys returns the IDs of the valid keys the Service knows.
func (a *keyAuthenticator) liveKeys() map[string]bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	live := make(map[string]bool, len(a.known))
	for _, k := range a.known {
		if !k.revoked {
			live[k.key.ID] = true
		}
	}
	return live
}

// learn makes a key created through this Service known at once.
func (a *keyAuthenticator) learn(key *APIKey) {
	if len(key.Hash) != sha256.Size {
		return
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.known[[sha256.Size]byte(key.Hash)] = knownKey{key: *key, checked: now}
}

// forget marks a key revoked through this Service revoked at once, keeps
// reads under way from recording what they read of it, and closes the
// Done of the key's principals.
func (a *keyAuthenticator) forget(keyID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	a.ended(keyID)
	if a.loading != nil {
		a.forgotten = append(a.forgotten, keyID)
	}
	for h, k := range a.known {
		if k.key.ID == keyID {
			k.revoked = true
			a.known[h] = k
		}
	}
}

// ended closes the Done of the principals of a revoked key. a.mu is held.
func (a *keyAuthenticator) ended(keyID string) {
	if end, ok := a.ends[keyID]; ok {
		delete(a.ends, keyID)
		end.cancel()
	}
}
