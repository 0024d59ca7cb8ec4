package gitlab

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/adapter/internal/logtail"
)

// defaultTraceBytes is how much of a job's log is kept when the query
// names no bound.
const defaultTraceBytes = 8 << 10

// jobURL matches the web URL of a GitLab CI job, the target_url of its
// commit status, and captures its ID.
var jobURL = regexp.MustCompile(`/-/jobs/(\d+)/?$`)

// ansiEscape matches ANSI escape sequences (colours, erasing, cursor
// moves) of job logs.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\\\-_]")

// sectionMarker matches the markers of GitLab's collapsible log sections
// ("section_start:1560896352:build_script[collapsed=true]\r"), once their
// escapes are stripped.
var sectionMarker = regexp.MustCompile(`section_(?:start|end):\d+:[A-Za-z0-9_.\-]+(?:\[[^\]\r\n]*\])?\r?`)

// CIFailure implements [lifecycle.CIFailureReader]: why a job of the head
// pipeline failed, from the end of its log (GET
// /projects/:id/jobs/:job_id/trace), read as a stream of which only the
// last q.MaxBytes bytes (twice that before the escapes are stripped) are
// held, its ANSI escapes and section markers stripped. The job is the one
// the check's URL names (a job's web URL, .../-/jobs/:id); otherwise the
// latest commit status of that name is read first (one more request),
// whose description is the summary, and whose link, or else its ID,
// names the job. A status of another CI system has no log: its
// description is all there is. It returns an error matching
// lifecycle.ErrNotFound when GitLab knows nothing of the failure.
func (a *Adapter) CIFailure(ctx context.Context, q lifecycle.CIFailureQuery) (lifecycle.CIFailure, error) {
	s, err := a.project(ctx)
	if err != nil {
		return lifecycle.CIFailure{}, err
	}
	most := q.MaxBytes
	if most <= 0 {
		most = defaultTraceBytes
	}
	f := lifecycle.CIFailure{Annotations: []lifecycle.CIAnnotation{}}
	web := q.Check.URL
	job, ok := jobOf(web)
	if !ok {
		st, err := a.latestStatus(ctx, s, strings.ToLower(q.HeadSHA), q.Check.Name)
		if err != nil {
			return lifecycle.CIFailure{}, err
		}
		f.Summary = st.Description
		web = cmp.Or(st.TargetURL, web)
		if job, ok = jobOf(st.TargetURL); !ok && st.TargetURL == "" {
			// A job's status is the job (the same ID); a status of
			// another CI system without a link has no log to find.
			job, ok = st.ID, true
		}
	}
	if web != "" {
		f.LogURL = &web
	}
	if !ok {
		if f.Summary == "" {
			return lifecycle.CIFailure{}, fmt.Errorf("gitlab: failure of %q at %s: no job log, no description: %w", q.Check.Name, q.HeadSHA, lifecycle.ErrNotFound)
		}
		return f, nil
	}
	tw := &tailWriter{max: 2 * most}
	req, err := a.client.NewRequest(http.MethodGet, fmt.Sprintf("projects/%d/jobs/%d/trace", s.id, job), nil, []gl.RequestOptionFunc{gl.WithContext(ctx)})
	if err != nil {
		return lifecycle.CIFailure{}, fmt.Errorf("gitlab: log of job %d: %w", job, err)
	}
	resp, err := a.client.Do(req, tw)
	if err != nil {
		err = a.fail(ctx, fmt.Sprintf("read the log of job %d", job), resp, err)
		if errors.Is(err, lifecycle.ErrNotFound) && f.Summary != "" {
			return f, nil // no job of that ID: the description stands
		}
		return lifecycle.CIFailure{}, err
	}
	log, cut := cleanLog(tw.bytes(), tw.cut)
	f.Excerpt, f.Truncated = logtail.Cut(log, most)
	f.Truncated = f.Truncated || cut
	if f.Excerpt == "" && f.Summary == "" {
		return lifecycle.CIFailure{}, fmt.Errorf("gitlab: failure of job %d: its log is empty: %w", job, lifecycle.ErrNotFound)
	}
	return f, nil
}

// jobOf returns the ID of the job whose web URL is u.
func jobOf(u string) (int64, bool) {
	m := jobURL.FindStringSubmatch(u)
	if m == nil {
		return 0, false
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	return id, err == nil
}

// latestStatus reads the latest commit status named name of sha.
func (a *Adapter) latestStatus(ctx context.Context, s *settings, sha, name string) (*gl.CommitStatus, error) {
	sts, resp, err := a.client.Commits.GetCommitStatuses(s.id, sha, &gl.GetCommitStatusesOptions{Name: gl.Ptr(name), ListOptions: gl.ListOptions{PerPage: 100}}, gl.WithContext(ctx))
	if err != nil {
		return nil, a.fail(ctx, fmt.Sprintf("read the statuses %q of commit %s", name, sha), resp, err)
	}
	var latest *gl.CommitStatus
	for _, st := range sts {
		if st.Name == name && (latest == nil || st.ID > latest.ID) {
			latest = st
		}
	}
	if latest == nil {
		return nil, fmt.Errorf("gitlab: status %q of commit %s: %w", name, sha, lifecycle.ErrNotFound)
	}
	return latest, nil
}

// cleanLog strips ANSI escapes and section markers from the end of a job
// log, and its carriage returns before line feeds. When cut (the log was
// longer), the first line, likely cut short, is dropped.
func cleanLog(b []byte, cut bool) (string, bool) {
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	s := ansiEscape.ReplaceAllString(string(b), "")
	s = sectionMarker.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ToValidUTF8(s, "\uFFFD"), cut
}

// tailWriter keeps the last max bytes written to it, in a ring: a log of
// any length is read through it in bounded memory.
type tailWriter struct {
	max  int
	buf  []byte
	next int  // where the next byte goes once buf is full
	cut  bool // more than max bytes were written
}

// Write implements io.Writer.
func (w *tailWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= w.max {
		w.cut = w.cut || len(p) > w.max || len(w.buf) > 0
		w.buf = append(w.buf[:0], p[len(p)-w.max:]...)
		w.next = 0
		return n, nil
	}
	if room := w.max - len(w.buf); room > 0 {
		k := min(room, len(p))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		w.cut = true
		k := copy(w.buf[w.next:], p)
		p = p[k:]
		w.next = (w.next + k) % w.max
	}
	return n, nil
}

// bytes returns what w kept, oldest first.
func (w *tailWriter) bytes() []byte {
	if len(w.buf) < w.max || w.next == 0 {
		return w.buf
	}
	return append(append([]byte{}, w.buf[w.next:]...), w.buf[:w.next]...)
}
