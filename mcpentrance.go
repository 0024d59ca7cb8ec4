package lifecycle

import (
	"context"
	"net/http"
	"sync"

	"github.com/tasklifecycle/lifecycle/internal/eventstream"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
)

// This file gives a host that serves another protocol beside the API
// (package mcp) the API's own limits: its bodies read as the API reads
// its own, its streams counted with the API's event streams, and
// everything it holds for a principal ended by the key's revocation, in
// every process sharing the Store, through the tracking the API's streams
// use (revocation.go).

// ReadBody reads r's body as the API's routes read theirs: at most 1 MiB
// (a larger Content-Length is refused before anything is read), under a
// share of [Config.MaxDecodingBytes] shared with the API's bodies, and
// within [Config.BodyReadTimeout], by the wall clock. Its errors are the
// API's: one matching ErrPayloadTooLarge (413), ErrRequestTimeout (408;
// the connection is closed), a *RateLimitError when the budget stays used
// up (429), or a *ValidationError when the body cannot be read; answer
// them with [Service.WriteError]. An empty body is nil. On success the
// caller must call release once, when it no longer needs the body
// decoded; until then its share of the budget is held.
func (s *Service) ReadBody(w http.ResponseWriter, r *http.Request) (raw []byte, release func(), err error) {
	return httpapi.ReadBodyWith(w, r, s.bodies.Read)
}

// Hold is something of a principal that outlasts one request (a session
// or a stream of a host's protocol, a long wait), made by
// [Service.HoldCredential] or [Service.HoldStream]. Its Ended channel is
// closed when the principal's credential ends, so that the host ends what
// it holds. Release it when that ends.
type Hold struct {
	s         *Service
	principal string
	key       *eventstream.Key
	stream    bool // it holds a place among the principal's streams
	ended     context.Context
	end       context.CancelFunc
	stops     []func() bool
	once      sync.Once
}

// HoldCredential registers something principal p holds beyond the request
// r that authenticated it, for revocation: its Ended channel closes when
// p's API key is revoked (at once through this Service, within
// [Config.KeyCacheTTL] when revoked through another process sharing the
// Store; with a host's [Config.Authenticator], when r's credentials are no
// longer accepted on the same check the API's event streams get), when
// p.Done closes or p.ExpiresAt passes, and when the Service closes. It is
// not counted against [Config.MaxStreamsPerKey]: see HoldStream. Call
// Release once when the thing ends.
func (s *Service) HoldCredential(r *http.Request, p *Principal) *Hold {
	h := &Hold{s: s, principal: p.ID, key: s.streamKeys.Watch(p.ID, r)}
	h.ended, h.end = context.WithCancel(context.Background())
	h.after(h.key.Revoked())
	h.after(s.broker.Hub().Context())
	if p.Done != nil {
		if keyEnd := s.keyDone(p); keyEnd != nil {
			h.after(keyEnd)
		} else {
			done := p.Done
			go func() {
				select {
				case <-done:
					h.end()
				case <-h.ended.Done():
				}
			}()
		}
	}
	if !p.ExpiresAt.IsZero() {
		expires := s.clock.After(p.ExpiresAt.Sub(s.clock.Now()))
		go func() {
			select {
			case <-expires:
				h.end()
			case <-h.ended.Done():
			}
		}()
	}
	return h
}

// HoldStream is HoldCredential for a stream: it also takes one of p's
// places among its event streams, which the API's GET
// /task-events/stream counts against [Config.MaxStreamsPerKey]. It
// returns a *RateLimitError (429 rate_limited, with Retry-After) when p
// holds the most streams allowed, and an error matching ErrClosed after
// [Service.Close]. Release the Hold promptly once Ended closes:
// [Service.Close] waits for every stream's place to be given back.
func (s *Service) HoldStream(r *http.Request, p *Principal) (*Hold, error) {
	if err := s.streams.Acquire(r.Context(), p.ID); err != nil {
		return nil, err
	}
	h := s.HoldCredential(r, p)
	h.stream = true
	return h, nil
}

// after ends h when ctx is done.
func (h *Hold) after(ctx context.Context) {
	h.stops = append(h.stops, context.AfterFunc(ctx, h.end))
}

// Ended returns a channel closed when the credential of the Hold's
// principal ends, or the Service closes (see [Service.HoldCredential]),
// and by Release.
func (h *Hold) Ended() <-chan struct{} { return h.ended.Done() }

// Release forgets the Hold and gives back its place among the principal's
// streams. It may be called more than once.
func (h *Hold) Release() {
	h.once.Do(func() {
		for _, stop := range h.stops {
			stop()
		}
		h.end()
		h.s.streamKeys.Unwatch(h.principal, h.key)
		if h.stream {
			h.s.broker.Hub().Release(h.principal)
		}
	})
}

// keyDone returns the context that ends when p's key is revoked or
// expires, as this Service's own keys know it, or nil when p does not
// end (no Done) or the host authenticates (no keys of this Service).
func (s *Service) keyDone(p *Principal) context.Context {
	if p.Done == nil || s.keys == nil {
		return nil
	}
	return s.keys.DoneContext(p.ID, p.Done)
}
