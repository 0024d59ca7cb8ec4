package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// adminKey is the demo's admin key in every run.
const adminKey = "lsk_crashharnesscrashharnesscrashharness0"

// server runs the demo process and restarts it.
type server struct {
	name      string // "demo", or a replica's name
	bin, data string
	env       []string // beside the harness's own environment
	args      []string // beside the flags every demo gets
	addr      string   // fixed across restarts
	base      string
	recv      *receiver
	log       *slog.Logger
	client    *http.Client

	startMu sync.Mutex // one restart at a time

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	kills    []kill
	restarts []time.Duration // from process start to the first answer
	stderr   *lockedWriter
}

// kill is one SIGKILL: when, and what triggered it.
type kill struct {
	at     time.Time
	reason string
}

// newServer returns the demo named name, on a free port of 127.0.0.1 and
// data directory data, started with the environment variables env (such
// as LIFECYCLE_POSTGRES_DSN) beside the harness's own.
func newServer(name, bin, data string, recv *receiver, log *slog.Logger, env ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return &server{name: name, bin: bin, data: data, env: env, addr: addr, base: "http://" + addr, recv: recv, log: log,
		client: &http.Client{Timeout: 15 * time.Second}}, nil
}

// start starts the demo and waits until it answers.
func (s *server) start() error {
	s.mu.Lock()
	// No metrics: the harness reads none, and the default port may be a
	// demo's of this machine.
	args := append([]string{"-addr", s.addr, "-metrics-addr", "", "-data", s.data, "-webhook-url", s.recv.url, "-webhook-ca", s.recv.caFile}, s.args...)
	cmd := exec.Command(s.bin, args...)
	stderr := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	// Secrets through the environment, never on the command line.
	cmd.Env = append(environ(), "LIFECYCLE_ADMIN_KEY="+adminKey, "WEBHOOK_SECRET="+webhookSecret)
	cmd.Env = append(cmd.Env, s.env...)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("start the demo: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited, s.stderr = cmd, exited, stderr
	s.mu.Unlock()

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %s", s.name, stderr.String())
		default:
		}
		req, _ := http.NewRequest("GET", s.base+"/tasks?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if resp, err := s.client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.mu.Lock()
				s.restarts = append(s.restarts, time.Since(t0))
				s.mu.Unlock()
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within 60 s", s.name)
}

// kill sends SIGKILL to the demo and waits for it to die; no restart
// begins before it is dead (and its port free).
func (s *server) kill(reason string) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	if cmd == nil {
		s.mu.Unlock()
		return
	}
	cmd.Process.Signal(syscall.SIGKILL)
	s.kills = append(s.kills, kill{at: time.Now(), reason: reason})
	s.cmd = nil
	s.mu.Unlock()
	<-exited
}

// restart starts the demo again unless it runs.
func (s *server) restart() error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	return s.start()
}

// environ returns the harness's environment without the demo's own
// variables (LIFECYCLE_POSTGRES_DSN, LIFECYCLE_INSTANCE_ID, ...): the
// harness sets those it means, and a DSN of the machine's must never
// reach a demo it kills.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LIFECYCLE_") {
			env = append(env, kv)
		}
	}
	return env
}

// lastKill returns the time of the last kill.
func (s *server) lastKill() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.kills) == 0 {
		return time.Time{}
	}
	return s.kills[len(s.kills)-1].at
}

// stop ends the demo with SIGTERM (a clean shutdown) and waits.
func (s *server) stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("%s did not stop within 30 s of SIGTERM", s.name)
	}
}

// logs returns what the running demo wrote to stderr.
func (s *server) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stderr == nil {
		return ""
	}
	return s.stderr.String()
}

// lockedWriter is a buffer that a process writes while logs reads it.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
