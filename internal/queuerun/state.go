package queuerun

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/mergequeue"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Doc is what the Store keeps of a queue (MergeQueueRecord.State): the
// engine's state and what the driver knows beside it.
type Doc struct {
	// Engine is the queue's logic's state.
	Engine *mergequeue.State `json:"engine"`
	// Meta describes each entry, by entry ID (its task's ID).
	Meta map[string]EntryMeta `json:"meta,omitempty"`
	// Runs describe the CI of each candidate under test, by ID.
	Runs map[int]Run `json:"runs,omitempty"`
	// Outcomes are the entries that left the queue, landed or sent back,
	// by entry ID, until their ship operation has read them.
	Outcomes map[string]Outcome `json:"outcomes,omitempty"`
	// Branches are the candidates whose queue branches were made and not
	// yet deleted.
	Branches []int `json:"branches,omitempty"`
	// PauseReason says why the queue is paused: by whom, the landed tree
	// that was not the tested tree, or the host's refusal of a landing or
	// a build.
	PauseReason string `json:"pauseReason,omitempty"`
	// Verify, when set, is the tested commit of the last landing, whose
	// tree is still to be compared with the base's: right after the
	// landing, and again at each step while the host cannot tell; nothing
	// else lands until it has.
	Verify string `json:"verify,omitempty"`
}

// EntryMeta is what the driver knows of an entry.
type EntryMeta struct {
	TaskID      string                       `json:"taskId"`
	Identifier  string                       `json:"identifier"`
	OperationID string                       `json:"operationId"`
	PullRequest lifecycletype.PullRequestRef `json:"pullRequest"`
	// Head is the change's commit; Since is when it entered.
	Head  string                  `json:"head"`
	Since lifecycletype.Timestamp `json:"since"`
}

// Run is the CI of a candidate.
type Run struct {
	// SHA is the candidate's commit.
	SHA string `json:"sha"`
	// Since is when its CI was first asked for.
	Since lifecycletype.Timestamp `json:"since"`
	// Checks are the checks as last read.
	Checks []lifecycletype.CICheck `json:"checks,omitempty"`
}

// Outcome is how an entry left the queue.
type Outcome struct {
	// Head is the entry's head commit.
	Head string `json:"head"`
	// SHA is the commit it landed in; Rework says why it was sent back
	// instead.
	SHA    string                     `json:"sha,omitempty"`
	Rework *lifecycletype.QueueRework `json:"rework,omitempty"`
	// At is when it left.
	At lifecycletype.Timestamp `json:"at"`
	// OperationID is the ship operation that entered it: only that
	// operation reads the outcome; a later ship enters anew.
	OperationID string `json:"operationId"`
	// Since is when it entered.
	Since lifecycletype.Timestamp `json:"since"`
}

// outcomeTTL is how long an outcome is kept for a ship operation that does
// not read it (it ended otherwise).
const outcomeTTL = 24 * time.Hour

// decode reads a queue's state; an empty one is a new queue.
func decode(rec lifecycletype.MergeQueueRecord) (*Doc, error) {
	d := &Doc{}
	if len(rec.State) > 0 {
		if err := json.Unmarshal(rec.State, d); err != nil {
			return nil, fmt.Errorf("queue %s: decode its state: %w", rec.ID, err)
		}
	}
	if d.Engine == nil {
		d.Engine = mergequeue.New("")
	}
	if d.Meta == nil {
		d.Meta = map[string]EntryMeta{}
	}
	if d.Runs == nil {
		d.Runs = map[int]Run{}
	}
	if d.Outcomes == nil {
		d.Outcomes = map[string]Outcome{}
	}
	return d, nil
}

// encode writes d into rec.
func (d *Doc) encode(rec *lifecycletype.MergeQueueRecord) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("queue %s: encode its state: %w", rec.ID, err)
	}
	rec.State = b
	return nil
}

// QueueID returns the ID of the queue of a repository's base branch in a
// submission mode: the same in every process.
func QueueID(mode lifecycletype.SubmitMode, repo lifecycletype.RepoRef, base string) string {
	sum := sha256.Sum256([]byte(string(mode) + "\x00" + repo.Owner + "\x00" + repo.Repo + "\x00" + base))
	return "mq_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:15]))
}

// position returns an entry's place in queue order (1 first) and the
// number of entries, or 0 when it is not in the queue.
func (d *Doc) position(id string) (int, int) {
	order := d.order()
	return slices.Index(order, id) + 1, len(order)
}

// order returns the entry IDs in the order they land: those in the
// landing chain in its order, then those being tested apart, then those
// waiting, hotfixes first.
func (d *Doc) order() []string {
	e := d.Engine
	rank := func(x mergequeue.Entry) (int, int) {
		if x.Candidate != 0 {
			for i, c := range e.Candidates {
				if c.ID == x.Candidate {
					if c.InChain() {
						return 0, i
					}
					return 1, i
				}
			}
		}
		if x.Priority == mergequeue.Hotfix {
			return 2, 0
		}
		return 3, 0
	}
	entries := slices.Clone(e.Entries)
	slices.SortStableFunc(entries, func(a, b mergequeue.Entry) int {
		ra, ia := rank(a)
		rb, ib := rank(b)
		switch {
		case ra != rb:
			return ra - rb
		case ia != ib:
			return ia - ib
		}
		return a.Since.Compare(b.Since)
	})
	ids := make([]string, len(entries))
	for i, x := range entries {
		ids[i] = x.ID
	}
	return ids
}

// entry returns the engine's entry id, or nil.
func (d *Doc) entry(id string) *mergequeue.Entry {
	for i := range d.Engine.Entries {
		if d.Engine.Entries[i].ID == id {
			return &d.Engine.Entries[i]
		}
	}
	return nil
}

// candidate returns the engine's candidate id, or nil.
func (d *Doc) candidate(id int) *mergequeue.Candidate {
	for i := range d.Engine.Candidates {
		if d.Engine.Candidates[i].ID == id {
			return &d.Engine.Candidates[i]
		}
	}
	return nil
}

// prune forgets the outcomes older than outcomeTTL and the runs of
// candidates that are gone, but for a failed probe's that a group of
// suspects keeps: should its entries but one pass, that one is sent back
// with the probe's failed checks.
func (d *Doc) prune(now time.Time) {
	for id, o := range d.Outcomes {
		if now.Sub(o.At.Time) > outcomeTTL {
			delete(d.Outcomes, id)
		}
	}
	for id, run := range d.Runs {
		kept := slices.ContainsFunc(d.Engine.Groups, func(g mergequeue.Group) bool { return g.SHA != "" && g.SHA == run.SHA })
		if d.candidate(id) == nil && !kept {
			delete(d.Runs, id)
		}
	}
	for id := range d.Meta {
		if d.entry(id) == nil {
			delete(d.Meta, id)
		}
	}
}

// busy reports whether the queue has anything to drive.
func (d *Doc) busy() bool {
	return len(d.Engine.Entries) > 0 || len(d.Engine.Candidates) > 0 || d.Verify != ""
}

// entryIDs returns the IDs of the queue's entries.
func (d *Doc) entryIDs() []string {
	ids := make([]string, len(d.Engine.Entries))
	for i, e := range d.Engine.Entries {
		ids[i] = e.ID
	}
	return ids
}
