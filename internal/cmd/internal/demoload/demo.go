// Package demoload runs the demo server (examples/demo) as a process on
// loopback and drives it over HTTP as agents, stream consumers and
// webhook receivers would: the load behind the /metrics benchmark
// (internal/cmd/metricsbench) and the dashboard's screenshot
// (internal/cmd/dashshot). It is for those programs only.
package demoload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AdminKey is the demo's admin key in every run.
const AdminKey = "lsk_demoloaddemoloaddemoloaddemoload0"

// Build builds the demo from ./examples/demo (run from the repository's
// root) into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "demo")
	build := exec.Command("go", "build", "-o", bin, "./examples/demo")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the demo (run from the repository root): %w", err)
	}
	return bin, nil
}

// Demo is a demo process on a port of 127.0.0.1.
type Demo struct {
	// Base is the demo's base URL.
	Base string
	// Metrics is the URL of its GET /metrics, on a listener of its own
	// (-metrics-addr).
	Metrics string
	// Client sends API requests; event streams use a client of their own.
	Client *http.Client

	cmd    *exec.Cmd
	exited chan struct{}
	log    *lockedBuffer
}

// Options say how to start the demo.
type Options struct {
	// Bin is the demo binary (see Build).
	Bin string
	// Data is its data directory.
	Data string
	// Env holds environment variables beside this process's own.
	Env []string
	// Args are flags beside -addr, -metrics-addr and -data.
	Args []string
	// Wrapper, when set, is a command that runs the demo's, such as
	// taskset -c 1 (which then runs the demo in its own process).
	Wrapper []string
}

// Start starts the demo on a free port of 127.0.0.1, its metrics on
// another, and returns once GET /readyz answers 200.
func Start(o Options) (*Demo, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	argv := append(append(append([]string{}, o.Wrapper...), o.Bin, "-addr", addr, "-metrics-addr", metricsAddr, "-data", o.Data), o.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	log := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, log
	// Secrets through the environment, never on the command line.
	cmd.Env = append(append(os.Environ(), "LIFECYCLE_ADMIN_KEY="+AdminKey), o.Env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the demo: %w", err)
	}
	d := &Demo{Base: "http://" + addr, Metrics: "http://" + metricsAddr + "/metrics", cmd: cmd, exited: make(chan struct{}), log: log,
		Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	go func() { _ = cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return nil, fmt.Errorf("the demo exited at start: %s", log.String())
		default:
		}
		if resp, err := d.Client.Get(d.Base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.Stop()
	return nil, errors.New("the demo was not ready within 60 s")
}

// freePort returns an address of 127.0.0.1 with a port free now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Stop stops the demo with SIGINT, as Ctrl-C does, and waits for it to
// exit (SIGKILL after 20 s).
func (d *Demo) Stop() {
	_ = d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// CPUTime returns the processor time the demo has used so far (user and
// system), read from /proc on Linux; false elsewhere.
func (d *Demo) CPUTime() (time.Duration, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's name, which is in parentheses:
	// utime and stime are the 12th and 13th, in clock ticks of 1/100 s.
	_, rest, ok := strings.Cut(string(raw), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, true
}

// Log returns what the demo logged so far.
func (d *Demo) Log() string { return d.log.String() }

// Answer is an API answer: its status and decoded body.
type Answer struct {
	// Status is the HTTP status.
	Status int
	// Body is the JSON body, decoded.
	Body map[string]any
}

// Data returns the answer's data member when it is an object.
func (a Answer) Data() map[string]any {
	m, _ := a.Body["data"].(map[string]any)
	return m
}

// Do sends an API request with key (the admin key when empty), a JSON
// body when body is not nil and an Idempotency-Key when idemKey is not
// empty; an error means no answer came.
func (d *Demo) Do(ctx context.Context, key, method, path string, body any, idemKey string) (Answer, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return Answer{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.Base+path, rd)
	if err != nil {
		return Answer{}, err
	}
	if key == "" {
		key = AdminKey
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := d.Client.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Status: resp.StatusCode}
	_ = json.Unmarshal(raw, &a.Body)
	return a, nil
}

// must sends a request that must be answered want.
func (d *Demo) must(ctx context.Context, want int, method, path string, body any, idemKey string) (map[string]any, error) {
	a, err := d.Do(ctx, "", method, path, body, idemKey)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if a.Status != want {
		return nil, fmt.Errorf("%s %s: %d, want %d: %v", method, path, a.Status, want, a.Body)
	}
	return a.Data(), nil
}

// CreateTasks creates n tasks named PREFIX-i in project, with workers
// requests at a time.
func (d *Demo) CreateTasks(ctx context.Context, prefix, project string, n, workers int) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ident := fmt.Sprintf("%s-%d", prefix, i)
				if _, err := d.must(ctx, http.StatusCreated, "POST", "/tasks", map[string]any{"identifier": ident, "title": "Load task " + ident,
					"links": map[string]any{"issue": "https://issues.example.com/" + ident}, "context": map[string]any{"project": project}}, ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// CreateKeys creates n API keys with scopes, each for an actor of its
// own, and returns their plaintexts.
func (d *Demo) CreateKeys(ctx context.Context, n int, scopes ...string) ([]string, error) {
	var keys []string
	for i := range n {
		data, err := d.must(ctx, http.StatusCreated, "POST", "/api-keys", map[string]any{"name": fmt.Sprintf("load %d", i), "scopes": scopes,
			"actor": map[string]any{"id": fmt.Sprintf("load-%d", i), "role": "user"}}, "")
		if err != nil {
			return nil, err
		}
		k, _ := data["key"].(string)
		keys = append(keys, k)
	}
	return keys, nil
}

// lockedBuffer keeps the last megabyte or so of a process's output, for
// readers on other goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write keeps p, dropping the older half of the output past a megabyte.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		b.buf.Next(b.buf.Len() / 2)
	}
	return b.buf.Write(p)
}

// String returns the output kept.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Deliver posts a code host's webhook delivery (its header and body) to
// path on the demo, and returns the answer's status.
func (d *Demo) Deliver(ctx context.Context, path string, delivery *http.Request) (int, error) {
	body, err := io.ReadAll(delivery.Body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = delivery.Header.Clone()
	resp, err := d.Client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
