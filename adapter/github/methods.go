package github

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shurcooL/githubv4"
	"github.com/tasklifecycle/lifecycle"
)

// methodOrder is the order in which merge methods are chosen when
// Config.MergeMethod prefers none, or GitHub does not allow the one it
// prefers: the first the repository and the base's rules allow, as
// Kodiak chooses.
var methodOrder = [...]string{"merge", "squash", "rebase"}

// mergeSettings is what the repository's settings allow of the merge
// methods.
type mergeSettings struct {
	// allowed is by method; nil when the settings could not be read, and
	// any method may be tried.
	allowed map[string]bool
	// refused are the methods GitHub refused with a 405 naming them since
	// the settings were read: GitHub's answer wins over its settings.
	refused map[string]bool
	at      time.Time
}

// repoMergeSettings returns the repository's merge settings, read at most
// once per Config.ProtectionTTL, or anew when fresh. Settings that cannot
// be read are not an error: those read before are kept, and without any,
// every method may be tried (and GitHub's refusal of one tells).
func (a *Adapter) repoMergeSettings(ctx context.Context, fresh bool) mergeSettings {
	now := a.cfg.Clock.Now()
	if st, ok := a.settingsIfFresh(now); ok && !fresh {
		return st
	}
	allowed, err := a.readMergeSettings(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.log.WarnContext(ctx, "read the repository's merge settings; trying the merge methods as read before, or any", "err", err)
		if a.settings != nil {
			return a.settings.clone()
		}
	}
	a.settings = &mergeSettings{allowed: allowed, refused: map[string]bool{}, at: now}
	return a.settings.clone()
}

// settingsIfFresh returns the merge settings read less than
// Config.ProtectionTTL before now.
func (a *Adapter) settingsIfFresh(now time.Time) (mergeSettings, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.settings == nil || now.Sub(a.settings.at) >= a.cfg.ProtectionTTL {
		return mergeSettings{}, false
	}
	return a.settings.clone(), true
}

// clone returns a copy of st that shares no map with it.
func (st *mergeSettings) clone() mergeSettings {
	return mergeSettings{allowed: maps.Clone(st.allowed), refused: maps.Clone(st.refused), at: st.at}
}

// readMergeSettings reads which merge methods the repository allows:
// GET /repos/{owner}/{repo}'s allow_merge_commit, allow_squash_merge and
// allow_rebase_merge, which GitHub includes only for credentials that may
// push to it, or else GraphQL's Repository.mergeCommitAllowed,
// squashMergeAllowed and rebaseMergeAllowed.
func (a *Adapter) readMergeSettings(ctx context.Context) (map[string]bool, error) {
	repo, _, err := a.client.Repositories.Get(ctx, a.cfg.Owner, a.cfg.Repo)
	if err != nil {
		return nil, wrap(err, "read repository %s/%s", a.cfg.Owner, a.cfg.Repo)
	}
	if repo.AllowMergeCommit != nil && repo.AllowSquashMerge != nil && repo.AllowRebaseMerge != nil {
		return map[string]bool{"merge": repo.GetAllowMergeCommit(), "squash": repo.GetAllowSquashMerge(), "rebase": repo.GetAllowRebaseMerge()}, nil
	}
	var q struct {
		Repository struct {
			MergeCommitAllowed bool `graphql:"mergeCommitAllowed"`
			SquashMergeAllowed bool `graphql:"squashMergeAllowed"`
			RebaseMergeAllowed bool `graphql:"rebaseMergeAllowed"`
		} `graphql:"repository(owner: $owner, name: $name)"`
		RateLimit *rateLimitField `graphql:"rateLimit"`
	}
	errs, err := a.query(ctx, &q, map[string]any{"owner": githubv4.String(a.cfg.Owner), "name": githubv4.String(a.cfg.Repo)})
	if err != nil {
		return nil, fmt.Errorf("github: read the merge settings of %s/%s: %w", a.cfg.Owner, a.cfg.Repo, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("github: read the merge settings of %s/%s: %s (%s)", a.cfg.Owner, a.cfg.Repo, errs[0].Message, errs[0].Type)
	}
	a.observeRateLimit(q.RateLimit)
	r := q.Repository
	return map[string]bool{"merge": r.MergeCommitAllowed, "squash": r.SquashMergeAllowed, "rebase": r.RebaseMergeAllowed}, nil
}

// mergeMethod returns the method to merge a pull request into base with:
// Config.MergeMethod when GitHub allows it, else the first of methodOrder
// it allows. After GitHub refused method refused, the settings and the
// base's rules are read anew and refused is left out whatever they say.
// A *lifecycle.RefusedError says GitHub allows none.
func (a *Adapter) mergeMethod(ctx context.Context, base, refused string) (string, error) {
	fresh := refused != ""
	st := a.repoMergeSettings(ctx, fresh)
	if fresh {
		a.mu.Lock()
		if a.settings != nil {
			a.settings.refused[refused] = true
		}
		a.mu.Unlock()
		if st.refused == nil {
			st.refused = map[string]bool{}
		}
		st.refused[refused] = true
	}
	pol, err := a.loadPolicy(ctx, base, fresh)
	if err != nil {
		// The rules restrict methods seldom; GitHub's refusal tells.
		a.log.WarnContext(ctx, "read the rules of the base to choose a merge method; trying what the repository allows", "branch", base, "err", err)
		pol = policy{}
	}
	return chooseMethod(a.cfg.MergeMethod, st, pol.methods)
}

// chooseMethod returns preferred when the settings and the rules (nil:
// any) allow it, else the first of methodOrder they allow; none is a
// *lifecycle.RefusedError saying why.
func chooseMethod(preferred string, st mergeSettings, rules []string) (string, error) {
	ok := func(m string) bool {
		return (st.allowed == nil || st.allowed[m]) && (rules == nil || slices.Contains(rules, m)) && !st.refused[m]
	}
	if preferred != "" && ok(preferred) {
		return preferred, nil
	}
	for _, m := range methodOrder {
		if ok(m) {
			return m, nil
		}
	}
	var repo, refused []string
	for _, m := range methodOrder {
		if st.allowed == nil || st.allowed[m] {
			repo = append(repo, m)
		}
		if st.refused[m] {
			refused = append(refused, m)
		}
	}
	msg := fmt.Sprintf("GitHub allows no merge method: the repository allows %s", orNone(repo))
	if rules != nil {
		msg += fmt.Sprintf(", the rulesets of the base %s", orNone(rules))
	}
	if len(refused) > 0 {
		msg += fmt.Sprintf(", and GitHub refused %s", strings.Join(refused, ", "))
	}
	return "", &lifecycle.RefusedError{Message: msg}
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// refusedMethod returns the merge method a 405 says the repository does
// not allow ("Merge commits are not allowed on this repository.", and
// likewise "Squash merges" and "Rebase merges": GitHub's words, which it
// answers for the repository's settings and for a ruleset's
// allowed_merge_methods alike), or "".
func refusedMethod(err error) string {
	if statusOf(err) != http.StatusMethodNotAllowed {
		return ""
	}
	msg := strings.ToLower(ghMessage(err))
	for prefix, m := range map[string]string{"merge commits are not allowed": "merge", "squash merges are not allowed": "squash", "rebase merges are not allowed": "rebase"} {
		if strings.Contains(msg, prefix) {
			return m
		}
	}
	return ""
}
