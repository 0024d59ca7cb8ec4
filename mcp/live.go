package mcp

import (
	"context"
	"fmt"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
)

// liveSessions are the sessions that answered initialize, by ID, with the
// principal that opened each: the fast path (fastpath.go) serves only
// these, to their own principal. They bound the sessions of a principal
// and of the Handler (reserve), and close idle sessions, as the SDK's
// StreamableHTTPOptions.SessionTimeout would, counting the requests the
// fast path serves, which the SDK never sees; a session never used after
// its initialize closes after the shorter unused timeout.
type liveSessions struct {
	timeout  time.Duration // 0: never close idle sessions once used
	unused   time.Duration // the idle timeout of a session not used since initialize
	perUser  int           // the most sessions of one principal
	most     int           // the most sessions in all
	mu       sync.RWMutex
	byID     map[string]*liveSession
	byUser   map[string]int // live and pending sessions, by principal
	pending  int            // requests that may open a session, being served
	sessions int            // live sessions
}

// liveSession is one initialized session.
type liveSession struct {
	ss   *sdk.ServerSession
	user string        // the principal's ID
	gone chan struct{} // closed once the session is forgotten

	mu    sync.Mutex
	posts int         // POSTs being served
	used  bool        // a request came after the handshake
	timer *time.Timer // the idle timer; nil when there is none
	hold  *lifecycle.Hold
	ended bool          // the session was forgotten: a hold given now is released
	idle  chan struct{} // closed when the POSTs being served are done; nil unless asked for
}

// drainWait is the longest a session whose credential ended waits for
// its calls under way to answer (they end with the credential too) before
// it closes.
const drainWait = time.Second

func newLiveSessions(cfg *Config) *liveSessions {
	l := &liveSessions{perUser: cfg.MaxSessionsPerKey, most: cfg.MaxSessions,
		byID: map[string]*liveSession{}, byUser: map[string]int{}}
	l.unused = cfg.UnusedSessionTimeout
	if cfg.SessionTimeout > 0 {
		l.timeout = cfg.SessionTimeout
		l.unused = min(l.unused, l.timeout)
	}
	return l
}

// sessionRetryAfter is the Retry-After, in seconds, of a request refused
// for want of a session: the unused timeout frees sessions within it.
const sessionRetryAfter = 60

// reserve takes a place for a session that the request of principal user
// may open (a POST without a session ID), or returns a
// *lifecycle.RateLimitError when user, or the Handler, holds the most
// sessions allowed. Call the returned function once the request is
// served: a session it opened holds a place of its own by then.
func (l *liveSessions) reserve(user string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byUser[user] >= l.perUser:
		return nil, &lifecycle.RateLimitError{RetryAfterSeconds: sessionRetryAfter,
			Message: fmt.Sprintf("This API key already holds %d MCP sessions, the most allowed; end one (DELETE /mcp with its Mcp-Session-Id) or retry later", l.perUser)}
	case l.sessions+l.pending >= l.most:
		return nil, &lifecycle.RateLimitError{RetryAfterSeconds: sessionRetryAfter,
			Message: fmt.Sprintf("The server already holds %d MCP sessions, the most allowed; retry later", l.most)}
	}
	l.byUser[user]++
	l.pending++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.pending--
			l.dropUser(user)
		})
	}, nil
}

// dropUser gives back one place of user. l.mu is held.
func (l *liveSessions) dropUser(user string) {
	if l.byUser[user]--; l.byUser[user] <= 0 {
		delete(l.byUser, user)
	}
}

// middleware records each session whose initialize succeeded, and marks
// a session used by any request after its handshake.
func (l *liveSessions) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		ss, _ := req.GetSession().(*sdk.ServerSession)
		if ss != nil && method != "initialize" && method != "notifications/initialized" {
			if s := l.get(ss.ID()); s != nil {
				s.markUsed(l.timeout)
			}
		}
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil && ss != nil && ss.ID() != "" {
			var user string
			if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
				user = extra.TokenInfo.UserID
			}
			l.add(ss, user)
		}
		return res, err
	}
}

// add records ss, until it ends.
func (l *liveSessions) add(ss *sdk.ServerSession, user string) {
	id := ss.ID()
	l.mu.Lock()
	if _, ok := l.byID[id]; ok {
		l.mu.Unlock()
		return // initialized again
	}
	s := &liveSession{ss: ss, user: user, gone: make(chan struct{})}
	s.timer = time.AfterFunc(l.unused, func() { _ = ss.Close() })
	l.byID[id] = s
	l.byUser[user]++
	l.sessions++
	l.mu.Unlock()
	go func() {
		_ = ss.Wait()
		l.mu.Lock()
		delete(l.byID, id)
		l.dropUser(user)
		l.sessions--
		l.mu.Unlock()
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.ended = true
		hold := s.hold
		s.mu.Unlock()
		if hold != nil {
			hold.Release()
		}
		close(s.gone)
	}()
}

// get returns the live session of an ID, or nil.
func (l *liveSessions) get(id string) *liveSession {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.byID[id]
}

// count returns how many sessions are live.
func (l *liveSessions) count() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.sessions
}

// attach gives the session the hold of its principal's credential: the
// session closes when the credential ends (a revoked key), and the hold is
// released when the session ends. A session that has one already, or has
// ended, releases hold at once.
func (s *liveSession) attach(hold *lifecycle.Hold) {
	s.mu.Lock()
	if s.ended || s.hold != nil {
		s.mu.Unlock()
		hold.Release()
		return
	}
	s.hold = hold
	s.mu.Unlock()
	go func() {
		select {
		case <-hold.Ended():
		case <-s.gone:
			return
		}
		// Calls under way end with the credential (see credentialEnded):
		// let them answer so, then close.
		s.mu.Lock()
		var idle chan struct{}
		if s.posts > 0 {
			s.idle = make(chan struct{})
			idle = s.idle
		}
		s.mu.Unlock()
		if idle != nil {
			t := time.NewTimer(drainWait)
			select {
			case <-idle:
			case <-t.C:
			case <-s.gone:
			}
			t.Stop()
		}
		_ = s.ss.Close()
	}()
}

// credentialEnded returns a channel closed when the credential of the
// session's principal ends (a revoked key), or nil when the session holds
// none.
func (s *liveSession) credentialEnded() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		return nil
	}
	return s.hold.Ended()
}

// markUsed records that the session was used after its handshake: from
// now on it closes after the full idle timeout.
func (s *liveSession) markUsed(timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used {
		return
	}
	s.used = true
	if s.posts == 0 {
		s.restart(timeout)
	}
}

// startPOST pauses the session's idle timer while a POST is served.
func (s *liveSession) startPOST() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil && s.posts == 0 {
		s.timer.Stop()
	}
	s.posts++
}

// endPOST restarts the idle timer after the session's last POST: the
// unused timeout until the session is used after its handshake.
func (s *liveSession) endPOST(l *liveSessions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.posts--; s.posts == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	if s.posts == 0 {
		if s.used {
			s.restart(l.timeout)
		} else {
			s.restart(l.unused)
		}
	}
}

// restart restarts the idle timer for d; 0 stops it for good. s.mu is
// held.
func (s *liveSession) restart(d time.Duration) {
	switch {
	case s.timer == nil:
	case d > 0:
		s.timer.Reset(d)
	default:
		s.timer.Stop()
		s.timer = nil
	}
}
