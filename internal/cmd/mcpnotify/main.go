// Command mcpnotify measures how soon a subscribed MCP session hears of a
// commit: the time from just before a change of a task is committed
// (through the Service's Go API) to the arrival of
// notifications/resources/updated for the task's resource, at each of
// many sessions of the official Go SDK's client, each on its own
// connection with its own notification stream (GET).
//
//   - spread: every session subscribes to a task of its own, and the
//     tasks change one after another at a fixed rate;
//   - shared: every session subscribes to one task, which changes a few
//     times: each change reaches every session.
//
// Server and clients run in this process, on 127.0.0.1; the run is
// bounded in count and time and stops by itself. The server's Store is
// SQLite in a temporary directory, with the durable default.
//
//	go run ./internal/cmd/mcpnotify                    # 1,000 sessions, both scenarios
//	go run ./internal/cmd/mcpnotify -sessions 200 -rate 100
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/mcp"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

func main() {
	sessions := flag.Int("sessions", 1000, "subscribed sessions")
	rate := flag.Int("rate", 200, "changes per second in the spread scenario")
	rounds := flag.Int("rounds", 20, "changes of the shared task")
	clientKind := flag.String("client", "raw", "the sessions' client: raw (a few lines of HTTP that read the notification stream, so that the server's work is measured) or sdk (the official Go SDK's client, whose decoding of each message costs several times the server's sending of it, on the same cores)")
	timeout := flag.Duration("timeout", 5*time.Minute, "the most the whole run may take")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mcpnotify:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "mcpnotify:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if *clientKind != "raw" && *clientKind != "sdk" {
		fmt.Fprintln(os.Stderr, "mcpnotify: -client must be raw or sdk")
		os.Exit(2)
	}
	if err := run(ctx, *sessions, *rate, *rounds, *clientKind == "sdk"); err != nil {
		fmt.Fprintln(os.Stderr, "mcpnotify:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// bench is the server and its sessions.
type bench struct {
	svc     *lifecycle.Service
	url     string
	key     string
	actor   lifecycle.Actor
	mu      sync.Mutex
	started map[string]time.Time // by resource URI: when its change began
	done    map[string]time.Time // by resource URI: when its change returned, committed
	lat     []time.Duration      // from the change's beginning
	latDone []time.Duration      // from its return
	got     atomic.Int64
	sdk     bool // sessions of the SDK's client, else raw ones
}

// closer is an open session.
type closer interface{ Close() error }

func run(ctx context.Context, sessions, rate, rounds int, useSDK bool) error {
	dir, err := os.MkdirTemp("", "mcpnotify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.New(sqlite.Config{Path: dir + "/bench.db"})
	if err != nil {
		return err
	}
	defer store.Close()
	// Every session is the one key's, each with its notification stream:
	// the key may hold them all, those of both rounds (a raw session ends
	// its connections, not the session).
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1/api", Logger: slog.New(slog.DiscardHandler), MaxStreamsPerKey: 2 * sessions})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	defer svc.Close(context.Background())
	actor := lifecycle.Actor{ID: "bench", Role: lifecycle.RoleUser}
	_, key, err := svc.CreateAPIKey(ctx, lifecycle.CreateAPIKeyParams{Name: "bench", Actor: actor,
		Scopes: []lifecycle.Scope{lifecycle.ScopeTasksRead, lifecycle.ScopeTasksWrite, lifecycle.ScopeEventsRead}})
	if err != nil {
		return err
	}
	h, err := mcp.NewHandler(svc, mcp.Config{MaxSubscriptionsPerSession: 10, MaxSessionsPerKey: 2 * sessions})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b := &bench{svc: svc, url: "http://" + ln.Addr().String(), key: key, actor: actor, started: map[string]time.Time{}, sdk: useSDK}

	// One task per session, started, so that blockers can come and go.
	tasks := make([]string, sessions)
	for i := range tasks {
		t, err := svc.CreateTask(ctx, lifecycle.CreateTaskParams{Identifier: fmt.Sprintf("N-%d", i), Title: "t",
			Links: lifecycle.TaskLinks{Issue: "https://issues.example.com/x"}})
		if err != nil {
			return err
		}
		if _, err := svc.StartTask(ctx, t.ID, lifecycle.StartTaskParams{Actor: actor}); err != nil {
			return err
		}
		tasks[i] = t.ID
	}
	kind := "raw HTTP clients"
	if useSDK {
		kind = "the Go SDK's clients"
	}
	fmt.Printf("mcpnotify: %d sessions of %s, GOMAXPROCS %d\n", sessions, kind, runtimeProcs())

	// spread: session i follows task i.
	cs, err := b.connect(ctx, sessions, func(i int) string { return "lifecycle://tasks/" + tasks[i] })
	if err != nil {
		return err
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for _, id := range tasks {
		<-tick.C
		if err := b.change(ctx, id, 0); err != nil {
			return err
		}
	}
	tick.Stop()
	if err := b.await(ctx, int64(sessions)); err != nil {
		return err
	}
	b.report(fmt.Sprintf("spread: %d changes at %d/s, each to the 1 session subscribed to its task", sessions, rate))
	closeAll(cs)

	// shared: every session follows task 0.
	cs, err = b.connect(ctx, sessions, func(int) string { return "lifecycle://tasks/" + tasks[0] })
	if err != nil {
		return err
	}
	for r := range rounds {
		if err := b.change(ctx, tasks[0], r+1); err != nil { // task 0 is blocked now
			return err
		}
		if err := b.await(ctx, int64(sessions*(r+1))); err != nil {
			return err
		}
	}
	b.report(fmt.Sprintf("shared: %d changes of one task, each to all %d sessions", rounds, sessions))
	closeAll(cs)
	return nil
}

// connect opens n sessions, session i subscribed to uri(i), and resets
// the measures.
func (b *bench) connect(ctx context.Context, n int, uri func(int) string) ([]closer, error) {
	b.mu.Lock()
	b.lat, b.latDone, b.started, b.done = nil, nil, map[string]time.Time{}, map[string]time.Time{}
	b.mu.Unlock()
	b.got.Store(0)
	out := make([]closer, n)
	transport := &http.Transport{MaxIdleConnsPerHost: 4 * n}
	for i := range out {
		if !b.sdk {
			rs, err := b.connectRaw(ctx, &http.Client{Transport: transport}, uri(i))
			if err != nil {
				closeAll(out[:i])
				return nil, fmt.Errorf("session %d: %w", i, err)
			}
			out[i] = rs
			continue
		}
		client := sdk.NewClient(&sdk.Implementation{Name: "mcpnotify", Version: "1"}, &sdk.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) { b.heard(r.Params.URI) },
		})
		cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: b.url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: keyed{b.key, transport}}}, nil)
		if err != nil {
			closeAll(out[:i])
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
		out[i] = cs
		if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri(i)}); err != nil {
			closeAll(out[:i+1])
			return nil, fmt.Errorf("session %d subscribes: %w", i, err)
		}
	}
	return out, nil
}

// change records a blocker on task id, or resolves it (round r), noting
// when the change began.
func (b *bench) change(ctx context.Context, id string, r int) error {
	b.mu.Lock()
	b.started["lifecycle://tasks/"+id] = time.Now()
	b.mu.Unlock()
	var err error
	if r%2 == 0 {
		_, err = b.svc.RecordBlocker(ctx, id, lifecycle.RecordBlockerParams{Reason: "bench", ActionRequired: "x", Actor: b.actor})
	} else {
		_, err = b.svc.ResolveBlocker(ctx, id, lifecycle.ResolveBlockerParams{Actor: b.actor})
	}
	b.mu.Lock()
	b.done["lifecycle://tasks/"+id] = time.Now()
	b.mu.Unlock()
	return err
}

// heard records a notification's latency.
func (b *bench) heard(uri string) {
	now := time.Now()
	b.mu.Lock()
	if start, ok := b.started[uri]; ok {
		b.lat = append(b.lat, now.Sub(start))
	}
	if done, ok := b.done[uri]; ok { // else it came before the call returned
		b.latDone = append(b.latDone, max(0, now.Sub(done)))
	} else {
		b.latDone = append(b.latDone, 0)
	}
	b.mu.Unlock()
	b.got.Add(1)
}

// await waits until n notifications arrived in all, or 30 seconds pass.
func (b *bench) await(ctx context.Context, n int64) error {
	deadline := time.Now().Add(30 * time.Second)
	for b.got.Load() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d notifications arrived", b.got.Load(), n)
		}
		time.Sleep(time.Millisecond) // a load program polls its own counter
	}
	return nil
}

// report prints the latency percentiles.
func (b *bench) report(what string) {
	b.mu.Lock()
	lat, latDone := slices.Clone(b.lat), slices.Clone(b.latDone)
	b.mu.Unlock()
	fmt.Println(what)
	for _, m := range []struct {
		from string
		lat  []time.Duration
	}{{"from just before the change", lat}, {"from the commit (the change's return)", latDone}} {
		slices.Sort(m.lat)
		pct := func(p float64) time.Duration {
			return m.lat[min(len(m.lat)-1, int(p*float64(len(m.lat))))].Round(10 * time.Microsecond)
		}
		fmt.Printf("  %d notifications, %s: p50 %s  p90 %s  p99 %s  max %s\n", len(m.lat), m.from,
			pct(0.50), pct(0.90), pct(0.99), m.lat[len(m.lat)-1].Round(10*time.Microsecond))
	}
}

func closeAll(cs []closer) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Close() // an error: a session the server already ended
		}()
	}
	wg.Wait()
}

// keyed sends the API key with every request.
type keyed struct {
	key  string
	next http.RoundTripper
}

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.next.RoundTrip(r)
}

// runtimeProcs is GOMAXPROCS.
func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// rawSession is a session opened with plain HTTP requests, reading its
// notification stream line by line.
type rawSession struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *rawSession) Close() error {
	r.cancel()
	<-r.done
	return nil
}

// connectRaw opens a session as the transport's specification says
// (initialize, initialized, the GET of its notifications) and subscribes
// it to uri.
func (b *bench) connectRaw(ctx context.Context, client *http.Client, uri string) (*rawSession, error) {
	post := func(session, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", b.url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = http.Header{"Authorization": {"Bearer " + b.key}, "Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s: %s", body, resp.Status)
		}
		return resp, nil
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpnotify","version":"1"}}}`)
	if err != nil {
		return nil, err
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if _, err := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(sctx, "GET", b.url, nil)
	req.Header = http.Header{"Authorization": {"Bearer " + b.key}, "Accept": {"text/event-stream"}, "Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-06-18"}}
	stream, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	rs := &rawSession{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rs.done)
		defer stream.Body.Close()
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.HasPrefix(line, []byte("data: ")) || !bytes.Contains(line, []byte("notifications/resources/updated")) {
				continue
			}
			_, rest, _ := bytes.Cut(line, []byte(`"uri":"`))
			if u, _, ok := bytes.Cut(rest, []byte(`"`)); ok {
				b.heard(string(u))
			}
		}
	}()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":%q}}`, uri)
	if _, err := post(session, body); err != nil {
		rs.Close()
		return nil, err
	}
	return rs, nil
}
