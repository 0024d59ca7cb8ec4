package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
)

// The resources: each task, its review feedback, its CI status and where
// its change is in a merge queue.
const (
	uriPrefix          = "lifecycle://tasks/"
	reviewSuffix       = "/review-feedback"
	ciSuffix           = "/ci-status"
	queueSuffix        = "/merge-queue"
	taskTemplate       = uriPrefix + "{id}"
	reviewTemplate     = uriPrefix + "{id}" + reviewSuffix
	ciTemplate         = uriPrefix + "{id}" + ciSuffix
	queueTemplate      = uriPrefix + "{id}" + queueSuffix
	resourceMIMEType   = "application/json"
	notificationsKept  = 32 // per session, for a notification stream (re)connecting late
	notifyWorkers      = 4  // goroutines that send resource updates
	resourceReadScope  = lifecycle.ScopeTasksRead
	resourceWatchScope = lifecycle.ScopeEventsRead
)

// resourceKind says which resource of a task a URI names.
type resourceKind int

const (
	kindTask resourceKind = iota
	kindReview
	kindCI
	kindQueue
)

// kinds are every resource of a task, in the order notifications go out.
var kinds = [...]resourceKind{kindTask, kindReview, kindCI, kindQueue}

// uri returns the URI of the resource of kind k of task id.
func (k resourceKind) uri(id string) string {
	switch k {
	case kindReview:
		return uriPrefix + id + reviewSuffix
	case kindCI:
		return uriPrefix + id + ciSuffix
	case kindQueue:
		return uriPrefix + id + queueSuffix
	}
	return uriPrefix + id
}

// parseURI returns the task and the kind of resource a URI names.
func parseURI(uri string) (string, resourceKind, bool) {
	rest, ok := strings.CutPrefix(uri, uriPrefix)
	if !ok || rest == "" {
		return "", 0, false
	}
	kind := kindTask
	if id, ok := strings.CutSuffix(rest, reviewSuffix); ok {
		rest, kind = id, kindReview
	} else if id, ok := strings.CutSuffix(rest, ciSuffix); ok {
		rest, kind = id, kindCI
	} else if id, ok := strings.CutSuffix(rest, queueSuffix); ok {
		rest, kind = id, kindQueue
	}
	if rest == "" || strings.ContainsAny(rest, "/?#") {
		return "", 0, false
	}
	return rest, kind, true
}

// addResources registers the resource templates.
func (h *Handler) addResources(server *sdk.Server) {
	server.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "task", Title: "Task", URITemplate: taskTemplate, MIMEType: resourceMIMEType,
		Description: "A task in full, as GET /tasks/{id} answers it: {data, availableActions, meta}. " +
			"Subscribe to be told when it changes.",
	}, h.readResource)
	server.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "review-feedback", Title: "Review feedback", URITemplate: reviewTemplate, MIMEType: resourceMIMEType,
		Description: "The review decision and reviews of a task's latest submission, as GET /tasks/{id}/review-feedback answers them.",
	}, h.readResource)
	server.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "ci-status", Title: "CI status", URITemplate: ciTemplate, MIMEType: resourceMIMEType,
		Description: "The CI of a task's head commit, as GET /tasks/{id}/ci-status answers it.",
	}, h.readResource)
	server.AddResourceTemplate(&sdk.ResourceTemplate{
		Name: "merge-queue", Title: "Merge queue status", URITemplate: queueTemplate, MIMEType: resourceMIMEType,
		Description: "Where a task's shipped change is in a merge queue (its queue, entry and candidate with its checks), " +
			"or its last ship operation once it left the queue, as the tool get_merge_queue_status answers it. " +
			"Subscribe to be told when it changes.",
	}, h.readResource)
}

// readResource reads a task, its review feedback, its CI status or its
// merge queue status.
func (h *Handler) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	id, kind, ok := parseURI(uri)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	p, err := principalOf(req.Extra)
	if err == nil {
		err = needScope(p, resourceReadScope, "Reading "+uri)
	}
	if err != nil {
		return nil, h.rpcError(ctx, uri, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CallTimeout)
	defer cancel()
	var answer any
	switch kind {
	case kindTask:
		// get_task's standard answer, from the Service's task cache.
		b, err := h.svc.EncodedTask(ctx, id, formStandard, encodeStandard)
		if err != nil {
			return nil, h.rpcError(ctx, uri, err)
		}
		answer = json.RawMessage(unpackAnswer(b).raw)
	case kindReview:
		fb, actions, err := h.svc.ReviewFeedback(ctx, id)
		if err != nil {
			return nil, h.rpcError(ctx, uri, err)
		}
		answer = dataAnswer[*lifecycle.ReviewFeedback]{&fb, nonNil(actions)}
	case kindCI:
		st, actions, err := h.svc.CIStatus(ctx, id)
		if err != nil {
			return nil, h.rpcError(ctx, uri, err)
		}
		answer = dataAnswer[*lifecycle.CIStatus]{&st, nonNil(actions)}
	case kindQueue:
		st, err := h.queueStatus(ctx, id)
		if err != nil {
			return nil, h.rpcError(ctx, uri, err)
		}
		answer = st
	}
	raw, err := encodeJSON(answer)
	if err != nil {
		return nil, h.rpcError(ctx, uri, err)
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: resourceMIMEType, Text: string(raw)}}}, nil
}

// rpcError is the JSON-RPC error of a resource request that failed: a
// missing task is the SDK's resource-not-found error, invalid parameters
// -32602; anything else -32000. Its data is the API's error body.
func (h *Handler) rpcError(ctx context.Context, uri string, err error) error {
	status, body := h.svc.APIError(err)
	if status == http.StatusNotFound {
		return sdk.ResourceNotFoundError(uri)
	}
	if status >= 500 && status != http.StatusServiceUnavailable {
		h.log.ErrorContext(ctx, "mcp: resource request failed", "uri", uri, "err", err)
	}
	code := int64(-32000)
	if status == http.StatusBadRequest {
		code = jsonrpc.CodeInvalidParams
	}
	data, _ := json.Marshal(body)
	return &jsonrpc.Error{Code: code, Message: body.Error.Code + ": " + body.Error.Message, Data: data}
}

// subscriptions are the resources the sessions subscribed to, and the
// watches of their tasks: one per task however many sessions and URIs,
// fed by the Service's broker; each event of a task becomes
// notifications/resources/updated for each subscribed URI of the task.
type subscriptions struct {
	h *Handler

	mu       sync.Mutex
	sessions map[*sdk.ServerSession]*sessionSubs // the subscriptions of each session
	tasks    map[string]*taskSubs                // by task ID
	started  bool

	// The tasks to notify, under a lock of their own, so that the watches'
	// function never waits for a subscription being made.
	queueMu sync.Mutex
	pending map[string]bool // tasks with an event not yet notified
	queue   []string        // pending, in the order the events came
	wake    chan struct{}
}

// taskSubs are the subscriptions to the resources of one task.
type taskSubs struct {
	watch   *lifecycle.TaskWatch
	uris    [len(kinds)]int // subscribing sessions per kind
	servers map[int]int     // subscriptions per server (its index in Handler.servers)
	total   int
}

// sessionSubs are the subscriptions of one session, on one server.
type sessionSubs struct {
	server int // its index in Handler.servers
	uris   map[string]bool
}

func newSubscriptions(h *Handler) *subscriptions {
	return &subscriptions{h: h, sessions: map[*sdk.ServerSession]*sessionSubs{}, tasks: map[string]*taskSubs{},
		pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// subscribeOn returns the SubscribeHandler of the server of index server.
func (s *subscriptions) subscribeOn(server int) func(context.Context, *sdk.SubscribeRequest) error {
	return func(ctx context.Context, req *sdk.SubscribeRequest) error { return s.subscribe(ctx, req, server) }
}

// subscribe checks a resources/subscribe request made on the server of
// index server; the SDK records it when it returns nil.
func (s *subscriptions) subscribe(ctx context.Context, req *sdk.SubscribeRequest, server int) error {
	uri := req.Params.URI
	id, kind, ok := parseURI(uri)
	if !ok {
		return sdk.ResourceNotFoundError(uri)
	}
	p, err := principalOf(req.Extra)
	if err == nil {
		err = needScope(p, resourceWatchScope, "Subscribing to "+uri)
	}
	if err != nil {
		return s.h.rpcError(ctx, uri, err)
	}
	read, cancel := context.WithTimeout(ctx, s.h.cfg.CallTimeout)
	defer cancel()
	if _, err := s.h.svc.Task(read, id); err != nil {
		return s.h.rpcError(ctx, uri, err)
	}
	sess := req.Session
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.sessions[sess]
	if mine != nil && mine.uris[uri] {
		return nil // already subscribed
	}
	if mine != nil && len(mine.uris) >= s.h.cfg.MaxSubscriptionsPerSession {
		return s.h.rpcError(ctx, uri, &lifecycle.RateLimitError{RetryAfterSeconds: 1,
			Message: fmt.Sprintf("This session already holds %d subscriptions, the most allowed; unsubscribe from one first", len(mine.uris))})
	}
	ts := s.tasks[id]
	if ts == nil {
		ts = &taskSubs{servers: map[int]int{}}
		w, err := s.h.svc.WatchTask(context.Background(), id, func(e *lifecycle.Event) { s.changed(e.TaskID) })
		if err != nil {
			return s.h.rpcError(ctx, uri, err)
		}
		ts.watch = w
		s.tasks[id] = ts
	}
	if mine == nil {
		mine = &sessionSubs{server: server, uris: map[string]bool{}}
		s.sessions[sess] = mine
		// A session that ends without unsubscribing drops its
		// subscriptions (the SDK forgets them without telling).
		go func() {
			_ = sess.Wait()
			s.dropSession(sess)
		}()
	}
	mine.uris[uri] = true
	ts.uris[kind]++
	ts.servers[server]++
	ts.total++
	if !s.started {
		s.started = true
		for range notifyWorkers {
			go s.notify()
		}
	}
	return nil
}

// unsubscribe forgets a subscription of the session.
func (s *subscriptions) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mine := s.sessions[req.Session]; mine != nil && mine.uris[req.Params.URI] {
		delete(mine.uris, req.Params.URI)
		s.forgetLocked(req.Params.URI, mine.server)
	}
	return nil
}

// dropSession forgets every subscription of a session that ended.
func (s *subscriptions) dropSession(sess *sdk.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if mine := s.sessions[sess]; mine != nil {
		for uri := range mine.uris {
			s.forgetLocked(uri, mine.server)
		}
	}
	delete(s.sessions, sess)
}

// forgetLocked counts one subscription of uri, on the server of index
// server, fewer, stopping its task's watch with the last. s.mu is held.
func (s *subscriptions) forgetLocked(uri string, server int) {
	id, kind, _ := parseURI(uri)
	ts := s.tasks[id]
	if ts == nil {
		return
	}
	ts.uris[kind]--
	if ts.servers[server]--; ts.servers[server] == 0 {
		delete(ts.servers, server)
	}
	if ts.total--; ts.total == 0 {
		ts.watch.Stop()
		delete(s.tasks, id)
	}
}

// subscribed returns the subscribed URIs of a task, and the servers whose
// sessions subscribed to them.
func (s *subscriptions) subscribed(id string) (uris []string, servers []*sdk.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.tasks[id]
	if ts == nil {
		return nil, nil
	}
	for _, k := range kinds {
		if ts.uris[k] > 0 {
			uris = append(uris, k.uri(id))
		}
	}
	for i := range ts.servers {
		servers = append(servers, s.h.servers[i])
	}
	return uris, servers
}

// changed queues the notifications of an event of task id. It is the
// watch's function: it never blocks, and events of a task that come
// before its notifications went out are merged.
func (s *subscriptions) changed(id string) {
	s.queueMu.Lock()
	if !s.pending[id] {
		s.pending[id] = true
		s.queue = append(s.queue, id)
	}
	s.queueMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next takes the next task to notify, or "".
func (s *subscriptions) next() string {
	s.queueMu.Lock()
	defer s.queueMu.Unlock()
	if len(s.queue) == 0 {
		return ""
	}
	id := s.queue[0]
	s.queue[0] = ""
	s.queue = s.queue[1:]
	delete(s.pending, id)
	if len(s.queue) > 0 { // more for the other workers
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return id
}

// notify sends the notifications of queued tasks until the Service
// closes. Several run at once, so that a session slow to take its
// notification (bounded by Config.WriteTimeout) holds up the tasks of the
// others less.
func (s *subscriptions) notify() {
	for {
		select {
		case <-s.wake:
		case <-s.h.svc.Done():
			return
		}
		for id := s.next(); id != ""; id = s.next() {
			var wg sync.WaitGroup
			uris, servers := s.subscribed(id)
			for _, uri := range uris {
				for _, server := range servers {
					wg.Go(func() {
						err := server.ResourceUpdated(context.Background(), &sdk.ResourceUpdatedNotificationParams{URI: uri})
						if err != nil && !errors.Is(err, context.Canceled) {
							s.h.log.Warn("mcp: notify resource updated", "uri", uri, "err", err)
						}
					})
				}
			}
			wg.Wait()
		}
	}
}

// waitLimit bounds the wait_for_task_change calls that wait at once, per
// principal.
type waitLimit struct {
	max   int
	mu    sync.Mutex
	count map[string]int
}

func newWaitLimit(max int) *waitLimit { return &waitLimit{max: max, count: map[string]int{}} }

// acquire takes a place for principal id, or returns a *RateLimitError;
// call release when the wait ends.
func (l *waitLimit) acquire(id string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.count[id] >= l.max {
		return nil, &lifecycle.RateLimitError{RetryAfterSeconds: 1,
			Message: fmt.Sprintf("This API key already has %d calls of wait_for_task_change waiting, the most allowed; retry when one has answered", l.max)}
	}
	l.count[id]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.count[id]--; l.count[id] == 0 {
			delete(l.count, id)
		}
	}, nil
}
