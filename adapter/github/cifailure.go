package github

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"

	gh "github.com/google/go-github/v60/github"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/logtail"
)

// maxNotes bounds the failures webhooks told of that the Adapter keeps
// until the Service asks about them: the oldest go first.
const maxNotes = 1024

// maxAnnotations is how many annotations of a check run are read: one
// page (GitHub's limit per page of annotations is 50).
const maxAnnotations = 50

// noteKey names a check of a commit: a check run's name, or a commit
// status's context.
type noteKey struct{ sha, name string }

// note is what a webhook told of a failed check: a check run's output, or
// a commit status's description.
type note struct {
	runID       int64 // 0 for a commit status
	title       string
	summary     string
	text        string
	annotations int // annotations_count
	url         string
}

// failureNotes are the failures webhooks told of, by check, at most
// maxNotes of them.
type failureNotes struct {
	mu    sync.Mutex
	m     map[noteKey]note
	order []noteKey // oldest first
}

// put keeps n for k, forgetting the oldest note when full.
func (f *failureNotes) put(k noteKey, n note) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[noteKey]note)
	}
	if old, ok := f.m[k]; ok {
		if old.runID > n.runID {
			return // a later run of the check was told of first
		}
	} else {
		if len(f.order) == maxNotes {
			delete(f.m, f.order[0])
			f.order = f.order[1:]
		}
		f.order = append(f.order, k)
	}
	f.m[k] = n
}

// get returns the note of k, if any.
func (f *failureNotes) get(k noteKey) (note, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.m[k]
	return n, ok
}

// checkRunPayload is the check run of a check_run webhook.
type checkRunPayload = struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	HeadSHA    string `json:"head_sha"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion"`
	HTMLURL    string `json:"html_url"`
	Output     struct {
		Title            *string `json:"title"`
		Summary          *string `json:"summary"`
		Text             *string `json:"text"`
		AnnotationsCount int     `json:"annotations_count"`
	} `json:"output"`
}

// noteCheckRun keeps the output of a failed check run a check_run webhook
// carries, so that asking why it failed costs at most the request of its
// annotations.
func (a *Adapter) noteCheckRun(r *checkRunPayload) {
	if r == nil || r.ID == 0 || r.Name == "" || checkStatus(r.Status, r.Conclusion) != lifecycle.CheckFailed {
		return
	}
	o := r.Output
	a.notes.put(noteKey{strings.ToLower(r.HeadSHA), r.Name}, note{runID: r.ID, title: deref(o.Title), summary: deref(o.Summary),
		text: deref(o.Text), annotations: o.AnnotationsCount, url: r.HTMLURL})
}

// noteStatus keeps the description of a failed commit status a status
// webhook carries: all GitHub tells of its failure.
func (a *Adapter) noteStatus(p *payload) {
	if p.Context == "" || statusState(p.State) != lifecycle.CheckFailed {
		return
	}
	a.notes.put(noteKey{strings.ToLower(p.SHA), p.Context}, note{summary: deref(p.Description), url: deref(p.TargetURL)})
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// CIFailure implements lifecycle.CIFailureReader: why a check of
// q.HeadSHA failed. A check run's output (title, summary, text as the
// excerpt) and the first 50 of its annotations; a commit status's
// description as the summary. What a check_run or status webhook carried
// is used as it came, so that only the annotations cost a request (GET
// /repos/{owner}/{repo}/check-runs/{id}/annotations), and only when the
// run has some; otherwise the latest run of that name is read (GET
// /repos/{owner}/{repo}/commits/{sha}/check-runs?check_name=...), then,
// when there is none, the commit's combined status. It returns an error
// matching lifecycle.ErrNotFound when GitHub has no check of that name.
func (a *Adapter) CIFailure(ctx context.Context, q lifecycle.CIFailureQuery) (lifecycle.CIFailure, error) {
	sha := strings.ToLower(q.HeadSHA)
	n, ok := a.notes.get(noteKey{sha, q.Check.Name})
	if !ok {
		var err error
		if n, err = a.readFailure(ctx, sha, q.Check.Name); err != nil {
			return lifecycle.CIFailure{}, err
		}
	}
	f := lifecycle.CIFailure{Title: n.title, Summary: n.summary, Annotations: []lifecycle.CIAnnotation{}}
	f.Excerpt, f.Truncated = logtail.Cut(n.text, q.MaxBytes)
	if url := cmp.Or(n.url, q.Check.URL); url != "" {
		f.LogURL = &url
	}
	if n.runID == 0 || n.annotations == 0 {
		return f, nil
	}
	notes, _, err := a.client.Checks.ListCheckRunAnnotations(ctx, a.cfg.Owner, a.cfg.Repo, n.runID, &gh.ListOptions{PerPage: maxAnnotations})
	if err != nil {
		return lifecycle.CIFailure{}, wrap(err, "annotations of check run %d", n.runID)
	}
	for _, an := range notes {
		level := lifecycle.AnnotationLevel(an.GetAnnotationLevel())
		if an.GetPath() == "" || an.GetMessage() == "" || !level.Valid() {
			continue
		}
		start := max(an.GetStartLine(), 1)
		f.Annotations = append(f.Annotations, lifecycle.CIAnnotation{Path: an.GetPath(), StartLine: start, EndLine: max(an.GetEndLine(), start),
			Level: level, Message: an.GetMessage()})
	}
	f.Truncated = f.Truncated || n.annotations > len(notes)
	return f, nil
}

// readFailure reads what GitHub tells of the failure of check name of
// sha, when no webhook told it: the latest check run of that name, else
// the commit status of that context.
func (a *Adapter) readFailure(ctx context.Context, sha, name string) (note, error) {
	res, _, err := a.client.Checks.ListCheckRunsForRef(ctx, a.cfg.Owner, a.cfg.Repo, sha,
		&gh.ListCheckRunsOptions{CheckName: gh.String(name), Filter: gh.String("latest"), ListOptions: gh.ListOptions{PerPage: 1}})
	if err != nil {
		return note{}, wrap(err, "check runs %q of %s", name, sha)
	}
	if len(res.CheckRuns) > 0 {
		r := res.CheckRuns[0]
		o := r.GetOutput()
		return note{runID: r.GetID(), title: o.GetTitle(), summary: o.GetSummary(), text: o.GetText(), annotations: o.GetAnnotationsCount(), url: r.GetHTMLURL()}, nil
	}
	st, _, err := a.client.Repositories.GetCombinedStatus(ctx, a.cfg.Owner, a.cfg.Repo, sha, &gh.ListOptions{PerPage: 100})
	if err != nil {
		return note{}, wrap(err, "combined status of %s", sha)
	}
	for _, s := range st.Statuses {
		if s.GetContext() == name {
			return note{summary: s.GetDescription(), url: s.GetTargetURL()}, nil
		}
	}
	return note{}, fmt.Errorf("github: check %q of %s: %w", name, sha, lifecycle.ErrNotFound)
}
