package artifact_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/adaptertest"
	"github.com/tasklifecycle/lifecycle/adapter/artifact"
)

// The artifact adapter runs the suite with what a person can do to its
// repositories with git (push to a branch), its Deployer, and its CI
// provider, which has no checks of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	adaptertest.Run(t, adaptertest.Harness{
		New: func(t *testing.T) lifecycle.ProviderAdapter { return newAdapter(t, t.TempDir()) },
		Push: func(t *testing.T, a lifecycle.ProviderAdapter, pr lifecycle.PullRequest) string {
			return push(t, a.(*artifact.Adapter), pr)
		},
		NewDeployer: func(t *testing.T, a lifecycle.ProviderAdapter) lifecycle.Deployer {
			d, err := artifact.NewDeployer(artifact.DeployerConfig{Adapter: a.(*artifact.Adapter), Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
	})
}

// push commits a file to the branch of pr, with go-git and without the
// Adapter, as `git commit-tree` and `git update-ref` would, and returns
// the new head.
func push(t *testing.T, a *artifact.Adapter, pr lifecycle.PullRequest) string {
	t.Helper()
	r := openRepo(t, a, pr.Repo)
	branch := plumbing.NewBranchReferenceName(pr.Head)
	tip, err := r.Reference(branch, false)
	if err != nil {
		t.Fatalf("branch %s: %v", pr.Head, err)
	}
	parent, err := r.CommitObject(tip.Hash())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := parent.Tree()
	if err != nil {
		t.Fatal(err)
	}
	name := "PUSHED-" + tip.Hash().String()[:8] + ".txt"
	blob, err := store(r.Storer, plumbing.BlobObject, func(o plumbing.EncodedObject) error {
		w, err := o.Writer()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "pushed by hand on top of %s\n", tip.Hash())
		return w.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	entries := append(slices.Clone(tree.Entries), object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: blob})
	slices.SortFunc(entries, func(x, y object.TreeEntry) int { return strings.Compare(treeKey(x), treeKey(y)) })
	root, err := store(r.Storer, plumbing.TreeObject, (&object.Tree{Entries: entries}).Encode)
	if err != nil {
		t.Fatal(err)
	}
	sig := object.Signature{Name: "A Person", Email: "person@example.com", When: epoch}
	c := &object.Commit{Author: sig, Committer: sig, Message: "Pushed by hand\n", TreeHash: root, ParentHashes: []plumbing.Hash{tip.Hash()}}
	h, err := store(r.Storer, plumbing.CommitObject, c.Encode)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Storer.CheckAndSetReference(plumbing.NewHashReference(branch, h), tip); err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// treeKey orders tree entries as git does: a directory as its name and '/'.
func treeKey(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// store writes an object made by encode into s.
func store(s storage.Storer, typ plumbing.ObjectType, encode func(plumbing.EncodedObject) error) (plumbing.Hash, error) {
	o := s.NewEncodedObject()
	o.SetType(typ)
	if err := encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(o)
}
