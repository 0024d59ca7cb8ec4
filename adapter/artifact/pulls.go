package artifact

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/tasklifecycle/lifecycle"
)

// pullsRef is the ref whose commits hold a repository's pull request
// records, one file "<bucket>/<number>.json" per pull request, where bucket
// is number/100: a change rewrites one directory of at most 100 records and
// the root, not a tree of every record. Each change is a commit, so `git
// log -p refs/lifecycle/pulls` is the history of the pull requests.
const pullsRef = plumbing.ReferenceName("refs/lifecycle/pulls")

// pullsPerBucket is how many records share a directory of pullsRef's tree.
const pullsPerBucket = 100

// pullBucket returns the directory of the record of pull request n.
func pullBucket(n int) string { return strconv.Itoa(n / pullsPerBucket) }

// pullRecord is a pull request as stored in the repository. The head commit
// of an open pull request is not stored: it is read from its branch.
type pullRecord struct {
	Number             int                        `json:"number"`
	Title              string                     `json:"title"`
	Body               string                     `json:"body,omitempty"`
	Head               string                     `json:"head"`
	Base               string                     `json:"base"`
	State              lifecycle.PullRequestState `json:"state"`
	Draft              bool                       `json:"draft"`
	RequestedReviewers []string                   `json:"requestedReviewers"`
	TaskID             string                     `json:"taskId,omitempty"`
	TaskIdentifier     string                     `json:"taskIdentifier,omitempty"`
	CreatedAt          lifecycle.Timestamp        `json:"createdAt"`
	// MergedHeadSHA, MergeCommitSHA and MergedAt are set when State is
	// merged.
	MergedHeadSHA  string               `json:"mergedHeadSha,omitempty"`
	MergeCommitSHA string               `json:"mergeCommitSha,omitempty"`
	MergedAt       *lifecycle.Timestamp `json:"mergedAt,omitempty"`
}

// clone returns a copy of p that shares no memory with it.
func (p *pullRecord) clone() *pullRecord {
	c := *p
	c.RequestedReviewers = slices.Clone(p.RequestedReviewers)
	if p.MergedAt != nil {
		t := *p.MergedAt
		c.MergedAt = &t
	}
	return &c
}

// pullSet is the pull requests of a repository as of one commit of
// pullsRef. savePull changes it in place, under the write lock, once the
// change is committed, so that a save costs the same with 10 pull
// requests or 10,000; records are replaced, never changed.
type pullSet struct {
	commit plumbing.Hash // zero when there are no pull requests yet
	tree   plumbing.Hash
	byNum  map[int]*pullRecord
	open   map[string]*pullRecord // the open pull requests by head branch
	max    int
}

// put adds p to s or replaces the record of its number.
func (s *pullSet) put(p *pullRecord) {
	if old := s.byNum[p.Number]; old != nil && s.open[old.Head] == old {
		delete(s.open, old.Head)
	}
	s.byNum[p.Number] = p
	s.max = max(s.max, p.Number)
	if p.State == lifecycle.PullRequestOpen {
		if q := s.open[p.Head]; q == nil || p.Number < q.Number {
			s.open[p.Head] = p
		}
	}
}

// openFor returns the open pull request from branch head, or nil.
func (s *pullSet) openFor(head string) *pullRecord {
	return s.open[head]
}

// loadPulls returns the repository's pull requests, read again only when
// pullsRef has moved since they were last read. The caller holds r.sem.
func (r *repo) loadPulls() (*pullSet, error) {
	h, err := r.ref(pullsRef)
	if err != nil {
		return nil, err
	}
	if r.pulls != nil && r.pulls.commit == h {
		return r.pulls, nil
	}
	s := &pullSet{commit: h, byNum: make(map[int]*pullRecord), open: make(map[string]*pullRecord)}
	if !h.IsZero() {
		c, err := r.commitInfo(h)
		if err != nil {
			return nil, err
		}
		s.tree = c.tree
		buckets, err := r.tree(c.tree)
		if err != nil {
			return nil, err
		}
		for _, b := range buckets {
			if b.Mode != filemode.Dir {
				continue // not a bucket; leave it alone
			}
			entries, err := r.tree(b.Hash)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				n, err := strconv.Atoi(strings.TrimSuffix(e.Name, ".json"))
				if err != nil || n < 1 || e.Name != strconv.Itoa(n)+".json" || pullBucket(n) != b.Name {
					continue // not a record; leave it alone
				}
				data, err := r.blob(e.Hash)
				if err != nil {
					return nil, err
				}
				p := new(pullRecord)
				if err := json.Unmarshal(data, p); err != nil {
					return nil, fmt.Errorf("read pull request record %s/%s: %w", b.Name, e.Name, err)
				}
				if p.Number != n {
					return nil, fmt.Errorf("pull request record %s/%s holds number %d", b.Name, e.Name, p.Number)
				}
				s.put(p)
			}
		}
	}
	r.pulls = s
	return s, nil
}

// refUpdate is a ref to point at h if it still points at old (see setRef).
type refUpdate struct {
	name   plumbing.ReferenceName
	h, old plumbing.Hash
}

// savePull commits p as a change to s, moves pullsRef and publishes the new
// set in r.pulls. When first is not nil, that ref is moved first, after the
// objects of both are written: the objects of an operation that moves
// another ref before the pull request records are so written as one pack.
// The caller holds the write lock; on error nothing is published.
func (r *repo) savePull(s *pullSet, p *pullRecord, sig object.Signature, subject string, first *refUpdate) error {
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode pull request #%d: %w", p.Number, err)
	}
	data = append(data, '\n')
	tree, err := r.putFiles(s.tree, []string{pullBucket(p.Number)}, []file{{name: strconv.Itoa(p.Number) + ".json", data: data}})
	if err != nil {
		return fmt.Errorf("save pull request #%d: %w", p.Number, err)
	}
	c := &object.Commit{
		Author:    sig,
		Committer: sig,
		Message:   message(subject, "", "Lifecycle-Pull", strconv.Itoa(p.Number), "Lifecycle-Task", p.TaskID),
		TreeHash:  tree,
	}
	if !s.commit.IsZero() {
		c.ParentHashes = []plumbing.Hash{s.commit}
	}
	h, err := r.writeCommit(c)
	if err != nil {
		return fmt.Errorf("save pull request #%d: %w", p.Number, err)
	}
	if first != nil {
		if err := r.setRef(first.name, first.h, first.old); err != nil {
			return err
		}
	}
	if err := r.setRef(pullsRef, h, s.commit); err != nil {
		return fmt.Errorf("save pull request #%d: %w", p.Number, err)
	}
	s.commit, s.tree = h, tree
	s.put(p)
	r.pulls = s
	return nil
}
