package artifact

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/gittext"
)

// The lifecycle's merge queue on local repositories (see
// [lifecycle.QueueHost]): candidates are merge commits written with the
// same three-way tree merge as [Adapter.Merge], on queue branches; the base
// branch advances to a tested candidate by a compare-and-swap of its ref,
// and the open pull requests whose heads the base then contains are
// recorded as merged with that commit, as GitHub marks the pull requests
// of a pushed branch merged.

var _ lifecycle.QueueHost = (*Adapter)(nil)

// advanceRefPrefix starts the refs that record an advance of a base branch
// under way: refs/lifecycle/advance/<branch> points at the commit the
// branch moves to from before it moves until the pull requests it merges
// are recorded, so that an Adapter that opens the repository after a crash
// in between records them (see finishAdvances).
const advanceRefPrefix = "refs/lifecycle/advance/"

// advanceRef returns the ref that records an advance of branch under way.
func advanceRef(branch string) plumbing.ReferenceName {
	return plumbing.ReferenceName(advanceRefPrefix + branch)
}

// NativeQueue implements [lifecycle.QueueHost]: false, local repositories
// have no merge queue of their own.
func (a *Adapter) NativeQueue(ctx context.Context, repo lifecycle.RepoRef, base string) (bool, error) {
	return false, ctx.Err()
}

// queueRepo returns the repository repo names: its Repo is a repository
// name as in a PullRequestRef, its Owner Config.Owner. Another owner, or a
// repository that does not exist, gives an error matching
// lifecycle.ErrNotFound.
func (a *Adapter) queueRepo(ctx context.Context, repo lifecycle.RepoRef) (*repo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if repo.Owner != a.cfg.Owner || !validRepoName(repo.Repo) {
		return nil, errNoRepo
	}
	return a.repo(ctx, repo.Repo, false)
}

// queueBranch checks a branch name given to a QueueHost method: it must be
// a valid branch name, without "refs/heads/".
func queueBranch(field, s string) (plumbing.ReferenceName, error) {
	if b, ok := gittext.Branch(s); !ok || b != s {
		return "", fmt.Errorf("%s %q is not a valid branch name", field, s)
	}
	return plumbing.NewBranchReferenceName(s), nil
}

// parseSHA returns the hash a full lower-case hexadecimal SHA-1 names.
func parseSHA(field, s string) (plumbing.Hash, error) {
	if len(s) != 40 || strings.ToLower(s) != s {
		return plumbing.ZeroHash, fmt.Errorf("%s %q is not a full commit SHA", field, s)
	}
	if _, err := hex.DecodeString(s); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s %q is not a full commit SHA", field, s)
	}
	return plumbing.NewHash(s), nil
}

// commitOf reads commit h, with an error matching lifecycle.ErrNotFound
// when the repository has no such commit.
func (r *repo) commitOf(h plumbing.Hash) (commitInfo, error) {
	c, err := r.commitInfo(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return commitInfo{}, fmt.Errorf("no commit %s: %w", h, lifecycle.ErrNotFound)
	}
	return c, err
}

// BranchHead implements [lifecycle.QueueHost]. A branch that does not
// exist gives an error matching [lifecycle.ErrNotFound].
func (a *Adapter) BranchHead(ctx context.Context, repo lifecycle.RepoRef, branch string) (string, error) {
	h, err := a.branchHead(ctx, repo, branch)
	if err != nil {
		return "", fmt.Errorf("artifact: head of branch %q of %s: %w", branch, repo, err)
	}
	return h, nil
}

func (a *Adapter) branchHead(ctx context.Context, ref lifecycle.RepoRef, branch string) (string, error) {
	name, err := queueBranch("branch", branch)
	if err != nil {
		return "", err
	}
	r, err := a.queueRepo(ctx, ref)
	if err != nil {
		return "", err
	}
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	h, err := r.ref(name)
	if err != nil {
		return "", err
	}
	if h.IsZero() {
		return "", fmt.Errorf("no such branch: %w", lifecycle.ErrNotFound)
	}
	return h.String(), nil
}

// Tree implements [lifecycle.QueueHost]. A commit the repository does not
// have gives an error matching [lifecycle.ErrNotFound].
func (a *Adapter) Tree(ctx context.Context, repo lifecycle.RepoRef, sha string) (string, error) {
	t, err := a.treeOf(ctx, repo, sha)
	if err != nil {
		return "", fmt.Errorf("artifact: tree of %s in %s: %w", sha, repo, err)
	}
	return t, nil
}

func (a *Adapter) treeOf(ctx context.Context, ref lifecycle.RepoRef, sha string) (string, error) {
	h, err := parseSHA("commit", sha)
	if err != nil {
		return "", err
	}
	r, err := a.queueRepo(ctx, ref)
	if err != nil {
		return "", err
	}
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	c, err := r.commitOf(h)
	if err != nil {
		return "", err
	}
	return c.tree.String(), nil
}

// BuildCandidate implements [lifecycle.QueueHost]. Starting from
// req.Parent, it merges each head in turn with the three-way tree merge of
// [Adapter.Merge]: a merge commit per head, whose parents are the commit so
// far and the head, whose message is req.Title (or "Merge pull request #N
// into the queue") with the trailers Lifecycle-Queue-Pull (its number) and
// Lifecycle-Queue-Base; a head the commit so far already contains adds nothing.
// A head that changed a path the commit so far changed differently gives a
// [*lifecycle.CandidateConflictError] naming it and the path, and changes
// nothing. It then points req.Branch at the result, creating it or moving
// it from wherever it was; req.Branch may not be req.Base, nor the head or
// base of an open pull request.
//
// The merge commits are dated as the later of their parents, not with
// Config.Now, and do not name req.Branch, so the same parent, heads, base
// and title make the same commit, on any queue branch, and a candidate
// rebuilt unchanged keeps its tested result (see Config.QueueCheck).
func (a *Adapter) BuildCandidate(ctx context.Context, req lifecycle.CandidateRequest) (string, error) {
	h, err := a.buildCandidate(ctx, req)
	if err != nil {
		var conflict *lifecycle.CandidateConflictError
		if errors.As(err, &conflict) {
			return "", err
		}
		return "", fmt.Errorf("artifact: build candidate %s of %s: %w", req.Branch, req.Repo, err)
	}
	return h, nil
}

func (a *Adapter) buildCandidate(ctx context.Context, req lifecycle.CandidateRequest) (string, error) {
	branch, err := queueBranch("branch", req.Branch)
	if err != nil {
		return "", err
	}
	if req.Branch == req.Base {
		return "", fmt.Errorf("the queue branch is the base branch %q", req.Base)
	}
	parent, err := parseSHA("parent", req.Parent)
	if err != nil {
		return "", err
	}
	heads := make([]plumbing.Hash, len(req.Heads))
	for i, h := range req.Heads {
		if heads[i], err = parseSHA(fmt.Sprintf("head %d (%s)", i, h.PullRequest), h.SHA); err != nil {
			return "", err
		}
	}
	r, err := a.queueRepo(ctx, req.Repo)
	if err != nil {
		return "", err
	}
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	s, err := r.loadPulls()
	if err != nil {
		return "", err
	}
	if s.usesBranch(req.Branch) {
		return "", fmt.Errorf("branch %q belongs to an open pull request", req.Branch)
	}

	cur := parent
	cc, err := r.commitOf(cur)
	if err != nil {
		return "", err
	}
	for i, head := range heads {
		hc, err := r.commitOf(head)
		if err != nil {
			return "", fmt.Errorf("head of %s: %w", req.Heads[i].PullRequest, err)
		}
		mb, err := r.mergeBase(cur, head)
		if err != nil {
			return "", fmt.Errorf("find the merge base of %s: %w", req.Heads[i].PullRequest, err)
		}
		if mb == head {
			continue // already contained
		}
		var mbTree plumbing.Hash // none: unrelated histories
		if !mb.IsZero() {
			mbc, err := r.commitInfo(mb)
			if err != nil {
				return "", err
			}
			mbTree = mbc.tree
		}
		tree, err := r.mergeTrees(mbTree, cc.tree, hc.tree, "")
		if errors.Is(err, errMergeConflict) {
			return "", &lifecycle.CandidateConflictError{Head: req.Heads[i], Message: err.Error()}
		}
		if err != nil {
			return "", fmt.Errorf("merge %s: %w", req.Heads[i].PullRequest, err)
		}
		title := req.Title
		if title == "" {
			title = fmt.Sprintf("Merge pull request #%d into the queue", req.Heads[i].PullRequest.Number)
		}
		sig := signature(a.cfg.CommitterName, a.cfg.CommitterEmail, time.Unix(max(cc.when, hc.when), 0).UTC())
		cur, err = r.writeCommit(&object.Commit{
			Author:    sig,
			Committer: sig,
			Message: message(title, "",
				"Lifecycle-Queue-Pull", strconv.Itoa(req.Heads[i].PullRequest.Number),
				"Lifecycle-Queue-Base", req.Base),
			TreeHash:     tree,
			ParentHashes: []plumbing.Hash{cur, head},
		})
		if err != nil {
			return "", err
		}
		if cc, err = r.commitInfo(cur); err != nil {
			return "", err
		}
	}
	old, err := r.ref(branch)
	if err != nil {
		return "", err
	}
	if old != cur {
		if err := r.setRef(branch, cur, old); err != nil {
			return "", err
		}
	}
	return cur.String(), nil
}

// usesBranch reports whether branch is the head or the base of an open
// pull request.
func (s *pullSet) usesBranch(branch string) bool {
	if s.openFor(branch) != nil {
		return true
	}
	for _, p := range s.open {
		if p.Base == branch {
			return true
		}
	}
	return false
}

// AdvanceBranch implements [lifecycle.QueueHost]. It moves req.Branch from
// req.From to req.To, a descendant of req.From, by a compare-and-swap of
// its ref under the repository's write lock; when the branch is already at
// req.To it returns nil, and when it is elsewhere (or missing) an error
// matching [lifecycle.ErrBranchMoved]. Then every open pull request into
// req.Branch whose head req.To contains is recorded as merged, with
// req.To as its MergeCommitSHA: [Adapter.PullRequest] reads it merged, and
// [Adapter.Merge] at its head answers AlreadyMerged with req.To. The
// branch moves before the records; should the process stop in between,
// the next Adapter to open the repository, or the next AdvanceBranch or
// Merge into the branch, records them (the advance is noted under
// refs/lifecycle/advance/ until they are).
func (a *Adapter) AdvanceBranch(ctx context.Context, req lifecycle.AdvanceRequest) error {
	if err := a.advanceBranch(ctx, req); err != nil {
		return fmt.Errorf("artifact: advance %s of %s from %s to %s: %w", req.Branch, req.Repo, req.From, req.To, err)
	}
	return nil
}

func (a *Adapter) advanceBranch(ctx context.Context, req lifecycle.AdvanceRequest) error {
	branch, err := queueBranch("branch", req.Branch)
	if err != nil {
		return err
	}
	from, err := parseSHA("from", req.From)
	if err != nil {
		return err
	}
	to, err := parseSHA("to", req.To)
	if err != nil {
		return err
	}
	r, err := a.queueRepo(ctx, req.Repo)
	if err != nil {
		return err
	}
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := r.ref(branch)
	if err != nil {
		return err
	}
	if cur == to {
		// Done before, perhaps not to the end.
		return a.finishAdvance(r, req.Branch)
	}
	if cur != from {
		if cur.IsZero() {
			return fmt.Errorf("the branch does not exist: %w", lifecycle.ErrBranchMoved)
		}
		return fmt.Errorf("the branch is at %s: %w", cur, lifecycle.ErrBranchMoved)
	}
	if _, err := r.commitOf(to); err != nil {
		return err
	}
	if ff, err := r.isAncestor(from, to); err != nil {
		return err
	} else if !ff {
		return fmt.Errorf("%s does not descend from %s: only a fast-forward advances a branch", to, from)
	}
	// Finish an earlier advance left unrecorded before noting this one.
	if err := a.finishAdvance(r, req.Branch); err != nil {
		return err
	}
	note := advanceRef(req.Branch)
	if err := r.setRef(note, to, plumbing.ZeroHash); err != nil {
		return err
	}
	if err := r.setRef(branch, to, from); err != nil {
		if rerr := r.removeRef(note, to); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return a.finishAdvance(r, req.Branch)
}

// finishAdvance completes the advance of branch noted on its advance ref,
// if any: when the branch contains the commit it advanced to, the open pull
// requests into the branch whose heads that commit contains are recorded
// as merged with it. Then it removes the note. The caller holds the write
// lock.
func (a *Adapter) finishAdvance(r *repo, branch string) error {
	note := advanceRef(branch)
	to, err := r.ref(note)
	if err != nil || to.IsZero() {
		return err
	}
	tip, err := r.ref(plumbing.NewBranchReferenceName(branch))
	if err != nil {
		return err
	}
	landed := tip == to
	if !landed && !tip.IsZero() {
		if landed, err = r.isAncestor(to, tip); err != nil {
			return err
		}
	}
	if landed {
		if err := a.markContained(r, branch, to); err != nil {
			return err
		}
	}
	return r.removeRef(note, to)
}

// markContained records as merged with commit to the open pull requests
// into branch whose heads to contains. The caller holds the write lock.
func (a *Adapter) markContained(r *repo, branch string, to plumbing.Hash) error {
	s, err := r.loadPulls()
	if err != nil {
		return err
	}
	for _, n := range slices.Sorted(maps.Keys(s.byNum)) {
		p := s.byNum[n]
		if p.State != lifecycle.PullRequestOpen || p.Base != branch {
			continue
		}
		head, err := r.ref(plumbing.NewBranchReferenceName(p.Head))
		if err != nil {
			return err
		}
		if head.IsZero() {
			continue
		}
		contained, err := r.isAncestor(head, to)
		if err != nil {
			return err
		}
		if !contained {
			continue
		}
		if s, err = r.markMerged(s, p, head, to, a.signature(), nil); err != nil {
			return err
		}
	}
	return nil
}

// finishAdvances completes every advance noted in the repository (see
// finishAdvance). The caller holds the write lock.
func (a *Adapter) finishAdvances(r *repo) error {
	branches, err := r.advanceNotes()
	if err != nil {
		return fmt.Errorf("list the advances under way: %w", err)
	}
	for _, b := range branches {
		if err := a.finishAdvance(r, b); err != nil {
			return fmt.Errorf("finish the advance of %s: %w", b, err)
		}
	}
	return nil
}

// advanceNotes returns the branches whose advance notes are in the
// repository, loose or packed. It reads the notes' own files, not every
// ref: a process killed while it wrote a ref leaves an empty "<ref>.lock"
// among the refs, which go-git's listing of every ref refuses, and which
// is not a note.
func (r *repo) advanceNotes() ([]string, error) {
	var branches []string
	dir := filepath.Join(r.gitDir, filepath.FromSlash(advanceRefPrefix))
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case d.IsDir() || strings.HasSuffix(path, ".lock"):
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		branches = append(branches, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, err
	}
	packed, err := os.ReadFile(filepath.Join(r.gitDir, "packed-refs"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for line := range strings.Lines(string(packed)) {
		_, name, ok := strings.Cut(strings.TrimSpace(line), " ")
		if b, isNote := strings.CutPrefix(name, advanceRefPrefix); ok && isNote && !slices.Contains(branches, b) {
			branches = append(branches, b)
		}
	}
	return branches, nil
}

// DeleteBranch implements [lifecycle.QueueHost]. A branch that does not
// exist is not an error; Config.BaseBranch and the head or base of an open
// pull request are not deleted (an error).
func (a *Adapter) DeleteBranch(ctx context.Context, repo lifecycle.RepoRef, branch string) error {
	if err := a.deleteBranch(ctx, repo, branch); err != nil {
		return fmt.Errorf("artifact: delete branch %q of %s: %w", branch, repo, err)
	}
	return nil
}

func (a *Adapter) deleteBranch(ctx context.Context, ref lifecycle.RepoRef, branch string) error {
	name, err := queueBranch("branch", branch)
	if err != nil {
		return err
	}
	r, err := a.queueRepo(ctx, ref)
	if err != nil {
		return err
	}
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := r.ref(name)
	if err != nil || cur.IsZero() {
		return err
	}
	s, err := r.loadPulls()
	if err != nil {
		return err
	}
	if branch == a.cfg.BaseBranch || s.usesBranch(branch) {
		return fmt.Errorf("branch %q is the base branch or belongs to an open pull request", branch)
	}
	return r.removeRef(name, cur)
}

// removeRef removes ref name if it still points at old, and the
// directories of refs/ it leaves empty. The caller holds the write lock.
func (r *repo) removeRef(name plumbing.ReferenceName, old plumbing.Hash) error {
	cur, err := r.ref(name)
	if err != nil {
		return err
	}
	if cur != old {
		return fmt.Errorf("remove %s: %w", name, errRefMoved)
	}
	if err := r.st.RemoveReference(name); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	// Empty directories left would keep a branch of their name from being
	// made ("lifecycle-queue/main" after "lifecycle-queue/main/1").
	refs := filepath.Join(r.gitDir, "refs")
	for dir := filepath.Dir(filepath.Join(r.gitDir, filepath.FromSlash(name.String()))); filepath.Dir(dir) != refs && strings.HasPrefix(dir, refs+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty, or gone
		}
	}
	return nil
}

// pendingAdvance reports whether an advance of branch is noted and not
// finished (see finishAdvance).
func (r *repo) pendingAdvance(branch string) bool {
	h, err := r.ref(advanceRef(branch))
	return err != nil || !h.IsZero()
}
