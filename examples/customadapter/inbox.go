package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tasklifecycle/lifecycle"
)

// InboxAdapter is a complete lifecycle.ProviderAdapter for a team whose
// "code host" is a review inbox: each pull request is a JSON file in a
// directory that people (or another tool) read. It is what writing an
// adapter takes: three methods and their error contracts.
type InboxAdapter struct {
	dir string
	mu  sync.Mutex // one writer at a time: numbering and merges stay consistent
}

var _ lifecycle.ProviderAdapter = (*InboxAdapter)(nil)

// NewInboxAdapter keeps pull requests under dir, which it creates.
func NewInboxAdapter(dir string) (*InboxAdapter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return &InboxAdapter{dir: dir}, nil
}

// pullFile is the JSON of one pull request in the inbox.
type pullFile struct {
	Number         int      `json:"number"`
	Head           string   `json:"head"`
	Base           string   `json:"base"`
	HeadSHA        string   `json:"headSha"`
	State          string   `json:"state"`
	MergeCommitSHA string   `json:"mergeCommitSha,omitempty"`
	Task           string   `json:"task"`
	Title          string   `json:"title"`
	Summary        string   `json:"summary"`
	Reviewers      []string `json:"reviewers,omitempty"`
}

func (a *InboxAdapter) path(n int) string { return filepath.Join(a.dir, fmt.Sprintf("%d.json", n)) }

func (a *InboxAdapter) read(n int) (pullFile, error) {
	var p pullFile
	b, err := os.ReadFile(a.path(n))
	if errors.Is(err, fs.ErrNotExist) {
		return p, fmt.Errorf("inbox: pull request %d: %w", n, lifecycle.ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("inbox: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("inbox: pull request %d: %w", n, err)
	}
	return p, nil
}

// write replaces a pull request file atomically.
func (a *InboxAdapter) write(p pullFile) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	tmp := a.path(p.Number) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	if err := os.Rename(tmp, a.path(p.Number)); err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	return nil
}

// all returns every pull request, by number.
func (a *InboxAdapter) all() ([]pullFile, error) {
	var out []pullFile
	for n := 1; ; n++ {
		p, err := a.read(n)
		if errors.Is(err, lifecycle.ErrNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
}

func (a *InboxAdapter) toPR(p pullFile) lifecycle.PullRequest {
	return lifecycle.PullRequest{
		PullRequestRef:     lifecycle.PullRequestRef{Owner: "inbox", Repo: filepath.Base(a.dir), Number: p.Number},
		URL:                "file://" + a.path(p.Number),
		Head:               p.Head,
		Base:               p.Base,
		HeadSHA:            p.HeadSHA,
		State:              lifecycle.PullRequestState(p.State),
		MergeCommitSHA:     p.MergeCommitSHA,
		RequestedReviewers: p.Reviewers,
	}
}

// contentSHA names a version of the work: the inbox has no git, so the
// head commit is the hash of what was submitted.
func contentSHA(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// EnsurePullRequest implements lifecycle.ProviderAdapter.
func (a *InboxAdapter) EnsurePullRequest(ctx context.Context, req lifecycle.PullRequestRequest) (lifecycle.PullRequest, error) {
	if err := ctx.Err(); err != nil {
		return lifecycle.PullRequest{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	head, base := req.Head, req.Base
	if head == "" {
		head = "agent/" + strings.ToLower(req.Task.Identifier)
	}
	if base == "" {
		base = "main"
	}
	prs, err := a.all()
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	p, created := pullFile{Number: len(prs) + 1, Head: head, Base: base, State: "open"}, true
	for _, existing := range prs {
		if existing.Head == head && existing.State == "open" {
			p, created = existing, false
		}
	}
	p.Task, p.Title, p.Summary, p.Reviewers = req.Task.ID, req.Title, req.Summary, req.Reviewers
	if p.Title == "" {
		p.Title = req.Task.Identifier + ": " + req.Task.Title
	}
	p.HeadSHA = contentSHA(head, req.SubmissionID, req.Summary)
	if err := a.write(p); err != nil {
		return lifecycle.PullRequest{}, err
	}
	pr := a.toPR(p)
	pr.Created = created
	return pr, nil
}

// PullRequest implements lifecycle.ProviderAdapter.
func (a *InboxAdapter) PullRequest(ctx context.Context, ref lifecycle.PullRequestRef) (lifecycle.PullRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, err := a.read(ref.Number)
	if err != nil {
		return lifecycle.PullRequest{}, err
	}
	return a.toPR(p), nil
}

// Merge implements lifecycle.ProviderAdapter: only at the expected head,
// and never twice.
func (a *InboxAdapter) Merge(ctx context.Context, req lifecycle.MergeRequest) (lifecycle.MergeResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, err := a.read(req.Ref.Number)
	if err != nil {
		return lifecycle.MergeResult{}, err
	}
	if p.HeadSHA != req.ExpectedHeadSHA {
		return lifecycle.MergeResult{}, fmt.Errorf("inbox: pull request %d is at %s: %w", p.Number, p.HeadSHA, lifecycle.ErrHeadMismatch)
	}
	if p.State == "merged" {
		return lifecycle.MergeResult{MergeCommitSHA: p.MergeCommitSHA, AlreadyMerged: true}, nil
	}
	p.State, p.MergeCommitSHA = "merged", contentSHA("merge", p.Base, p.HeadSHA)
	if err := a.write(p); err != nil {
		return lifecycle.MergeResult{}, err
	}
	return lifecycle.MergeResult{MergeCommitSHA: p.MergeCommitSHA}, nil
}
