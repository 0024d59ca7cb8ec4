package mcp

import (
	"context"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// liveSessions are the sessions that answered initialize, by ID, with the
// principal that opened each: the fast path (fastpath.go) serves only
// these, to their own principal. They also close idle sessions, as the
// SDK's StreamableHTTPOptions.SessionTimeout would, counting the requests
// the fast path serves, which the SDK never sees.
type liveSessions struct {
	timeout time.Duration // 0: never close idle sessions
	mu      sync.RWMutex
	byID    map[string]*liveSession
}

// liveSession is one initialized session.
type liveSession struct {
	ss   *sdk.ServerSession
	user string        // the principal's ID
	gone chan struct{} // closed once the session is forgotten

	mu    sync.Mutex
	posts int         // POSTs being served
	timer *time.Timer // the idle timer; nil when there is none
}

func newLiveSessions(timeout time.Duration) *liveSessions {
	return &liveSessions{timeout: timeout, byID: map[string]*liveSession{}}
}

// middleware records each session whose initialize succeeded.
func (l *liveSessions) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil {
			if ss, ok := req.GetSession().(*sdk.ServerSession); ok && ss.ID() != "" {
				var user string
				if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
					user = extra.TokenInfo.UserID
				}
				l.add(ss, user)
			}
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
	if l.timeout > 0 {
		s.timer = time.AfterFunc(l.timeout, func() { _ = ss.Close() })
	}
	l.byID[id] = s
	l.mu.Unlock()
	go func() {
		_ = ss.Wait()
		l.mu.Lock()
		delete(l.byID, id)
		l.mu.Unlock()
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		s.mu.Unlock()
		close(s.gone)
	}()
}

// get returns the live session of an ID, or nil.
func (l *liveSessions) get(id string) *liveSession {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.byID[id]
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

// endPOST restarts the idle timer after the session's last POST.
func (s *liveSession) endPOST(timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.posts--; s.posts == 0 && s.timer != nil {
		s.timer.Reset(timeout)
	}
}
