package client_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/memory"
	"github.com/tasklifecycle/lifecycle/client"
	memstore "github.com/tasklifecycle/lifecycle/store/memory"
)

// server is a real Service on SQLite behind an httptest server, with a hook
// in front of the handler and a record of the operations called.
type server struct {
	t       *testing.T
	addr    string
	store   *memstore.Store // outlives the Service: a restart finds what it kept
	svc     *lifecycle.Service
	srv     *httptest.Server
	adapter *memory.Adapter
	admin   string // a key with every scope

	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request, next http.Handler) // nil passes through
	ops  map[string]int                                                  // OpenAPI pattern -> calls
	keys map[string][]string                                             // path -> Idempotency-Keys sent
}

// deployer deploys nothing, successfully.
type deployer struct{}

func (deployer) Deploy(_ context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	return lifecycle.Deployment{ID: "dep_" + req.OperationID, Environment: req.Environment, CommitSHA: req.CommitSHA,
		DeployedAt: lifecycle.NewTimestamp(time.Now())}, nil
}

// newServer starts a server; project "web" has an in-memory code host.
func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, store: memstore.New(), ops: map[string]int{}, keys: map[string][]string{},
		adapter: memory.New(memory.Config{Owner: "acme", Repo: "web"})}
	t.Cleanup(func() { s.store.Close() })
	s.start("127.0.0.1:0")
	_, plaintext, err := s.svc.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "admin", Scopes: allScopes(),
		Actor: lifecycle.Actor{ID: "tester", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	s.admin = plaintext
	t.Cleanup(s.stop)
	return s
}

func allScopes() []lifecycle.Scope {
	return []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeTasksAdmin, lifecycle.ScopeShipWrite,
		lifecycle.ScopeEventsRead, lifecycle.ScopeWebhooksRead, lifecycle.ScopeWebhooksWrite, lifecycle.ScopeReviewsWrite,
		lifecycle.ScopeCIWrite, lifecycle.ScopeKeysAdmin}
}

// start builds and starts a Service on the store, and serves it on addr
// (the same address again after a stop).
func (s *server) start(addr string) {
	t := s.t
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	svc, err := lifecycle.New(lifecycle.Config{
		Store:                      s.store,
		BaseURL:                    "http://" + s.addr,
		Logger:                     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Adapters:                   []lifecycle.AdapterBinding{{Project: "web", Adapter: s.adapter}},
		Deployer:                   deployer{},
		ReviewRouter:               lifecycle.ReviewRules{Default: lifecycle.ReviewPlan{Policy: lifecycle.PolicyAlwaysRequire}},
		AllowPrivateWebhookTargets: true,
		MaxInProgressPerAgent:      1, // tasks in triage, as most here are, are not capped
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	spec := specMux(t)
	api := svc.Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := spec.Handler(r)
		s.mu.Lock()
		s.ops[pattern]++
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			s.keys[r.URL.Path] = append(s.keys[r.URL.Path], k)
		}
		hook := s.hook
		s.mu.Unlock()
		if hook != nil {
			hook(w, r, api)
			return
		}
		api.ServeHTTP(w, r)
	}))
	srv.Listener = ln
	srv.Start()
	s.svc, s.srv = svc, srv
}

// stop closes the Service (ending its streams) and the server; the store
// stays for the next start.
func (s *server) stop() {
	if s.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.svc.Close(ctx); err != nil {
		s.t.Errorf("Close: %v", err)
	}
	s.srv.Close()
	s.svc = nil
}

// setHook puts h in front of the handler.
func (s *server) setHook(h func(w http.ResponseWriter, r *http.Request, next http.Handler)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

// idempotencyKeys returns the keys sent to a path.
func (s *server) idempotencyKeys(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys[path]...)
}

// calledOps returns how often each documented operation was called.
func (s *server) calledOps() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.ops {
		out[k] = v
	}
	return out
}

// client returns a Client of the server with quick retries.
func (s *server) client(t *testing.T, key string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: "http://" + s.addr, APIKey: key, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	specOnce sync.Once
	specOps  []string
	specErr  error
)

// specMux returns a ServeMux whose patterns are the operations of the
// server's OpenAPI document, to name the operation of each request.
func specMux(t *testing.T) *http.ServeMux {
	t.Helper()
	specOnce.Do(func() {
		doc, err := openapi3.NewLoader().LoadFromData(lifecycle.OpenAPIDocument())
		if err != nil {
			specErr = err
			return
		}
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				if op.Extensions["x-served-by"] == "host" {
					continue // a code host's webhook, not the API the client calls
				}
				specOps = append(specOps, method+" "+path)
			}
		}
		sort.Strings(specOps)
	})
	if specErr != nil {
		t.Fatal(specErr)
	}
	mux := http.NewServeMux()
	for _, p := range specOps {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	return mux
}

// taskParams is a valid task of project web.
func taskParams(ident string) lifecycle.CreateTaskParams {
	project := "web"
	return lifecycle.CreateTaskParams{
		Identifier: ident, Title: "Fix the login redirect", Priority: lifecycle.PriorityHigh,
		AcceptanceCriteria: []string{"redirects to /home"},
		Links:              lifecycle.TaskLinks{Issue: "https://issues.example.com/" + ident},
		Context:            lifecycle.TaskContext{Project: &project, Goal: "login works"},
		Labels:             []string{"frontend"},
	}
}

// eventIDs returns the IDs of every event in the store, in order.
func (s *server) eventIDs(t *testing.T) []string {
	t.Helper()
	evs, err := s.store.Events(t.Context(), lifecycle.EventFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}
