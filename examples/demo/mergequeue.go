package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// queueOptions are the flags of the demo's merge queue.
type queueOptions struct {
	enabled bool
	poll    time.Duration
	// checkDuration is how long the in-process candidate check takes.
	checkDuration time.Duration
	// command, when set, tests candidates instead of the in-process
	// check: the program and its arguments, split at spaces.
	command string
	// testedLog, when set, is the file the in-process check appends
	// every candidate it passed to.
	testedLog string
}

// validate reports flags of the merge queue that cannot go together.
func (q queueOptions) validate(set map[string]bool) error {
	if !q.enabled {
		for _, f := range []string{"merge-queue-poll", "queue-check-duration", "queue-command", "queue-tested-log"} {
			if set[f] {
				return fmt.Errorf("-%s needs -merge-queue", f)
			}
		}
		return nil
	}
	if q.poll < 10*time.Millisecond {
		return fmt.Errorf("-merge-queue-poll %s: at least 10ms", q.poll)
	}
	if q.checkDuration < 0 {
		return fmt.Errorf("-queue-check-duration %s is negative", q.checkDuration)
	}
	if q.command != "" && len(strings.Fields(q.command)) == 0 {
		return errors.New("-queue-command is blank")
	}
	if q.command != "" && (set["queue-check-duration"] || q.testedLog != "") {
		return errors.New("-queue-command tests candidates instead of the in-process check: -queue-check-duration and -queue-tested-log go with the in-process check only (the command finds the candidate in $LIFECYCLE_CANDIDATE_SHA)")
	}
	return nil
}

// config returns the lifecycle's merge queue settings.
func (q queueOptions) config() lifecycle.MergeQueueConfig {
	if !q.enabled {
		return lifecycle.MergeQueueConfig{}
	}
	return lifecycle.MergeQueueConfig{Enabled: true, PollInterval: q.poll}
}

// candidateCheck returns the check of merge queue candidates to set in
// the artifact adapter's Config: a command (QueueCommand), or an
// in-process check (QueueCheck) that takes checkDuration and then passes,
// first recording the candidate in the tested log when there is one. The
// returned close function closes the log; call it after the adapter is
// closed.
func (q queueOptions) candidateCheck() (check func(context.Context, artifact.QueueCandidate) error, command []string, closeLog func() error, err error) {
	closeLog = func() error { return nil }
	switch {
	case !q.enabled:
		return nil, nil, closeLog, nil
	case q.command != "":
		return nil, strings.Fields(q.command), closeLog, nil
	}
	var log *testedLog
	if q.testedLog != "" {
		if log, err = openTestedLog(q.testedLog); err != nil {
			return nil, nil, nil, err
		}
		closeLog = log.close
	}
	d := q.checkDuration
	check = func(ctx context.Context, c artifact.QueueCandidate) error {
		if d > 0 {
			timer := time.NewTimer(d)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if log != nil {
			// Recorded before the pass is reported: a candidate the queue
			// takes as passed is in the log, whatever happens after.
			if err := log.record(c); err != nil {
				return err
			}
		}
		return nil
	}
	return check, nil, closeLog, nil
}

// testedLog is the file where the demo's candidate check records each
// candidate it passed, one line each: the repository, the base and the
// commit, separated by spaces. Each line is on disk (fsync) before the
// check passes.
type testedLog struct {
	mu sync.Mutex
	f  *os.File
}

// openTestedLog opens the tested log at path for appending, creating it
// readable by its owner only.
func openTestedLog(path string) (*testedLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("-queue-tested-log: %w", err)
	}
	return &testedLog{f: f}, nil
}

// record appends candidate c to the log and syncs it to disk.
func (l *testedLog) record(c artifact.QueueCandidate) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := fmt.Fprintf(l.f, "%s %s %s\n", c.Repo.Repo, c.Base, c.SHA); err != nil {
		return fmt.Errorf("record the tested candidate %s: %w", c.SHA, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("record the tested candidate %s: sync: %w", c.SHA, err)
	}
	return nil
}

// close closes the log.
func (l *testedLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// describe says in words how candidates are tested.
func (q queueOptions) describe() string {
	var s string
	switch {
	case q.command != "":
		s = fmt.Sprintf("candidates tested by %q", q.command)
	case q.checkDuration > 0:
		s = fmt.Sprintf("candidate check takes %s", q.checkDuration)
	default:
		s = "candidate check passes at once"
	}
	if q.testedLog != "" {
		s += ", tested candidates logged to " + q.testedLog
	}
	return s
}
