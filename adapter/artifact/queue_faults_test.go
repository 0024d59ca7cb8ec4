package artifact_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// tieCommit stores a commit of the empty tree dated when.
func tieCommit(t *testing.T, st storage.Storer, msg string, when time.Time, parents ...plumbing.Hash) plumbing.Hash {
	t.Helper()
	tree := st.NewEncodedObject()
	if err := (&object.Tree{}).Encode(tree); err != nil {
		t.Fatal(err)
	}
	th, err := st.SetEncodedObject(tree)
	if err != nil {
		t.Fatal(err)
	}
	sig := object.Signature{Name: "t", Email: "t@example.com", When: when}
	o := st.NewEncodedObject()
	if err := (&object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: th, ParentHashes: parents}).Encode(o); err != nil {
		t.Fatal(err)
	}
	h, err := st.SetEncodedObject(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A fast-forward is a fast-forward when every commit is dated the same
// second, as a busy queue's candidates are: main B0→M1→M2→X, a change H
// made on B0, and the candidate C = merge(X, H). Walking by commit time,
// the merge base of X and C could come out as B0 (popped before its
// descendants, ties broken by hash), and the advance of main from X to C
// was refused in about 1 of 20 repositories.
func TestAdvanceWithCommitTimesTied(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	when := time.Unix(1795947000, 0)
	for i := range 100 {
		name := fmt.Sprintf("web%d", i)
		repo, err := git.PlainInit(filepath.Join(dir, name), false)
		if err != nil {
			t.Fatal(err)
		}
		st := repo.Storer
		b0 := tieCommit(t, st, fmt.Sprintf("b0 %d", i), when)
		m1 := tieCommit(t, st, fmt.Sprintf("m1 %d", i), when, b0)
		m2 := tieCommit(t, st, fmt.Sprintf("m2 %d", i), when, m1)
		x := tieCommit(t, st, fmt.Sprintf("x %d", i), when, m2)
		h := tieCommit(t, st, fmt.Sprintf("h %d", i), when, b0)
		c := tieCommit(t, st, fmt.Sprintf("c %d", i), when, x, h)
		if err := st.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), x)); err != nil {
			t.Fatal(err)
		}
		if err := st.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName("main"))); err != nil {
			t.Fatal(err)
		}
		a, err := artifact.New(artifact.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		err = a.AdvanceBranch(context.Background(), lifecycle.AdvanceRequest{Repo: lifecycle.RepoRef{Owner: "local", Repo: name}, Branch: "main", From: x.String(), To: c.String()})
		a.Close()
		if err != nil {
			t.Fatalf("repository %d: a fast-forward from %s to %s was refused: %v", i, x, c, err)
		}
	}
}

// A process killed while it wrote a ref leaves an empty "<ref>.lock"
// among the refs. The repository opens all the same: the advances under
// way are found from their own notes, not from a listing of every ref,
// which go-git refuses ("ref file is empty").
func TestOpenWithAnEmptyRefLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	repo, err := git.PlainInit(filepath.Join(dir, "web"), false)
	if err != nil {
		t.Fatal(err)
	}
	st := repo.Storer
	b0 := tieCommit(t, st, "b0", time.Unix(1795947000, 0))
	if err := st.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), b0)); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "web", ".git", "refs", "heads", "lifecycle", "eng-1.lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := artifact.New(artifact.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	head, err := a.BranchHead(context.Background(), lifecycle.RepoRef{Owner: "local", Repo: "web"}, "main")
	if err != nil || head != b0.String() {
		t.Fatalf("BranchHead(main) = %s, %v; want %s", head, err, b0)
	}
}
