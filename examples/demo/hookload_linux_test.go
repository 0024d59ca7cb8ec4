package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle/adapter/github/githubtest"
)

// procStatus returns a field of /proc/PID/status in bytes (VmRSS, VmHWM).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// stalledHooks is the number of stalled bodies of each round, and
// stalledHookSize the size of each: issue 21's target.
const (
	stalledHooks    = 8
	stalledHookSize = 20_000_000
)

// hookAttack is a round of stalled bodies to POST /hooks/github.
type hookAttack struct {
	name    string
	event   string // X-GitHub-Event
	chunked bool   // no Content-Length: Transfer-Encoding: chunked
	size    int    // the body's length; all of it but its end is sent
}

// send opens a connection to addr and sends the head of a and all its
// body but the end, without waiting for the server to take it; it
// returns the connection.
func (a hookAttack) send(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	length := fmt.Sprintf("Content-Length: %d", a.size)
	if a.chunked {
		length = "Transfer-Encoding: chunked"
	}
	head := fmt.Sprintf("POST /hooks/github HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-GitHub-Event: %s\r\n"+
		"X-GitHub-Delivery: stalled\r\nX-Hub-Signature-256: sha256=%s\r\n%s\r\n\r\n", addr, a.event, strings.Repeat("0", 64), length)
	go func() {
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		piece := []byte(strings.Repeat("x", 64<<10))
		for left := a.size - 1; left > 0; left -= len(piece) {
			p := piece[:min(left, len(piece))]
			if a.chunked {
				p = append(fmt.Appendf(nil, "%x\r\n", len(p)), append(p, "\r\n"...)...)
			}
			if _, err := conn.Write(p); err != nil {
				return // refused and closed
			}
		}
		// Stalled: the end never comes.
	}()
	return conn
}

// Eight stalled unsigned 20 MB bodies to the demo's GitHub webhook leave
// other requests unaffected, raise the peak RSS of the demo's process by
// less than 64 MiB, and are closed within 15 s, whether they declare
// their length or not and whatever event they name; so do eight of 2 MB,
// which together fill the budget of bodies held. The demo runs in a
// process of its own (this test binary, re-executed), so that its memory
// is its own. It takes about 25 s, and is skipped with -short and with
// -race:
//
//	go test -run TestStalledUnsignedHookBodies -v ./examples/demo
func TestStalledUnsignedHookBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test of about 25 s")
	}
	if raceEnabled {
		t.Skip("measures memory, which the race detector multiplies: run it without -race")
	}
	f := githubtest.NewServer(t, githubtest.Options{})
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-metrics-addr", "", "-data", t.TempDir(), "-admin-key-file", secretFile(t, testAdminKey),
		"-github-repo", githubtest.Owner+"/"+githubtest.Repo, "-github-api-url", f.APIURL(),
		"-github-token-file", secretFile(t, githubtest.Token), "-github-webhook-secret-file", secretFile(t, testGitHubSecret))
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopChild(t, cmd, 15*time.Second) })
	var base string
	lines := bufio.NewScanner(stdout)
	for base == "" && lines.Scan() {
		base, _ = strings.CutPrefix(lines.Text(), "lifecycle demo listening on ")
	}
	if base == "" {
		t.Fatalf("the demo did not start: %v", lines.Err())
	}
	go io.Copy(io.Discard, stdout)
	pid := cmd.Process.Pid
	addr := strings.TrimPrefix(base, "http://")
	c := client{t: t, base: base}
	api := &http.Client{Timeout: 30 * time.Second}
	get := func() (time.Duration, int) {
		req, _ := http.NewRequest("GET", base+"/tasks?limit=50", nil)
		req.Header.Set("Authorization", "Bearer "+testAdminKey)
		start := time.Now()
		resp, err := api.Do(req)
		if err != nil {
			return time.Since(start), 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start), resp.StatusCode
	}
	// Warm up: the API, and a signed delivery through the hook.
	for range 20 {
		get()
	}
	c.deliver("/hooks/github", githubtest.Delivery("/hooks/github", "check_run", "warm-up", testGitHubSecret, f.CheckRunPayload(githubtest.NewSHA(), "build", "success")))

	const mib = 1 << 20
	// The rise is measured from the RSS of the warm demo, before the
	// first round: the rounds' garbage is not all returned in between.
	baseline := procStatus(t, pid, "VmRSS")
	for _, a := range []hookAttack{
		{name: "pull_request, Content-Length 20 MB", event: "pull_request", size: stalledHookSize},
		{name: "push (not used), Content-Length 20 MB", event: "push", size: stalledHookSize},
		{name: "pull_request, chunked, 20 MB", event: "pull_request", chunked: true, size: stalledHookSize},
		{name: "pull_request, Content-Length 2 MB", event: "pull_request", size: 2_000_000},
	} {
		before := procStatus(t, pid, "VmRSS")
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			t.Fatalf("reset the peak RSS: %v", err)
		}
		type outcome struct {
			status string
			closed time.Duration // from the request's head to the connection's end
		}
		outcomes := make([]outcome, stalledHooks)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range stalledHooks {
			conn := a.send(t, addr)
			sent := time.Now()
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReader(conn)
				status, _ := br.ReadString('\n')
				io.Copy(io.Discard, br) // until the server closes
				outcomes[i] = outcome{strings.TrimSpace(status), time.Since(sent)}
			}()
		}
		// Meanwhile, other requests: the API at 20 a second, and now and
		// then a signed delivery of an event the adapter uses.
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		var latencies []time.Duration
		failed, hooks := 0, 0
		tick := time.NewTicker(50 * time.Millisecond)
		for waiting := true; waiting; {
			select {
			case <-done:
				waiting = false
			case <-tick.C:
				d, status := get()
				latencies = append(latencies, d)
				if status != http.StatusOK {
					failed++
				}
				if len(latencies)%10 == 1 {
					hooks++
					hook := githubtest.Delivery("/hooks/github", "check_run", fmt.Sprintf("%s-%d", a.name, hooks), testGitHubSecret, f.CheckRunPayload(githubtest.NewSHA(), "build", "success"))
					hook.RequestURI, hook.URL.Scheme, hook.URL.Host = "", "http", addr
					if resp, err := api.Do(hook); err == nil {
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							failed++
						}
					} else {
						failed++
					}
				}
			}
		}
		tick.Stop()
		elapsed := time.Since(start)
		peak := procStatus(t, pid, "VmHWM")

		if len(latencies) == 0 {
			t.Fatalf("%s: no GET /tasks was answered during the round", a.name)
		}
		slices.Sort(latencies)
		pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
		statuses := map[string]int{}
		var slowest time.Duration
		for _, o := range outcomes {
			statuses[strings.TrimPrefix(o.status, "HTTP/1.1 ")]++
			slowest = max(slowest, o.closed)
		}
		t.Logf("%s: %d stalled bodies answered %v, the last closed after %s (round %s); RSS %.1f MiB warm, %.1f MiB at the round's start, peak %.1f MiB (+%.1f MiB over warm); meanwhile %d GET /tasks (p50 %s, p99 %s, max %s) and %d signed check_run deliveries, %d failed",
			a.name, stalledHooks, statuses, slowest.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(baseline)/mib, float64(before)/mib, float64(peak)/mib, float64(peak-baseline)/mib,
			len(latencies), pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond), hooks, failed)
		if rise := peak - baseline; rise >= 64*mib {
			t.Errorf("%s: the peak RSS rose by %.1f MiB, want under 64 MiB", a.name, float64(rise)/mib)
		}
		if slowest > 15*time.Second {
			t.Errorf("%s: a stalled body was closed after %s, want within 15 s", a.name, slowest)
		}
		for _, o := range outcomes {
			if !strings.Contains(o.status, " 408 ") && !strings.Contains(o.status, " 413 ") && !strings.Contains(o.status, " 503 ") {
				t.Errorf("%s: a stalled body was answered %q, want 408, 413 or 503", a.name, o.status)
			}
		}
		if failed > 0 || pct(0.99) > time.Second {
			t.Errorf("%s: other requests: %d failed, p99 %s; want none failed and p99 under 1 s", a.name, failed, pct(0.99))
		}
	}
}

// stopChild ends a child process started with cmd: SIGTERM, then SIGKILL
// when it has not exited within timeout, so that a demo that does not stop
// fails the test instead of hanging it.
func stopChild(t *testing.T, cmd *exec.Cmd, timeout time.Duration) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(timeout):
		t.Errorf("the demo (pid %d) still ran %s after SIGTERM; killed", cmd.Process.Pid, timeout)
		cmd.Process.Kill()
		<-exited
	}
}
