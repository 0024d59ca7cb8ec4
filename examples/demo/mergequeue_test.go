package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// The merge queue's flags: off by default, and those that need
// -merge-queue, or exclude each other, are refused.
func TestMergeQueueFlags(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	o, err := parseFlags(nil, getenv)
	if err != nil || o.queue.enabled || o.queue.config().Enabled {
		t.Fatalf("no flags: %+v, %v; want the merge queue off", o.queue, err)
	}
	o, err = parseFlags([]string{"-merge-queue", "-queue-check-duration", "2s", "-merge-queue-poll", "250ms", "-queue-tested-log", "/tmp/x"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c := o.queue.config(); !c.Enabled || c.PollInterval.String() != "250ms" || o.queue.checkDuration.String() != "2s" || o.queue.testedLog != "/tmp/x" {
		t.Errorf("-merge-queue ...: %+v, config %+v", o.queue, c)
	}
	refused := []struct {
		args []string
		want string
	}{
		{[]string{"-queue-check-duration", "1s"}, "needs -merge-queue"},
		{[]string{"-queue-command", "true"}, "needs -merge-queue"},
		{[]string{"-queue-tested-log", "/tmp/x"}, "needs -merge-queue"},
		{[]string{"-merge-queue-poll", "1s"}, "needs -merge-queue"},
		{[]string{"-merge-queue", "-merge-queue-poll", "1ms"}, "at least 10ms"},
		{[]string{"-merge-queue", "-queue-check-duration", "-1s"}, "negative"},
		{[]string{"-merge-queue", "-queue-command", "  "}, "blank"},
		{[]string{"-merge-queue", "-queue-command", "make test", "-queue-tested-log", "/tmp/x"}, "in-process check only"},
		{[]string{"-merge-queue", "-queue-command", "make test", "-queue-check-duration", "1s"}, "in-process check only"},
	}
	for _, tc := range refused {
		if _, err := parseFlags(tc.args, getenv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}

// The in-process check records every candidate it passes, one line each,
// even when checks run at once; a check whose context ends fails without
// recording; -queue-command makes a command of it instead.
func TestCandidateCheckRecordsWhatItPassed(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "tested.log")
	check, command, closeLog, err := queueOptions{enabled: true, testedLog: log}.candidateCheck()
	if err != nil || check == nil || command != nil {
		t.Fatalf("candidateCheck: %v %v %v", check != nil, command, err)
	}
	var wg sync.WaitGroup
	shas := []string{strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("d", 40)}
	for _, sha := range shas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := artifact.QueueCandidate{SHA: sha, Repo: lifecycle.RepoRef{Owner: "local", Repo: "web"}, Base: "main"}
			if err := check(context.Background(), c); err != nil {
				t.Errorf("check %s: %v", sha, err)
			}
		}()
	}
	wg.Wait()
	slow, _, closeSlow, err := queueOptions{enabled: true, checkDuration: 1 << 40, testedLog: log}.candidateCheck()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := slow(ctx, artifact.QueueCandidate{SHA: strings.Repeat("e", 40)}); err == nil {
		t.Error("a check whose context ended passed")
	}
	if err := errors.Join(closeLog(), closeSlow()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != len(shas) {
		t.Fatalf("tested log has %d lines, want %d:\n%s", len(lines), len(shas), raw)
	}
	for _, sha := range shas {
		if !strings.Contains(string(raw), "web main "+sha+"\n") {
			t.Errorf("tested log lacks %s:\n%s", sha, raw)
		}
	}
	if info, err := os.Stat(log); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("tested log: %v %v, want readable by its owner only", info, err)
	}

	check, command, _, err = queueOptions{enabled: true, command: "make  test"}.candidateCheck()
	if err != nil || check != nil || strings.Join(command, "|") != "make|test" {
		t.Errorf("-queue-command: check set %v, command %q, %v; want the command split at spaces", check != nil, command, err)
	}
}

// A task of a local repository ships through the demo's merge queue:
// with a check that passes, the ship operation succeeds with the landed
// candidate, main is at it, and the in-process check recorded it as
// tested; with a command that fails, the change goes back (checks_failed)
// and main does not move.
func TestMergeQueueThroughTheDemo(t *testing.T) {
	cases := []struct {
		name    string
		flags   []string
		log     bool
		landing bool
	}{
		{"in-process check", []string{"-queue-check-duration", "100ms"}, true, true},
		{"command that passes", []string{"-queue-command", "true"}, false, true},
		{"command that fails", []string{"-queue-command", "false"}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "tested.log")
			data := t.TempDir()
			args := []string{"-addr", "127.0.0.1:0", "-data", data, "-admin-key-file", secretFile(t, testAdminKey), "-merge-queue", "-merge-queue-poll", "50ms"}
			args = append(args, tc.flags...)
			if tc.log {
				args = append(args, "-queue-tested-log", log)
			}
			c := client{t: t, base: launch(t, args...)}
			task := c.do("POST", "/tasks", map[string]any{"identifier": "MQ-1", "title": "Queue me",
				"links": map[string]any{"issue": "https://issues.example.com/MQ-1"}, "context": map[string]any{"project": "queued"}})
			id := task["id"].(string)
			c.do("POST", "/tasks/"+id+"/start", map[string]any{})
			sub := c.do("POST", "/tasks/"+id+"/submit", map[string]any{"summary": "Done.", "mode": "artifact",
				"checks": []map[string]any{{"name": "unit", "status": "passed"}}})
			head := sub["headSha"].(string)
			c.do("POST", "/tasks/"+id+"/reviews", map[string]any{"outcome": "approved", "body": "Fine."})
			repo, err := git.PlainOpen(filepath.Join(data, "repos", "queued"))
			if err != nil {
				t.Fatal(err)
			}
			before, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
			if err != nil {
				t.Fatal(err)
			}
			op := c.do("POST", "/tasks/"+id+"/ship", map[string]any{"mode": "merge_only", "targetEnvironment": "staging", "expectedHeadSha": head})
			done := c.await("ship finished", "/ship-operations/"+op["operationId"].(string), func(v map[string]any) bool {
				return v["status"] == "succeeded" || v["status"] == "failed"
			})
			main, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.landing {
				e, _ := done["error"].(map[string]any)
				if done["status"] != "failed" || e["code"] != "checks_failed" || main.Hash() != before.Hash() {
					t.Errorf("ship operation = %v, main %s (was %s); want failed checks_failed, main unmoved", done, main.Hash(), before.Hash())
				}
				return
			}
			landed, _ := done["mergeCommitSha"].(string)
			if done["status"] != "succeeded" || landed == "" || main.Hash().String() != landed {
				t.Fatalf("ship operation = %v, main at %s; want succeeded with main at its merge commit", done, main.Hash())
			}
			if tc.log {
				raw, err := os.ReadFile(log)
				if err != nil || !strings.Contains(string(raw), "queued main "+landed+"\n") {
					t.Errorf("tested log (%v):\n%s\nlacks the landed candidate %s", err, raw, landed)
				}
			}
			queues := c.do("GET", "/merge-queues", nil)["data"].([]any)
			if len(queues) != 1 || queues[0].(map[string]any)["baseSha"] != landed {
				t.Errorf("GET /merge-queues = %v, want one queue whose base is at %s", queues, landed)
			}
		})
	}
}
