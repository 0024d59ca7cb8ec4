package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle/adapter/gitlab/gitlabtest"
	"github.com/tasklifecycle/lifecycle/internal/testenv"
)

const (
	testAdminKey  = "lsk_0123456789abcdefghijklmnopqrstuvwxyz"
	testHookToken = "demo-hook-token"
)

// The whole lifecycle of a GitLab task through the demo, over HTTP, with
// the demo pointed at a fake GitLab by -gitlab-url and
// -gitlab-project-path: create, start, submit (a merge request opens at
// the fake), CI passes and a reviewer approves at the fake, ship
// merge_and_deploy (merged at the expected head; a deployment of the merge
// commit recorded at the fake), the deploy job finishes it and GitLab's
// Deployment Hook reaches POST /hooks/gitlab, and the task is done.
func TestGitLabLifecycleThroughTheDemo(t *testing.T) {
	f := gitlabtest.NewServer(t, gitlabtest.Options{ApprovalsRequired: 1})
	base := startDemo(t, "-gitlab-project-path", gitlabtest.ProjectPath, "-gitlab-url", f.URL,
		"-gitlab-token-file", secretFile(t, "glpat-demo-test"), "-gitlab-webhook-token-file", secretFile(t, testHookToken))
	c := client{t: t, base: base}

	task := c.do("POST", "/tasks", map[string]any{"identifier": "GL-1", "title": "Fix the login redirect",
		"links": map[string]any{"issue": "https://issues.example.com/GL-1"}, "context": map[string]any{"project": "gitlab"}})
	id := task["id"].(string)
	c.do("POST", "/tasks/"+id+"/start", map[string]any{})
	f.Push("lifecycle/gl-1") // the agent pushes its work before it submits
	c.do("POST", "/tasks/"+id+"/submit", map[string]any{"summary": "Fixed the redirect."})
	mr := f.MergeRequest(1)
	if mr.State != "opened" || mr.SourceBranch != "lifecycle/gl-1" || mr.TargetBranch != "main" {
		t.Fatalf("merge request at GitLab = %+v, want lifecycle/gl-1 into main, open", mr)
	}

	// CI passes and alice approves, at GitLab, whose Merge Request Hook
	// (approved) makes the demo read both; it offers ship.
	f.Pipeline(1, "success", &gl.CommitStatus{Name: "build", Status: "success"}, &gl.CommitStatus{Name: "test", Status: "success"})
	f.Approve(1, "alice")
	c.hook(f.MergeRequestHook(1, "approved", false, testHookToken))
	task = c.await("ship offered", "/tasks/"+id, func(v map[string]any) bool {
		actions, _ := v["availableActions"].([]any)
		return slices.Contains(actions, any("ship"))
	})
	if task["headSha"] != mr.SHA {
		t.Fatalf("task headSha = %v, want the merge request's head %s", task["headSha"], mr.SHA)
	}

	op := c.do("POST", "/tasks/"+id+"/ship", map[string]any{"mode": "merge_and_deploy", "targetEnvironment": "staging", "expectedHeadSha": mr.SHA})
	opID := op["operationId"].(string)

	// The deploy job finishes the deployment of the merge commit; GitLab
	// says so on the demo's hook.
	var dep int64
	if !testenv.WaitUntil(20*time.Second, func() bool {
		if merged := f.MergeRequest(1); merged.MergeCommitSHA != "" {
			dep = f.RunningDeployment("staging", merged.MergeCommitSHA)
		}
		return dep != 0
	}) {
		t.Fatalf("no deployment of the merge commit was recorded at GitLab; merge request %+v", f.MergeRequest(1))
	}
	f.SetDeployment(dep, "success")
	c.hook(f.DeploymentHook(dep, "success", testHookToken))

	done := c.await("ship finished", "/ship-operations/"+opID, func(v map[string]any) bool {
		return v["status"] == "succeeded" || v["status"] == "failed"
	})
	merged := f.MergeRequest(1)
	if done["status"] != "succeeded" || done["mergeCommitSha"] != merged.MergeCommitSHA || merged.State != "merged" {
		t.Fatalf("ship operation = %v; merge request %+v; want succeeded with its merge commit", done, merged)
	}
	if task := c.do("GET", "/tasks/"+id, nil); task["status"] != "done" {
		t.Errorf("task status = %v, want done", task["status"])
	}
}

// secretFile writes secret to a file readable by its owner only, and
// returns its path.
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startDemo runs the demo on a free loopback port with a fresh data
// directory and the given flags until the test ends, and returns its base
// URL.
func startDemo(t *testing.T, args ...string) string {
	t.Helper()
	return launch(t, append([]string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-admin-key-file", secretFile(t, testAdminKey)}, args...)...)
}

// launch runs the demo in this process with args until the test ends,
// and returns its base URL.
func launch(t *testing.T, args ...string) string {
	t.Helper()
	base, _ := launchStoppable(t, args...)
	return base
}

// metricsURLs holds the URL of each demo's GET /metrics, by its base URL.
var metricsURLs sync.Map

// metricsURL returns the URL of GET /metrics of the demo at base.
func metricsURL(t *testing.T, base string) string {
	t.Helper()
	u, ok := metricsURLs.Load(base)
	if !ok {
		t.Fatalf("the demo at %s serves no metrics", base)
	}
	return u.(string)
}

// launchStoppable runs the demo in this process with args, and returns
// its base URL and a function that stops it (as SIGINT does), waits until
// run has returned and returns its error; the test's end stops it too.
// Its metrics are on a free loopback port unless args say where
// (-metrics-addr); metricsURL tells it.
func launchStoppable(t *testing.T, args ...string) (base string, stop func() error) {
	t.Helper()
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-metrics-addr") }) {
		args = append([]string{"-metrics-addr", "127.0.0.1:0"}, args...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, args, w, io.Discard)
		w.CloseWithError(fmt.Errorf("demo ended: %v", err))
		done <- err
	}()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("demo: %v", err)
		}
	})
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if b, ok := strings.CutPrefix(lines.Text(), "lifecycle demo listening on "); ok {
			base = b
		}
		if m, ok := strings.CutPrefix(lines.Text(), "metrics:"); ok && base != "" {
			if u, _, _ := strings.Cut(strings.TrimSpace(m), " "); strings.HasPrefix(u, "http://") {
				metricsURLs.Store(base, u)
				t.Cleanup(func() { metricsURLs.Delete(base) })
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return base, stop
		}
	}
	t.Fatalf("the demo did not start: %v", lines.Err())
	return "", nil
}

// client calls the demo's API with the admin key: key, or testAdminKey.
type client struct {
	t    *testing.T
	base string
	key  string
}

// bearer returns the client's key.
func (c client) bearer() string {
	if c.key == "" {
		return testAdminKey
	}
	return c.key
}

// post sends a JSON body and returns the answer's status and body,
// whatever they are.
func (c client) post(path string, body any) (int, string) {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(c.t.Context(), "POST", c.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+c.bearer())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("demo-test-%d", time.Now().UnixNano()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// do sends a request and returns the answer's data, failing the test on
// an answer other than 2xx.
func (c client) do(method, path string, body any) map[string]any {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(c.t.Context(), method, c.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.bearer())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("demo-test-%d", time.Now().UnixNano()))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		c.t.Fatalf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		c.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
	}
	if data, ok := v["data"].(map[string]any); ok {
		return data
	}
	return v
}

// hook posts a delivery of GitLab's webhook to the demo's POST
// /hooks/gitlab, failing the test unless it is answered 200.
func (c client) hook(delivery *http.Request) { c.t.Helper(); c.deliver("/hooks/gitlab", delivery) }

// deliver posts a webhook delivery (its header and body) to path on the
// demo, failing the test unless it is answered 200.
func (c client) deliver(path string, delivery *http.Request) {
	c.t.Helper()
	body, _ := io.ReadAll(delivery.Body)
	req, _ := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.base+path, bytes.NewReader(body))
	req.Header = delivery.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("delivery to %s was answered %s", path, resp.Status)
	}
}

// await reads path until ok holds, for up to 20 seconds.
func (c client) await(what, path string, ok func(map[string]any) bool) map[string]any {
	c.t.Helper()
	var v map[string]any
	if !testenv.WaitUntil(20*time.Second, func() bool { v = c.do("GET", path, nil); return ok(v) }) {
		c.t.Fatalf("%s: not after 20s; last %s: %v", what, path, v)
	}
	return v
}
