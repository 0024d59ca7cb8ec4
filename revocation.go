package lifecycle

import (
	"context"
	"errors"
	"time"
)

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
		open := s.streamKeys.Snapshot()
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
	open := s.streamKeys.Snapshot()
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
	s.streamKeys.Revoke(principal)
	s.log.Info("event streams of a revoked API key ended", "principal", principal)
}
