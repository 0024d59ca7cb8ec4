package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// childEnv marks a process started by startReplica, so that a test binary
// that re-executes itself knows to run main.
const childEnv = "LIFECYCLE_REPLICAS_CHILD"

// replicaProc is a replica running as a child process.
type replicaProc struct {
	name, base, logPath string
	cmd                 *exec.Cmd
	ready               chan string // the base URL, once it serves
	exited              chan struct{}
}

// startReplica starts this program as one replica, its stderr appended to
// NAME.log in the data directory.
func startReplica(o replicaOptions) (*replicaProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-replica", o.name, "-addr", o.addr, "-schema", o.schema, "-data", o.data}
	if o.webhookCA != "" {
		args = append(args, "-webhook-ca", o.webhookCA)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"-ship-lease", o.shipLease}, {"-webhook-lease", o.webhookLease}, {"-deploy-time", o.deployTime}} {
		if d.v != 0 {
			args = append(args, d.flag, d.v.String())
		}
	}
	p := &replicaProc{name: o.name, logPath: filepath.Join(o.data, o.name+".log"), ready: make(chan string, 1), exited: make(chan struct{})}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	p.cmd = exec.Command(exe, args...)
	// The key and the DSN (which may hold a password) go in the
	// environment, not in the arguments, which ps shows.
	p.cmd.Env = append(os.Environ(), childEnv+"=1", "LIFECYCLE_ADMIN_KEY="+o.adminKey, "LIFECYCLE_POSTGRES_DSN="+o.dsn)
	p.cmd.Stderr = logFile
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start replica %s: %w", o.name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, base, ok := strings.Cut(sc.Text(), " serving on "); ok {
				select {
				case p.ready <- base:
				default:
				}
			}
		}
		p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady waits until the replica serves, and sets p.base.
func (p *replicaProc) waitReady(timeout time.Duration) error {
	select {
	case p.base = <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("replica %s exited before serving: %s", p.name, tail(p.logPath))
	case <-time.After(timeout):
		return fmt.Errorf("replica %s did not serve within %s: %s", p.name, timeout, tail(p.logPath))
	}
}

// kill ends the replica with SIGKILL and waits until it is gone.
func (p *replicaProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop asks the replica to stop (SIGTERM) and kills it if it has not
// within grace.
func (p *replicaProc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
	}
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// client calls the replicas' API with the admin key.
type client struct {
	key     string
	mu      sync.Mutex
	created map[string]time.Time // task ID -> when its creation returned
}

// do sends a request and decodes the "data" of a 2xx answer into out.
func (c *client) do(ctx context.Context, method, url, idempotencyKey string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{method: method, url: url, code: resp.StatusCode, body: string(b)}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, &struct{ Data any }{out})
}

// statusError is an answer other than 2xx.
type statusError struct {
	method, url, body string
	code              int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.url, e.code, e.body)
}

// createTask creates a task on the replica at base and returns its ID.
func (c *client) createTask(ctx context.Context, base, identifier, title string) (string, error) {
	var t struct{ ID string }
	err := c.do(ctx, "POST", base+"/tasks", "", map[string]any{"identifier": identifier, "title": title,
		"links": map[string]any{"issue": "https://issues.example.com/" + identifier}, "context": map[string]any{"project": "web"}}, &t)
	c.mu.Lock()
	if c.created == nil {
		c.created = make(map[string]time.Time)
	}
	c.created[t.ID] = time.Now()
	c.mu.Unlock()
	return t.ID, err
}

// frame is one event of a stream.
type frame struct {
	id, typ, taskID string
	at              time.Time // when it arrived
}

// eventStream is an open event stream.
type eventStream struct {
	frames <-chan frame
	body   io.Closer
}

// Close ends the stream.
func (s *eventStream) Close() error { return s.body.Close() }

// stream opens the event stream of the replica at base.
func (c *client) stream(ctx context.Context, base string) (*eventStream, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/task-events/stream", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("stream: %s", resp.Status)
	}
	out := make(chan frame, 1<<16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var f frame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				var e struct{ Data struct{ TaskID string } }
				json.Unmarshal([]byte(line[6:]), &e)
				f.taskID = e.Data.TaskID
			case line == "" && f.id != "":
				f.at = time.Now()
				out <- f
				f = frame{}
			}
		}
	}()
	return &eventStream{frames: out, body: resp.Body}, nil
}

// ping checks that the PostgreSQL server at dsn answers.
func ping(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// dropSchema drops a scratch schema.
func dropSchema(ctx context.Context, dsn, schema string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newAdminKey returns a new random API key.
func newAdminKey() string {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 40)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return "lsk_" + string(b)
}
