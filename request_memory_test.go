package lifecycle_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/apitest"
	"github.com/tasklifecycle/lifecycle/store/sqlite"
)

// rssBoundMiB is the documented bound (README, "Limits of requests") on the
// peak resident memory of a Service process while eight clients send 1 MiB
// bodies at once, again and again.
const rssBoundMiB = 160

// rssAdminKey is the admin key of the child server.
const rssAdminKey = "lsk_rsschildrsschildrsschildrsschildrsschild"

// Eight clients sending 1 MiB bodies at once keep the server's peak RSS
// under rssBoundMiB. The server runs in a child process (this test binary,
// re-executed), so that its memory is its own.
func TestConcurrentLargeBodiesKeepMemoryBounded(t *testing.T) {
	if os.Getenv("LIFECYCLE_RSS_CHILD") != "" {
		rssChild(t)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads the peak RSS from /proc")
	}
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConcurrentLargeBodiesKeepMemoryBounded$")
	cmd.Env = append(os.Environ(), "LIFECYCLE_RSS_CHILD="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the child server did not start: %v", err)
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "addr "))
	base := "http://" + addr

	ones := "[" + strings.TrimSuffix(strings.Repeat("1,", (1<<20-256)/2), ",") + "]"
	// Each body is invalid (wrong-typed arrays, a description and a
	// criterion over their limits): 400 validation_error, once decoded.
	// While all eight bodies are read the budget of bodies being decoded
	// (8 MiB) is full, so one may instead wait and be refused 429.
	bodies := []struct{ path, body string }{
		{"/tasks/tsk_aaaaaaaaaaaaaaaaaaaaaa/checks", `{"headSha":"` + strings.Repeat("a", 40) + `","checks":` + ones + `}`},
		{"/tasks", `{"identifier":"RSS-1","title":"t","links":{"issue":"https://x.example/1"},"labels":` + ones + `}`},
		{"/tasks", `{"identifier":"RSS-2","title":"t","links":{"issue":"https://x.example/1"},"description":"` + strings.Repeat("d", 1<<20-200) + `"}`},
		{"/tasks", `{"identifier":"RSS-3","title":"t","links":{"issue":"https://x.example/1"},"acceptanceCriteria":["` + strings.Repeat("c", 1<<20-200) + `"]}`},
	}
	expected := func(status int, body []byte) bool {
		return status == http.StatusBadRequest && strings.Contains(string(body), `"validation_error"`) ||
			status == http.StatusTooManyRequests && strings.Contains(string(body), `"rate_limited"`)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	statuses := map[int]int{}
	var mu sync.Mutex
	start := time.Now()
	for round := 0; round < 6; round++ {
		var wg sync.WaitGroup
		for c := 0; c < 8; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := bodies[(round+c)%len(bodies)]
				req, _ := http.NewRequest("POST", base+b.path, strings.NewReader(b.body))
				req.Header.Set("Authorization", "Bearer "+rssAdminKey)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if !expected(resp.StatusCode, answer) {
					t.Errorf("POST %s: %d %s, want 400 validation_error (or 429 rate_limited)", b.path, resp.StatusCode, answer)
				}
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var hwm int
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			hwm, _ = strconv.Atoi(f[1])
		}
	}
	t.Logf("48 bodies of 1 MiB, 8 at a time, in %s: statuses %v, peak RSS %d MiB (bound %d MiB)", elapsed.Round(time.Millisecond), statuses, hwm/1024, rssBoundMiB)
	if hwm == 0 || hwm/1024 > rssBoundMiB {
		t.Errorf("peak RSS %d MiB, want under %d MiB", hwm/1024, rssBoundMiB)
	}
	if statuses[http.StatusBadRequest] == 0 {
		t.Errorf("no body was decoded and refused 400: %v", statuses)
	}
}

// rssChild serves a Service on loopback, prints its address and serves
// until its stdin closes.
func rssChild(t *testing.T) {
	dir := os.Getenv("LIFECYCLE_RSS_CHILD")
	store, err := sqlite.New(sqlite.Config{Path: filepath.Join(dir, "lifecycle.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: store, BaseURL: "http://127.0.0.1", TakeOverStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateAPIKey(context.Background(), lifecycle.CreateAPIKeyParams{Name: "admin", Scopes: apitest.AllScopes(),
		Actor: lifecycle.Actor{ID: "admin", Role: lifecycle.RoleUser}, Plaintext: rssAdminKey}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Printf("addr %s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}
