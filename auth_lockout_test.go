package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

// The failure limiter seen from outside: over real HTTP, a valid key is
// never refused for the failures of its address, while guessing, from one
// address, one network or many, costs a bounded number of Store reads.

// httpAPI calls a Service's API (mounted under /api) over HTTP.
type httpAPI struct {
	t      *testing.T
	base   string       // the server's URL
	client *http.Client // its connections come from one address
	header http.Header  // sent with every request
}

// call sends a request with the bearer key (none when "") and returns
// the status and the JSON body decoded (nil when it is not JSON).
func (a *httpAPI) call(method, path, key string, body any, h http.Header) (int, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(a.t.Context(), method, a.base+"/api"+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for _, hh := range []http.Header{a.header, h} {
		for k, vs := range hh {
			req.Header[k] = vs
		}
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: read the body: %v", method, path, err)
	}
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			a.t.Fatalf("%s %s: %v in %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, out
}

// fromAddress returns a client whose connections to a loopback server
// come from the loopback address ip (any of 127.0.0.0/8 on Linux).
func fromAddress(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// badKey returns the i-th of a mix of bad keys: unknown, malformed and
// revoked.
func badKey(i int, revoked string) string {
	switch i % 5 {
	case 1:
		return "lsk_short"
	case 2:
		return revoked
	default:
		return apitest.UnknownKey(i)
	}
}

// data returns the data member of a body.
func data(body map[string]any) map[string]any {
	d, _ := body["data"].(map[string]any)
	return d
}

// A contract run from one address, after 100 deliberate bad-key probes
// from the same address (the limiter refuses most of them), passes every
// check: every route of the API, with the admin key and a scoped key
// created on the way, answers as it would without the probes, and never
// 429. The run goes through the Service's Handler over real HTTP, as a
// client behind a proxy would (every request from 127.0.0.1).
func TestBadKeysDoNotLockOutTheContract(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	e, _, _ := newShipEnv(t, rc.trust)
	srv := e.serve()
	api := &httpAPI{t: t, base: srv.URL, client: srv.Client()}

	revoked := e.KeyAs(lifecycle.Actor{ID: "gone", Role: lifecycle.RoleUser}, lifecycle.ScopeTasksRead)
	if _, err := e.Svc.RevokeAPIKey(t.Context(), e.keyID("gone")); err != nil {
		t.Fatal(err)
	}
	limited := 0
	for i := range 100 {
		switch status, _ := api.call("GET", "/tasks", badKey(i, revoked), nil, nil); status {
		case http.StatusTooManyRequests:
			limited++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("bad key %d: %d", i, status)
		}
	}
	if limited < 50 {
		t.Fatalf("only %d of the 100 bad keys were limited: the probes did not make the address limited", limited)
	}

	covered := map[string]bool{}
	check := func(pattern, path, key string, body any, h http.Header, want ...int) map[string]any {
		t.Helper()
		method, _, _ := strings.Cut(pattern, " ")
		status, got := api.call(method, path, key, body, h)
		if status == http.StatusTooManyRequests || !slices.Contains(want, status) {
			t.Fatalf("%s (%s) = %d %v, want %v", pattern, path, status, got, want)
		}
		covered[pattern] = true
		return got
	}
	idem := func(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }
	admin := e.Admin

	check("GET /openapi.yaml", "/openapi.yaml", "", nil, nil, http.StatusOK)
	check("GET /healthz", "/healthz", "", nil, nil, http.StatusOK)
	check("GET /readyz", "/readyz", "", nil, nil, http.StatusOK)
	created := data(check("POST /api-keys", "/api-keys", admin, map[string]any{"name": "web agent",
		"scopes": []string{"tasks:read", "tasks:write"}, "actor": map[string]any{"id": "agent-web", "role": "agent"}}, nil, http.StatusCreated))
	agent, agentID := created["key"].(string), created["id"].(string)
	check("GET /api-keys", "/api-keys", admin, nil, nil, http.StatusOK)

	id := data(check("POST /tasks", "/tasks", admin, apitest.TaskBody("ENG-1"), nil, http.StatusCreated))["id"].(string)
	check("GET /tasks", "/tasks", agent, nil, nil, http.StatusOK)
	check("GET /tasks/{id}", "/tasks/"+id, agent, nil, nil, http.StatusOK)
	check("POST /tasks/{id}/start", "/tasks/"+id+"/start", admin, nil, nil, http.StatusOK)
	check("POST /tasks/{id}/blocker", "/tasks/"+id+"/blocker", agent, blockerBody(), nil, http.StatusOK)
	check("POST /tasks/{id}/resolve-blocker", "/tasks/"+id+"/resolve-blocker", agent, map[string]any{"resolution": "secret added"}, nil, http.StatusOK)
	sha := data(check("POST /tasks/{id}/submit", "/tasks/"+id+"/submit", admin, apitest.SubmitBody(), idem("submit-eng-1"), http.StatusAccepted))["headSha"].(string)
	check("POST /tasks/{id}/checks", "/tasks/"+id+"/checks", admin, map[string]any{
		"headSha": sha, "checks": []map[string]any{{"name": "build", "status": "passed"}}}, nil, http.StatusOK)
	check("GET /tasks/{id}/ci-status", "/tasks/"+id+"/ci-status", agent, nil, nil, http.StatusOK)
	check("GET /tasks/{id}/review-feedback", "/tasks/"+id+"/review-feedback", agent, nil, nil, http.StatusOK)
	check("POST /tasks/{id}/reviews", "/tasks/"+id+"/reviews", admin, map[string]any{"outcome": "commented", "body": "Reads well."}, nil, http.StatusCreated)
	op := data(check("POST /tasks/{id}/ship", "/tasks/"+id+"/ship", admin, apitest.ShipBody("merge_only", "staging", sha), idem("ship-eng-1"), http.StatusAccepted))["operationId"].(string)
	check("GET /ship-operations/{operationId}", "/ship-operations/"+op, agent, nil, nil, http.StatusOK)
	// No merge queue is on here: the queue routes answer, not 429.
	check("GET /merge-queues", "/merge-queues", agent, nil, nil, http.StatusOK)
	check("GET /merge-queues/{id}", "/merge-queues/mq_none", agent, nil, nil, http.StatusNotFound)
	check("POST /merge-queues/{id}/pause", "/merge-queues/mq_none/pause", admin, nil, nil, http.StatusNotFound)
	check("POST /merge-queues/{id}/resume", "/merge-queues/mq_none/resume", admin, nil, nil, http.StatusNotFound)
	other := data(check("POST /tasks", "/tasks", admin, apitest.TaskBody("ENG-2"), nil, http.StatusCreated))["id"].(string)
	check("PUT /tasks/{id}/dependencies", "/tasks/"+other+"/dependencies", admin, map[string]any{"dependsOn": []string{}}, nil, http.StatusOK)
	check("POST /tasks/{id}/cancel", "/tasks/"+other+"/cancel", admin, map[string]any{"reason": "not needed"}, nil, http.StatusOK)

	sub := data(check("POST /event-subscriptions", "/event-subscriptions", admin, subBody(rc.url("/hook")), idem("subscribe-hook-1"), http.StatusCreated))["id"].(string)
	check("GET /event-subscriptions", "/event-subscriptions", admin, nil, nil, http.StatusOK)
	check("GET /event-subscriptions/{id}", "/event-subscriptions/"+sub, admin, nil, nil, http.StatusOK)
	check("POST /event-subscriptions/{id}/replay", "/event-subscriptions/"+sub+"/replay", admin, map[string]any{"fromSequence": 0}, idem("replay-hook-1"), http.StatusAccepted)
	var delivery string
	testenv.WaitFor(t, 10*time.Second, "a delivery", func() bool {
		_, list := api.call("GET", "/event-subscriptions/"+sub+"/deliveries", admin, nil, nil)
		if ds, _ := list["data"].([]any); len(ds) > 0 {
			delivery, _ = ds[0].(map[string]any)["deliveryId"].(string)
		}
		return delivery != ""
	})
	check("GET /event-subscriptions/{id}/deliveries", "/event-subscriptions/"+sub+"/deliveries", admin, nil, nil, http.StatusOK)
	check("POST /event-subscriptions/{id}/deliveries/{deliveryId}/retry", "/event-subscriptions/"+sub+"/deliveries/"+delivery+"/retry", admin, nil, nil,
		http.StatusOK, http.StatusAccepted, http.StatusConflict)
	check("POST /event-subscriptions/{id}/enable", "/event-subscriptions/"+sub+"/enable", admin, nil, nil, http.StatusOK)
	check("DELETE /event-subscriptions/{id}", "/event-subscriptions/"+sub, admin, nil, nil, http.StatusNoContent)

	resp, cancel := openStream(t, srv, admin, "", nil)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /task-events/stream = %d, want 200", resp.StatusCode)
	}
	covered["GET /task-events/stream"] = true

	check("DELETE /api-keys/{id}", "/api-keys/"+agentID, admin, nil, nil, http.StatusNoContent)
	check("GET /tasks", "/tasks", agent, nil, nil, http.StatusUnauthorized) // revoked: 401, known without a read

	for pattern := range handlerRoutes(t) {
		if !covered[pattern] {
			t.Errorf("the run does not exercise %s: add it", pattern)
		}
	}
}

// keyStoreCounter counts the Store's reads of API keys, one by one and
// whole, and can make the whole reads fail.
type keyStoreCounter struct {
	lifecycle.Store
	byHash, lists atomic.Int64
	failLists     atomic.Bool
}

func (s *keyStoreCounter) APIKeyByHash(ctx context.Context, hash []byte) (lifecycle.APIKey, error) {
	s.byHash.Add(1)
	return s.Store.APIKeyByHash(ctx, hash)
}

func (s *keyStoreCounter) ListAPIKeys(ctx context.Context) ([]lifecycle.APIKey, error) {
	s.lists.Add(1)
	if s.failLists.Load() {
		return nil, errors.New("test store: the list of keys fails")
	}
	return s.Store.ListAPIKeys(ctx)
}

// newKeyCountingEnv is an env whose Store is a keyStoreCounter.
func newKeyCountingEnv(t *testing.T, mutate ...func(*lifecycle.Config)) (*env, *keyStoreCounter) {
	t.Helper()
	var counter *keyStoreCounter
	wrap := func(c *lifecycle.Config) {
		counter = &keyStoreCounter{Store: c.Store}
		c.Store = counter
	}
	return newEnv(t, append([]func(*lifecycle.Config){wrap}, mutate...)...), counter
}

// A valid key whose cache entry has expired is still served to a limited
// address: it is read again (the whole list of keys, or, when that fails,
// the key by its hash), not refused. So is a key created through another
// process a moment ago, which this Service does not know yet.
func TestExpiredKeyOfALimitedAddressIsServed(t *testing.T) {
	t.Parallel()
	e, store := newKeyCountingEnv(t, func(c *lifecycle.Config) { c.KeyCacheTTL = 5 * time.Second })
	srv := e.serve()
	api := &httpAPI{t: t, base: srv.URL, client: srv.Client()}
	key := e.Key(lifecycle.ScopeTasksRead)
	if status, _ := api.call("GET", "/tasks", key, nil, nil); status != http.StatusOK {
		t.Fatalf("the key before any failure: %d", status)
	}
	for i := range 100 {
		api.call("GET", "/tasks", apitest.UnknownKey(i), nil, nil)
	}
	if status, _ := api.call("GET", "/tasks", apitest.UnknownKey(100), nil, nil); status != http.StatusTooManyRequests {
		t.Fatalf("after 100 bad keys an unknown key is %d, want 429", status)
	}

	e.Clock.Advance(10 * time.Second) // the entry expired; what is known is read whole again
	lists := store.lists.Load()
	if status, _ := api.call("GET", "/tasks", key, nil, nil); status != http.StatusOK {
		t.Errorf("the key once its entry expired: %d, want 200", status)
	}
	if store.lists.Load() == lists {
		t.Error("the expired entry was served without reading the keys again")
	}

	e.Clock.Advance(10 * time.Second)
	store.failLists.Store(true) // the key is read by its hash
	reads := store.byHash.Load()
	if status, _ := api.call("GET", "/tasks", key, nil, nil); status != http.StatusOK {
		t.Errorf("the key once its entry expired, the list of keys failing: %d, want 200", status)
	}
	if store.byHash.Load() != reads+1 {
		t.Errorf("%d reads of the key by its hash, want 1", store.byHash.Load()-reads)
	}
	store.failLists.Store(false)
	e.Clock.Advance(time.Second) // a whole read may be tried again
	if status, _ := api.call("GET", "/tasks", key, nil, nil); status != http.StatusOK {
		t.Errorf("the key once the list of keys works again: %d, want 200", status)
	}

	// A key created through another process: unknown here, and the
	// address is limited again; it is found by reading the keys whole.
	for i := range 30 {
		api.call("GET", "/tasks", apitest.UnknownKey(200+i), nil, nil)
	}
	if status, _ := api.call("GET", "/tasks", apitest.UnknownKey(300), nil, nil); status != http.StatusTooManyRequests {
		t.Fatalf("after 30 more bad keys an unknown key is %d, want 429", status)
	}
	replica, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock})
	if err != nil {
		t.Fatal(err)
	}
	_, fresh, err := replica.CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "new", Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead},
		Actor: lifecycle.Actor{ID: "new", Role: lifecycle.RoleUser}})
	if err != nil {
		t.Fatal(err)
	}
	// The refused bad keys just had the keys read whole; the next whole
	// read is allowed a second later.
	e.Clock.Advance(time.Second)
	if status, _ := api.call("GET", "/tasks", fresh, nil, nil); status != http.StatusOK {
		t.Errorf("a key created through another process, from the limited address: %d, want 200", status)
	}
}

// Rotating through 200 addresses of one network, 20 guesses each, gets
// no more than the network's 80 failures through (4,000 without the
// network's bucket), while a valid key from any of them is served. IPv4
// addresses are real loopback sources; IPv6 ones, 200 /64s of one /48,
// come as a proxy reports them, through Config.ClientAddress.
func TestRotatingAddressesOfOneNetworkIsSlowed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		client func(t *testing.T, base string, i int) *httpAPI
	}{
		{"IPv4 /24", func(t *testing.T, base string, i int) *httpAPI {
			return &httpAPI{t: t, base: base, client: fromAddress(t, fmt.Sprintf("127.0.9.%d", i+1))}
		}},
		{"IPv6 /48", func(t *testing.T, base string, i int) *httpAPI {
			return &httpAPI{t: t, base: base, client: http.DefaultClient,
				header: http.Header{"X-Client": {fmt.Sprintf("2001:db8:7:%x::1", i)}}}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, store := newKeyCountingEnv(t, func(c *lifecycle.Config) {
				c.AuthUnknownKeyReads = 1 << 20 // the network's bucket alone
				c.ClientAddress = func(r *http.Request) string {
					if a := r.Header.Get("X-Client"); a != "" {
						return a
					}
					return r.RemoteAddr
				}
			})
			srv := e.serve()
			if status, _ := tt.client(t, srv.URL, 0).call("GET", "/tasks", e.Admin, nil, nil); status != http.StatusOK { // the keys are read
				t.Fatalf("first request: %d", status)
			}
			reads := store.byHash.Load()
			admitted := 0
			for i := range 200 {
				api := tt.client(t, srv.URL, i)
				for g := range 20 {
					switch status, _ := api.call("GET", "/tasks", apitest.UnknownKey(i*20+g), nil, nil); status {
					case http.StatusUnauthorized:
						admitted++
					case http.StatusTooManyRequests:
					default:
						t.Fatalf("guess %d from address %d: %d", g, i, status)
					}
				}
				if i%50 == 49 {
					if status, _ := api.call("GET", "/tasks", e.Admin, nil, nil); status != http.StatusOK {
						t.Errorf("the valid key from address %d: %d", i, status)
					}
				}
			}
			if admitted != 80 {
				t.Errorf("%d of 4,000 guesses from 200 addresses of one network admitted, want 80", admitted)
			}
			if n := store.byHash.Load() - reads; n != 80 {
				t.Errorf("%d keys read for the guesses, want 80", n)
			}
		})
	}
}

// The process-wide budget bounds the reads of unknown keys, whatever the
// addresses: 1,000 networks guessing at once cost 50 reads (the default
// budget), and 50 more a second later; the keys are read whole at most
// once a second besides. A valid key from any of them is served.
func TestUnknownKeyReadsAreBudgeted(t *testing.T) {
	t.Parallel()
	e, store := newKeyCountingEnv(t, func(c *lifecycle.Config) {
		c.ClientAddress = func(r *http.Request) string { return r.Header.Get("X-Client") }
	})
	srv := e.serve()
	from := func(i int) *httpAPI {
		return &httpAPI{t: t, base: srv.URL, client: srv.Client(), header: http.Header{"X-Client": {fmt.Sprintf("10.%d.%d.1", i>>8, i&255)}}}
	}
	if status, _ := from(0).call("GET", "/tasks", e.Admin, nil, nil); status != http.StatusOK {
		t.Fatalf("first request: %d", status)
	}
	guess := func(round int) (admitted int) {
		for i := range 1000 {
			switch status, _ := from(i).call("GET", "/tasks", apitest.UnknownKey(round*1000+i), nil, nil); status {
			case http.StatusUnauthorized:
				admitted++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("guess %d: %d", i, status)
			}
		}
		return admitted
	}
	reads, lists := store.byHash.Load(), store.lists.Load()
	if n := guess(0); n != 50 {
		t.Errorf("%d of 1,000 guesses from 1,000 networks admitted, want 50", n)
	}
	if n := store.byHash.Load() - reads; n != 50 {
		t.Errorf("%d keys read for 1,000 guesses, want 50", n)
	}
	if status, _ := from(999).call("GET", "/tasks", e.Admin, nil, nil); status != http.StatusOK {
		t.Errorf("a valid key once the budget is spent: %d", status)
	}
	e.Clock.Advance(time.Second)
	reads = store.byHash.Load()
	if n := guess(1); n != 50 {
		t.Errorf("%d guesses admitted a second later, want 50", n)
	}
	if n := store.byHash.Load() - reads; n != 50 {
		t.Errorf("%d keys read a second later, want 50", n)
	}
	if n := store.lists.Load() - lists; n > 2 {
		t.Errorf("the keys were read whole %d times in a second of guessing, want at most 2", n)
	}
}

// modelKey is a key of the randomized test, and what the test knows of it.
type modelKey struct {
	plaintext, id string
	via           int       // the Service it was created through
	created       time.Time // by the clock
	revoked       time.Time // zero while valid
	revokedVia    int
}

// The fast path is a cache of its slow path: for random sequences of key
// creations and revocations through two Services sharing a Store, of
// clock moves that expire what they know, and of requests with valid,
// revoked, unknown and malformed keys from addresses that are often
// limited, each Service's answer agrees with a read of the Store: a valid
// key is served (a key created through the other Service less than a
// second ago may wait a second when its address is limited: see
// reloadSpacing), a revoked one refused at once through the Service that
// revoked it and within KeyCacheTTL through the other, an unknown one
// never served.
func TestKnownKeysAgreeWithTheStore(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			const ttl = 5 * time.Second
			clientAddress := func(r *http.Request) string { return r.Header.Get("X-Client") }
			e := newEnv(t, func(c *lifecycle.Config) {
				c.KeyCacheTTL, c.AuthFailureLimit, c.AuthFailureInterval, c.ClientAddress = ttl, 3, 30*time.Second, clientAddress
			})
			b, err := lifecycle.New(lifecycle.Config{Store: e.Store, BaseURL: apitest.BaseURL, Clock: e.Clock, KeyCacheTTL: ttl,
				AuthFailureLimit: 3, AuthFailureInterval: 30 * time.Second, ClientAddress: clientAddress, Logger: e.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			startService(t, b) // b also reads the keys every KeyCacheTTL/2 in the background
			bMux := http.NewServeMux()
			bMux.Handle("/api/", http.StripPrefix("/api", b.Handler()))
			services := []*lifecycle.Service{e.Svc, b}
			handlers := []http.Handler{e.Host, bMux}

			rng := rand.New(rand.NewPCG(seed, seed))
			var keys []*modelKey
			unknown := 0
			seen := map[string]int{} // answers by kind of key, so that the run shows it covered each
			defer func() {
				t.Logf("answers: %v", seen)
				for _, kind := range []string{"valid 200", "revoked 401", "unknown 401", "unknown 429"} {
					if seen[kind] == 0 {
						t.Errorf("no %s in the run", kind)
					}
				}
			}()
			for step := range 600 {
				now := e.Clock.Now()
				switch op := rng.IntN(20); {
				case op < 3: // create
					via := rng.IntN(2)
					k, plaintext, err := services[via].CreateAPIKey(t.Context(), lifecycle.CreateAPIKeyParams{Name: "k",
						Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead}, Actor: lifecycle.Actor{ID: "u", Role: lifecycle.RoleUser}})
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, &modelKey{plaintext: plaintext, id: k.ID, via: via, created: now})
				case op < 5 && len(keys) > 0: // revoke
					k := keys[rng.IntN(len(keys))]
					if !k.revoked.IsZero() {
						continue
					}
					k.revokedVia = rng.IntN(2)
					if _, err := services[k.revokedVia].RevokeAPIKey(t.Context(), k.id); err != nil {
						t.Fatal(err)
					}
					k.revoked = now
				case op < 7: // time passes
					e.Clock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
				default: // a request
					via := rng.IntN(2)
					var k *modelKey
					plaintext := ""
					switch kind := rng.IntN(10); {
					case kind < 6 && len(keys) > 0:
						k = keys[rng.IntN(len(keys))]
						plaintext = k.plaintext
					case kind < 9:
						unknown++
						plaintext = apitest.UnknownKey(unknown)
					default:
						plaintext = "lsk_short"
					}
					addr := fmt.Sprintf("198.51.%d.%d", 100+rng.IntN(2), 1+rng.IntN(3)) // few addresses: often limited
					req := httptest.NewRequestWithContext(t.Context(), "GET", "/api/tasks", nil)
					req.Header.Set("Authorization", "Bearer "+plaintext)
					req.Header.Set("X-Client", addr)
					rec := httptest.NewRecorder()
					handlers[via].ServeHTTP(rec, req)
					got := rec.Code

					// The slow path: what the Store says of the key.
					stored, err := e.Store.APIKeyByHash(t.Context(), lifecycle.HashAPIKey(plaintext))
					switch {
					case errors.Is(err, lifecycle.ErrNotFound):
						seen[fmt.Sprint("unknown ", got)]++
						if got != http.StatusUnauthorized && got != http.StatusTooManyRequests {
							t.Fatalf("step %d: an unknown key through %d: %d", step, via, got)
						}
					case err != nil:
						t.Fatal(err)
					case stored.RevokedAt == nil:
						seen[fmt.Sprint("valid ", got)]++
						late := k.via != via && now.Sub(k.created) < time.Second
						if got != http.StatusOK && (got != http.StatusTooManyRequests || !late) {
							t.Fatalf("step %d: a valid key (created through %d %s ago) through %d: %d %s",
								step, k.via, now.Sub(k.created), via, got, rec.Body)
						}
					default:
						seen[fmt.Sprint("revoked ", got)]++
						mayServe := k.revokedVia != via && now.Sub(k.revoked) < ttl
						mayLimit := k.via != via // never known here: an unknown key
						switch {
						case got == http.StatusOK && !mayServe:
							t.Fatalf("step %d: a key revoked through %d %s ago served through %d", step, k.revokedVia, now.Sub(k.revoked), via)
						case got == http.StatusTooManyRequests && !mayLimit:
							t.Fatalf("step %d: a revoked key this Service knows answered 429", step)
						case got != http.StatusOK && got != http.StatusUnauthorized && got != http.StatusTooManyRequests:
							t.Fatalf("step %d: a revoked key: %d", step, got)
						}
					}
				}
			}
		})
	}
}
