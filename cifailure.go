package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tasklifecycle/lifecycle/internal/dueloop"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// This file is why CI failed: the details of failed checks (a check run's
// output and annotations, the end of a job's log), learned once per
// failed check of a task's head commit and kept by the Store
// ([CIFailureStore]), and the task.ci_failed event. A provider check that
// fails is marked due in the transaction that learns it; the fetcher
// (fetchCIFailures) asks the CI provider's [CIFailureReader] in the
// background, retrying with backoff, and stores what it says. Reads serve
// what is stored and never call a host.

const (
	// ciFetchPoll is how often the fetcher looks for due failures when not
	// woken: retries come due at their time, and a crash's leases end.
	ciFetchPoll = 2 * time.Second
	// ciFetchChunk is how many due failures the fetcher claims at a time.
	ciFetchChunk = 16
	// ciFetchConcurrency bounds the fetches under way at once.
	ciFetchConcurrency = 4
	// ciFetchAttempts is how many times a failure's details are asked for
	// before the fetcher gives up on them.
	ciFetchAttempts = 6
	// ciFetchFirstRetry and ciFetchMaxRetry bound the waits between tries:
	// each is twice the last.
	ciFetchFirstRetry = 2 * time.Second
	ciFetchMaxRetry   = 5 * time.Minute
)

// Bounds of failure details: what is reported is refused beyond the
// first ones; what is kept is cut to the second ones and to
// Config.CIFailureExcerptBytes.
const (
	maxFailureTitle       = 1000     // characters, reported
	maxFailureText        = 65535    // characters of a summary or excerpt, reported (GitHub's own bound)
	maxFailureAnnotations = 50       // per failure, reported and kept
	maxAnnotationPath     = 1000     // characters, reported
	maxAnnotationMessage  = 64 << 10 // characters, reported
	keptTitleBytes        = 256
	keptMessageBytes      = 1024
	eventTitleBytes       = 200 // of a task.ci_failed event's check
	eventSummaryBytes     = 500
	eventFailedChecks     = 20
)

// validateFailure checks the failure details of a reported check: they
// are refused when malformed or beyond the bounds of the hosts; a long
// but well-formed failure is kept cut to the Service's bounds.
func validateFailure(v *lifecycletype.Validator, field string, f *CIFailure, st CheckStatus) {
	if f == nil {
		return
	}
	field += ".failure"
	if st != CheckFailed {
		v.Add(field, "only a failed check has failure details")
	}
	v.MaxLen(field+".title", f.Title, maxFailureTitle)
	v.MaxLen(field+".summary", f.Summary, maxFailureText)
	v.MaxLen(field+".excerpt", f.Excerpt, maxFailureText)
	if f.LogURL != nil && !validURL(*f.LogURL) {
		v.Add(field+".logUrl", "must be an absolute http or https URL")
	}
	if len(f.Annotations) > maxFailureAnnotations {
		v.Add(field+".annotations", fmt.Sprintf("at most %d entries", maxFailureAnnotations))
		return
	}
	for i, a := range f.Annotations {
		af := fmt.Sprintf("%s.annotations[%d]", field, i)
		if a.Path == "" {
			v.Add(af+".path", "is required")
		}
		v.MaxLen(af+".path", a.Path, maxAnnotationPath)
		if a.Message == "" {
			v.Add(af+".message", "is required")
		}
		v.MaxLen(af+".message", a.Message, maxAnnotationMessage)
		if a.StartLine < 1 {
			v.Add(af+".startLine", "must be at least 1")
		}
		if a.EndLine < a.StartLine {
			v.Add(af+".endLine", "must not be before startLine")
		}
		if !a.Level.Valid() {
			v.Add(af+".level", "must be one of notice, warning, failure")
		}
	}
}

// failureSize is what a failure's details weigh against the bounds: the
// bytes of its title, summary, excerpt and annotations' paths and
// messages. Its log link is not counted.
func failureSize(f *CIFailure) int {
	if f == nil {
		return 0
	}
	n := len(f.Title) + len(f.Summary) + len(f.Excerpt)
	for _, a := range f.Annotations {
		n += len(a.Path) + len(a.Message)
	}
	return n
}

// boundFailure returns f cut to budget bytes (see failureSize), marked
// truncated when anything was cut: the title first (at most 256 bytes),
// then the summary (at most half the budget), then whole annotations
// (each message at most 1 KiB; together at most a quarter of the budget),
// then the end of the excerpt, which gets what is left. Cuts fall on
// UTF-8 boundaries; a string that is not valid UTF-8 has its invalid
// bytes replaced first.
func boundFailure(f CIFailure, budget int) CIFailure {
	budget = max(budget, 0)
	out := CIFailure{Truncated: f.Truncated, LogURL: f.LogURL, FetchedAt: f.FetchedAt, Annotations: []CIAnnotation{}}
	left := budget
	take := func(s string, most int, tail bool) string {
		s = strings.ToValidUTF8(s, "\uFFFD")
		n := min(len(s), most, left)
		if n < len(s) {
			out.Truncated = true
		}
		if tail {
			s = cutTail(s, n)
		} else {
			s = cutHead(s, n)
		}
		left -= len(s)
		return s
	}
	out.Title = take(f.Title, keptTitleBytes, false)
	out.Summary = take(f.Summary, budget/2, false)
	notes := budget / 4
	for i, a := range f.Annotations {
		if i == maxFailureAnnotations {
			out.Truncated = true
			break
		}
		a.Path = strings.ToValidUTF8(a.Path, "\uFFFD")
		a.Message = strings.ToValidUTF8(a.Message, "\uFFFD")
		if len(a.Message) > keptMessageBytes {
			a.Message, out.Truncated = cutHead(a.Message, keptMessageBytes), true
		}
		n := len(a.Path) + len(a.Message)
		if n > notes || n > left {
			out.Truncated = true
			break
		}
		notes, left = notes-n, left-n
		out.Annotations = append(out.Annotations, a)
	}
	out.Excerpt = take(f.Excerpt, left, true)
	return out
}

// cutHead returns the longest prefix of s of at most n bytes that ends on
// a UTF-8 boundary.
func cutHead(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutTail returns the longest suffix of s of at most n bytes that begins
// on a UTF-8 boundary.
func cutTail(s string, n int) string {
	if n >= len(s) {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// ciTxOf returns the Store transaction under tx as a CIFailureTx, or nil
// when the Store keeps no failures, and the flag of the Service's
// transaction that says it marked failures due (nil outside one).
func ciTxOf(tx Tx) (CIFailureTx, *bool) {
	var due *bool
	for {
		switch w := tx.(type) {
		case outboxTx:
			due, tx = w.ciDue, w.Tx
			continue
		case *newSubmissionTx:
			tx = w.Tx
			continue
		}
		break
	}
	c, _ := tx.(CIFailureTx)
	return c, due
}

// checkKey names a check of a commit: its source and name.
type checkKey struct {
	source CheckSource
	name   string
}

// failureBudget returns how many bytes of details the check k of t's
// commit head may keep: Config.CIFailureExcerptBytes, within what
// Config.CIFailureTaskBytes leaves after the details of the commit's
// other failed checks, as known records holds them.
func (s *Service) failureBudget(known []CIFailureRecord, k checkKey) int {
	used := 0
	for _, r := range known {
		if (checkKey{r.Source, r.Name}) != k {
			used += failureSize(r.Failure)
		}
	}
	return min(s.cfg.CIFailureExcerptBytes, max(s.cfg.CIFailureTaskBytes-used, 0))
}

// putCIFailures stores the failure details that came with checks (a
// report, a submission, a CI provider that knew them), bounded, for
// those of them that failed. A check already holding fetched details
// keeps them unless replace (a reporter's later report is the truth).
func (s *Service) putCIFailures(ctx context.Context, tx Tx, taskID, head string, checks []Check, replace bool) error {
	ctx2, _ := ciTxOf(tx)
	if ctx2 == nil {
		return nil
	}
	var with []Check
	for _, c := range checks {
		if c.Status == CheckFailed && c.Failure != nil {
			with = append(with, c)
		}
	}
	if len(with) == 0 {
		return nil
	}
	known, err := ctx2.CIFailures(ctx, taskID, head)
	if err != nil {
		return fmt.Errorf("CI failures of task %s: %w", taskID, err)
	}
	now := s.now()
	for _, c := range with {
		k := checkKey{c.Source, c.Name}
		i := indexRecord(known, k)
		if i >= 0 && known[i].Failure != nil && !replace {
			continue // fetched once
		}
		f := *c.Failure
		f.FetchedAt = now
		r := CIFailureRecord{TaskID: taskID, HeadSHA: head, Source: c.Source, Name: c.Name, UpdatedAt: now}
		b := boundFailure(f, s.failureBudget(known, k))
		r.Failure = &b
		if err := ctx2.PutCIFailure(ctx, r); err != nil {
			return fmt.Errorf("record failure of check %s of task %s: %w", c.Name, taskID, err)
		}
		if i >= 0 {
			known[i] = r
		} else {
			known = append(known, r)
		}
	}
	return nil
}

// indexRecord returns the index of k's record in rs, or -1.
func indexRecord(rs []CIFailureRecord, k checkKey) int {
	for i, r := range rs {
		if (checkKey{r.Source, r.Name}) == k {
			return i
		}
	}
	return -1
}

// markCIDue marks the failed provider checks of t's head commit whose
// details are unknown due for the fetcher, when the Store keeps failures
// and t's CI provider can tell them. A record the fetcher dropped (the
// check was no longer failed when it came to it) is marked again.
func (s *Service) markCIDue(ctx context.Context, tx Tx, t *Task, stored []Check) error {
	var failed []Check
	for _, c := range stored {
		if c.Source == SourceProvider && c.Status == CheckFailed {
			failed = append(failed, c)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	ctx2, due := ciTxOf(tx)
	if ctx2 == nil {
		return nil
	}
	if _, ok := s.ciFor(t).(CIFailureReader); !ok {
		return nil // no one to ask
	}
	known, err := ctx2.CIFailures(ctx, t.ID, *t.HeadSHA)
	if err != nil {
		return fmt.Errorf("CI failures of task %s: %w", t.ID, err)
	}
	now := s.now()
	for _, c := range failed {
		if i := indexRecord(known, checkKey{c.Source, c.Name}); i >= 0 && !dropped(&known[i]) {
			continue
		}
		r := CIFailureRecord{TaskID: t.ID, HeadSHA: *t.HeadSHA, Source: c.Source, Name: c.Name, Due: true, NextAttemptAt: now, UpdatedAt: now}
		if err := ctx2.PutCIFailure(ctx, r); err != nil {
			return fmt.Errorf("mark failure of check %s of task %s due: %w", c.Name, t.ID, err)
		}
		if due != nil {
			*due = true
		}
	}
	return nil
}

// dropped reports whether r is a record the fetcher dropped without
// asking: not due, never tried, no details.
func dropped(r *CIFailureRecord) bool {
	return !r.Due && r.Attempts == 0 && r.Failure == nil
}

// ciFailedEvent returns the task.ci_failed event of t, whose head
// commit's CI has just failed: its failed checks that count, with the
// title and summary of their failures when known.
func (s *Service) ciFailedEvent(ctx context.Context, tx Tx, t *Task) (taskEvent, error) {
	head := *t.HeadSHA
	stored, err := tx.Checks(ctx, t.ID, head)
	if err != nil {
		return taskEvent{}, fmt.Errorf("checks of task %s: %w", t.ID, err)
	}
	var known []CIFailureRecord
	if ctx2, _ := ciTxOf(tx); ctx2 != nil {
		if known, err = ctx2.CIFailures(ctx, t.ID, head); err != nil {
			return taskEvent{}, fmt.Errorf("CI failures of task %s: %w", t.ID, err)
		}
	}
	failed := []FailedCheck{}
	var names []string
	for _, c := range countedChecks(stored, s.ciFor(t)) {
		if c.Status != CheckFailed {
			continue
		}
		names = append(names, c.Name)
		if len(failed) == eventFailedChecks {
			continue
		}
		fc := FailedCheck{Name: c.Name, URL: c.URL, Source: c.Source}
		if i := indexRecord(known, checkKey{c.Source, c.Name}); i >= 0 && known[i].Failure != nil {
			f := known[i].Failure
			fc.Title, fc.Summary = cutHead(f.Title, eventTitleBytes), cutHead(f.Summary, eventSummaryBytes)
		}
		failed = append(failed, fc)
	}
	summary := fmt.Sprintf("CI of task %s failed at %s", t.Identifier, head[:min(len(head), 12)])
	if len(names) > 0 {
		list := strings.Join(names[:min(len(names), 5)], ", ")
		if len(names) > 5 {
			list += fmt.Sprintf(" and %d more", len(names)-5)
		}
		summary += ": " + list
	}
	return taskEvent{typ: EventTaskCIFailed, summary: summary, headSHA: head, failedChecks: failed}, nil
}

// attachFailures sets the Failure of each failed check of checks, of t's
// commit head, to the details the Store holds.
func (s *Service) attachFailures(ctx context.Context, taskID, head string, checks []Check) error {
	if s.caps.ciFailures == nil {
		return nil
	}
	failed := false
	for _, c := range checks {
		failed = failed || c.Status == CheckFailed
	}
	if !failed {
		return nil
	}
	known, err := s.caps.ciFailures.CIFailures(ctx, taskID, head)
	if err != nil {
		return fmt.Errorf("CI failures of task %s: %w", taskID, err)
	}
	for i := range checks {
		if checks[i].Status != CheckFailed {
			continue
		}
		if j := indexRecord(known, checkKey{checks[i].Source, checks[i].Name}); j >= 0 {
			checks[i].Failure = known[j].Failure
		}
	}
	return nil
}

// newCIFetch returns the beat of the fetcher of failure details.
func newCIFetch(clock Clock) *dueloop.Beat { return dueloop.New(clock, ciFetchPoll, ciFetchPoll) }

// fetchCIFailures fetches the details of every failure due now, chunk at
// a time.
func (s *Service) fetchCIFailures(ctx context.Context) {
	if s.caps.ciFailures == nil {
		return
	}
	if err := dueloop.Drain(ctx, ciFetchChunk, s.claimCIFailures, s.fetchClaimed); err != nil && ctx.Err() == nil {
		s.log.Error("claim CI failures to fetch", "err", err)
	}
}

// claimCIFailures claims up to limit due failures, leased for as long as
// their fetches may take.
func (s *Service) claimCIFailures(ctx context.Context, limit int) ([]CIFailureRecord, error) {
	var claimed []CIFailureRecord
	// A claim lost in a power cut only leaves the failures due.
	err := s.updateRelaxed(ctx, func(tx Tx) error {
		ctx2, _ := ciTxOf(tx)
		if ctx2 == nil {
			return errors.New("lifecycle: the Store's transactions keep no CI failures (lifecycle.CIFailureTx)")
		}
		now := s.clock.Now()
		rs, err := ctx2.ClaimCIFailures(ctx, ClaimCIFailuresParams{Now: now, Until: now.Add(2*s.cfg.ProviderTimeout + ciFetchPoll), Limit: limit})
		claimed = rs
		return err
	})
	return claimed, err
}

// fetchClaimed fetches the details of claimed failures, a few at once.
func (s *Service) fetchClaimed(ctx context.Context, rs []CIFailureRecord) {
	sem := make(chan struct{}, ciFetchConcurrency)
	var wg sync.WaitGroup
	for _, r := range rs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.fetchCIFailure(ctx, r); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "fetch CI failure details; tried again when the claim ends", "task", r.TaskID, "check", r.Name, "err", err)
			}
		}()
	}
	wg.Wait()
}

// fetchCIFailure asks the CI provider of r's task why r's check failed
// and stores the answer. A check that is no longer the task's failed
// check is dropped unasked; a failure of the host is tried again later,
// up to ciFetchAttempts times in all. It returns the errors of the
// Store, after which r is claimed again once its lease ends.
func (s *Service) fetchCIFailure(ctx context.Context, r CIFailureRecord) error {
	next := r
	next.Due, next.NextAttemptAt = false, Timestamp{}
	t, err := s.store.Task(ctx, r.TaskID)
	if errors.Is(err, ErrNotFound) {
		return s.finishCIFailure(ctx, r, next, nil)
	}
	if err != nil {
		return fmt.Errorf("get task %s: %w", r.TaskID, err)
	}
	if t.HeadSHA == nil || *t.HeadSHA != r.HeadSHA {
		return s.finishCIFailure(ctx, r, next, nil) // the head moved on
	}
	checks, err := s.store.Checks(ctx, t.ID, r.HeadSHA)
	if err != nil {
		return fmt.Errorf("checks of task %s: %w", t.ID, err)
	}
	i := -1
	for j, c := range checks {
		if c.Source == r.Source && c.Name == r.Name && c.Status == CheckFailed {
			i = j
		}
	}
	reader, ok := s.ciFor(&t).(CIFailureReader)
	if i < 0 || !ok {
		return s.finishCIFailure(ctx, r, next, nil) // passed on a rerun, or no one to ask
	}
	c := checks[i]
	q := CIFailureQuery{Task: t, PullRequest: t.PullRequestRef(), HeadSHA: r.HeadSHA,
		Check: CICheck{Name: c.Name, Status: c.Status, URL: deref(c.URL)}, MaxBytes: s.cfg.CIFailureExcerptBytes}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	f, err := reader.CIFailure(cctx, q)
	cancel()
	next.Attempts++
	switch {
	case err == nil:
		return s.finishCIFailure(ctx, r, next, &f)
	case errors.Is(err, ErrNotFound):
		return s.finishCIFailure(ctx, r, next, nil) // the host has none
	case ctx.Err() != nil:
		return ctx.Err()
	case next.Attempts >= ciFetchAttempts:
		s.log.WarnContext(ctx, "CI failure details not fetched; given up", "task", r.TaskID, "check", r.Name, "attempts", next.Attempts, "err", err)
		return s.finishCIFailure(ctx, r, next, nil)
	}
	wait := min(ciFetchFirstRetry<<(next.Attempts-1), ciFetchMaxRetry)
	if w, ok := lifecycletype.RateLimitWait(err); ok {
		wait = max(wait, w)
	}
	s.log.InfoContext(ctx, "CI failure details not fetched; tried again", "task", r.TaskID, "check", r.Name, "wait", wait, "err", err)
	next.Due, next.NextAttemptAt = true, NewTimestamp(s.clock.Now().Add(wait))
	return s.finishCIFailure(ctx, r, next, nil)
}

// finishCIFailure stores next in place of the claimed record r, with
// failure's details bounded, unless r is no longer due (another fetcher
// took it over after its lease ended and stored it).
func (s *Service) finishCIFailure(ctx context.Context, r, next CIFailureRecord, failure *CIFailure) error {
	return s.update(ctx, func(tx Tx) error {
		ctx2, _ := ciTxOf(tx)
		if ctx2 == nil {
			return errors.New("lifecycle: the Store's transactions keep no CI failures (lifecycle.CIFailureTx)")
		}
		known, err := ctx2.CIFailures(ctx, r.TaskID, r.HeadSHA)
		if err != nil {
			return fmt.Errorf("CI failures of task %s: %w", r.TaskID, err)
		}
		k := checkKey{r.Source, r.Name}
		i := indexRecord(known, k)
		if i < 0 || !known[i].Due {
			return nil
		}
		next.UpdatedAt, next.Failure = s.now(), nil
		if failure != nil {
			f := *failure
			f.FetchedAt = next.UpdatedAt
			b := boundFailure(f, s.failureBudget(known, k))
			next.Failure = &b
		}
		if err := ctx2.PutCIFailure(ctx, next); err != nil {
			return fmt.Errorf("record failure of check %s of task %s: %w", r.Name, r.TaskID, err)
		}
		return nil
	})
}
