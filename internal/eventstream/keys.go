package eventstream

import (
	"context"
	"net/http"
	"sync"
)

// Keys tracks the principals that hold open event streams (and whatever
// else a host holds for them), so that revoking a key ends its streams: at
// once when revoked through this Service, and within Config.KeyCacheTTL
// when revoked through another process sharing the Store (the root's
// Service.watchRevocations checks them). Its zero value is ready to use.
type Keys struct {
	mu   sync.Mutex
	open map[string]*Key // by principal ID
}

// Key is a principal's entry among the keys of open streams.
type Key struct {
	streams int
	revoked context.Context // cancelled on revocation, by revoke
	revoke  context.CancelFunc
	req     *http.Request // the credentials, to check again with a host's Authenticator
}

// Revoked returns a context cancelled when the key is revoked.
func (sk *Key) Revoked() context.Context { return sk.revoked }

// Watch registers a stream of principal, opened by r, and returns its
// entry, whose Revoked context is cancelled when the key is revoked. Call
// Unwatch once when the stream ends.
func (k *Keys) Watch(principal string, r *http.Request) *Key {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.open == nil {
		k.open = make(map[string]*Key)
	}
	sk := k.open[principal]
	if sk == nil {
		sk = &Key{req: r.Clone(context.Background())}
		sk.revoked, sk.revoke = context.WithCancel(context.Background())
		sk.req.Body = http.NoBody
		k.open[principal] = sk
	}
	sk.streams++
	return sk
}

// Unwatch forgets a stream of principal that Watch registered as sk.
func (k *Keys) Unwatch(principal string, sk *Key) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk.streams--; sk.streams == 0 && k.open[principal] == sk {
		delete(k.open, principal)
	}
}

// Revoke ends the streams of principal. Streams opened after this are
// watched afresh (and are refused by authentication anyway). With the
// Service's own keys, forget the key first (keyauth.Keys.Forget): a
// parked stream of an API key is woken by its Done, not by this (see
// Stream.Park).
func (k *Keys) Revoke(principal string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk := k.open[principal]; sk != nil {
		delete(k.open, principal)
		sk.revoke()
	}
}

// Snapshot returns the principals with open streams and their requests.
func (k *Keys) Snapshot() map[string]*http.Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]*http.Request, len(k.open))
	for p, sk := range k.open {
		out[p] = sk.req
	}
	return out
}
