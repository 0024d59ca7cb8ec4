package lifecycle

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// errKeyRevoked ends an event stream whose API key was revoked.
var errKeyRevoked = errors.New("the stream's API key was revoked")

// revokedComment is the last thing a stream ended by revocation sends: a
// comment saying why, before the connection closes. The client's next
// attempt gets 401.
const revokedComment = ": " + keyRevokedNote + "\n\n"

// streamKeys tracks the principals that hold open event streams, so that
// revoking a key ends its streams: at once when revoked through this
// Service, and within Config.KeyCacheTTL when revoked through another
// process sharing the Store (see Service.watchRevocations).
type streamKeys struct {
	mu   sync.Mutex
	open map[string]*streamKey // by principal ID
}

type streamKey struct {
	streams int
	revoked context.Context // cancelled on revocation, by revoke
	revoke  context.CancelFunc
	req     *http.Request // the credentials, to check again with a host's Authenticator
}

// watch registers a stream of principal, opened by r, and returns its
// entry, whose revoked context is cancelled when the key is revoked. Call unwatch
// once when the stream ends.
func (k *streamKeys) watch(principal string, r *http.Request) *streamKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.open == nil {
		k.open = make(map[string]*streamKey)
	}
	sk := k.open[principal]
	if sk == nil {
		sk = &streamKey{req: r.Clone(context.Background())}
		sk.revoked, sk.revoke = context.WithCancel(context.Background())
		sk.req.Body = http.NoBody
		k.open[principal] = sk
	}
	sk.streams++
	return sk
}

// unwatch forgets a stream of principal that watch registered as sk.
func (k *streamKeys) unwatch(principal string, sk *streamKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk.streams--; sk.streams == 0 && k.open[principal] == sk {
		delete(k.open, principal)
	}
}

// revoke ends the streams of principal. Streams opened after this are
// watched afresh (and are refused by authentication anyway). With the
// Service's own keys, forget the key first (keyauth.Keys.Forget): a
// parked stream of an API key is woken by its Done, not by this (see
// stream.Park).
func (k *streamKeys) revoke(principal string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if sk := k.open[principal]; sk != nil {
		delete(k.open, principal)
		sk.revoke()
	}
}

// snapshot returns the principals with open streams and their requests.
func (k *streamKeys) snapshot() map[string]*http.Request {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]*http.Request, len(k.open))
	for p, sk := range k.open {
		out[p] = sk.req
	}
	return out
}

// revocationInterval is how often the Service checks whether the keys of
// open streams were revoked elsewhere: half of KeyCacheTTL, so that a
// stream ends within KeyCacheTTL of a revocation by another process; every
// second when the cache is disabled.
func (s *Service) revocationInterval() time.Duration {
	if s.cfg.KeyCacheTTL > 0 {
		return max(s.cfg.KeyCacheTTL/2, 10*time.Millisecond)
	}
	return time.Second
}

// watchRevocations ends the streams of keys revoked through other
// processes sharing the Store, and keeps the keys the Service knows
// current, until ctx is done.
func (s *Service) watchRevocations(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(s.revocationInterval()):
		}
		s.checkRevocations(ctx)
	}
}

// checkRevocations checks the keys of open streams once. With the default
// Authenticator it reads the keys whole from the Store (one query), which
// keeps the keys the Service knows current (see package keyauth) and closes
// the Done of every revoked key's principals, and ends the streams of
// keys no longer valid; with a host's, it authenticates each principal's
// request again, and a request it now refuses as unauthorized counts as
// revoked.
func (s *Service) checkRevocations(ctx context.Context) {
	if s.keys != nil {
		if err := s.keys.ReadAll(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "read the API keys to find those revoked by other processes", "err", err)
			}
			return
		}
		open := s.streamKeys.snapshot()
		if len(open) == 0 {
			return
		}
		live := s.keys.Live()
		for p := range open {
			if !live[p] {
				s.endRevoked(p)
			}
		}
		return
	}
	open := s.streamKeys.snapshot()
	if len(open) == 0 {
		return
	}
	for p, r := range open {
		got, err := s.auth.Authenticate(r.WithContext(ctx))
		if (err != nil && errors.Is(err, ErrUnauthorized)) || (err == nil && got.ID != p) {
			s.endRevoked(p)
		}
	}
}

// endRevoked ends the streams of a revoked principal and forgets its key.
func (s *Service) endRevoked(principal string) {
	if s.keys != nil {
		s.keys.Forget(principal)
	}
	s.streamKeys.revoke(principal)
	s.log.Info("event streams of a revoked API key ended", "principal", principal)
}
