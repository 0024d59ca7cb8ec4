package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/tasklifecycle/lifecycle"
)

// DeployerConfig configures a Deployer.
type DeployerConfig struct {
	// Adapter is the Adapter whose repositories hold the commits to
	// deploy. Required.
	Adapter *Adapter
	// Dir is the directory that receives the deployments. It is created if
	// missing. Required.
	Dir string
	// Now tells the time of deployments. Defaults to the Adapter's
	// Config.Now.
	Now func() time.Time
}

// Deployer deploys merged commits of an [Adapter]'s repositories into
// local directories: the tree of the commit is written out as files, the
// way a checkout would, into
//
//	<Dir>/<repo>/.releases/<deployment ID>/
//
// and <Dir>/<repo>/<environment> is then switched to it, atomically, as a
// symbolic link replaced by rename(2). The previous release of the
// environment is removed once no environment links to it. Each deployment
// is recorded next to its release, in <deployment ID>.json.
//
// Deployment IDs derive from the repository, environment and operation (or
// commit, when the request has no OperationID), so deploying the same
// operation again returns the recorded deployment and changes nothing, even
// after a crash at any point of the first attempt. A Deployer is safe for
// concurrent use; give each deployment directory one Deployer. It needs
// symbolic links, so it does not run on Windows.
type Deployer struct {
	adapter *Adapter
	dir     string
	now     func() time.Time

	mu sync.Mutex // serialises deployments
}

var _ lifecycle.Deployer = (*Deployer)(nil)

// NewDeployer returns a Deployer writing under cfg.Dir.
func NewDeployer(cfg DeployerConfig) (*Deployer, error) {
	if cfg.Adapter == nil {
		return nil, errors.New("artifact: DeployerConfig.Adapter is nil; pass the Adapter whose repositories hold the merged commits")
	}
	if cfg.Dir == "" {
		return nil, errors.New(`artifact: DeployerConfig.Dir is empty; set it to the directory that will receive deployments, for example filepath.Join(dataDir, "deploy")`)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("artifact: DeployerConfig.Dir %q: %w", cfg.Dir, err)
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Adapter.cfg.Now
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("artifact: create DeployerConfig.Dir: %w", err)
	}
	return &Deployer{adapter: cfg.Adapter, dir: dir, now: cfg.Now}, nil
}

// shaRE matches a full, lower-case SHA-1 commit name.
var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// environmentRE matches the environment names a Deployer accepts, which
// become directory names.
var environmentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Deploy implements [lifecycle.Deployer]. The repository is the one of
// req.PullRequest; a repository or commit that does not exist gives an
// error matching [lifecycle.ErrNotFound].
func (d *Deployer) Deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	dep, err := d.deploy(ctx, req)
	if err != nil {
		return lifecycle.Deployment{}, fmt.Errorf("artifact: deploy %s of %s to %s: %w", req.CommitSHA, req.PullRequest, req.Environment, err)
	}
	return dep, nil
}

func (d *Deployer) deploy(ctx context.Context, req lifecycle.DeployRequest) (lifecycle.Deployment, error) {
	if err := ctx.Err(); err != nil {
		return lifecycle.Deployment{}, err
	}
	env := string(req.Environment)
	if !environmentRE.MatchString(env) {
		return lifecycle.Deployment{}, errors.New("the environment must be lower-case letters, digits, '_' and '-'")
	}
	if !shaRE.MatchString(req.CommitSHA) {
		return lifecycle.Deployment{}, errors.New("the commit is not a 40-hex-digit SHA")
	}
	if req.PullRequest.Owner != d.adapter.cfg.Owner || !validRepoName(req.PullRequest.Repo) {
		return lifecycle.Deployment{}, errNoRepo
	}
	name := req.PullRequest.Repo
	key := req.OperationID
	if key == "" {
		key = req.CommitSHA
	}
	sum := sha256.Sum256([]byte(name + "\x00" + env + "\x00" + key + "\x00" + req.CommitSHA))
	id := "dep_" + hex.EncodeToString(sum[:12])

	d.mu.Lock()
	defer d.mu.Unlock()
	base := filepath.Join(d.dir, name)
	releases := filepath.Join(base, ".releases")
	recordPath := filepath.Join(releases, id+".json")
	if dep, err := readDeployment(recordPath); err == nil {
		return dep, nil // deployed before
	} else if !errors.Is(err, fs.ErrNotExist) {
		return lifecycle.Deployment{}, err
	}

	release := filepath.Join(releases, id)
	if !isExist(release) {
		if err := d.writeRelease(ctx, name, plumbing.NewHash(req.CommitSHA), releases, id); err != nil {
			return lifecycle.Deployment{}, err
		}
	}
	link := filepath.Join(base, env)
	if err := switchLink(link, filepath.Join(".releases", id)); err != nil {
		return lifecycle.Deployment{}, err
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(link)}
	dep := lifecycle.Deployment{
		ID:          id,
		Environment: req.Environment,
		CommitSHA:   req.CommitSHA,
		URL:         u.String(),
		DeployedAt:  lifecycle.NewTimestamp(d.now()),
	}
	if err := writeFileAtomic(recordPath, dep); err != nil {
		return lifecycle.Deployment{}, err
	}
	if err := pruneReleases(base, releases); err != nil {
		return lifecycle.Deployment{}, err
	}
	return dep, nil
}

// writeRelease writes the tree of commit h of repository name into
// releases/id, through a temporary directory renamed into place.
func (d *Deployer) writeRelease(ctx context.Context, name string, h plumbing.Hash, releases, id string) error {
	r, err := d.adapter.repo(ctx, name, false)
	if err != nil {
		return err
	}
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	c, err := r.commitInfo(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return fmt.Errorf("no commit %s in repository %q: %w", h, name, lifecycle.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(releases, 0o755); err != nil {
		return err
	}
	// Leftovers of an attempt at this deployment that stopped midway.
	if old, err := filepath.Glob(filepath.Join(releases, ".tmp-"+id+"-*")); err == nil {
		for _, o := range old {
			os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(releases, ".tmp-"+id+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := r.checkout(ctx, c.tree, tmp, held); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(releases, id))
}

// checkout writes the files of tree h into the existing directory dir,
// reading each object through hold, which runs its argument with the
// repository held (a caller that holds it already passes held).
func (r *repo) checkout(ctx context.Context, h plumbing.Hash, dir string, hold func(read func() error) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var entries []object.TreeEntry
	if err := hold(func() (err error) { entries, err = r.tree(h); return err }); err != nil {
		return err
	}
	blob := func(h plumbing.Hash) (data []byte, err error) {
		err = hold(func() error { data, err = r.blob(h); return err })
		return data, err
	}
	for _, e := range entries {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, `/\`) || strings.EqualFold(e.Name, ".git") {
			return fmt.Errorf("refusing to check out the entry %q", e.Name)
		}
		path := filepath.Join(dir, e.Name)
		switch e.Mode {
		case filemode.Dir:
			if err := os.Mkdir(path, 0o755); err != nil {
				return err
			}
			if err := r.checkout(ctx, e.Hash, path, hold); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			data, err := blob(e.Hash)
			if err != nil {
				return err
			}
			perm := os.FileMode(0o644)
			if e.Mode == filemode.Executable {
				perm = 0o755
			}
			if err := os.WriteFile(path, data, perm); err != nil {
				return err
			}
		case filemode.Symlink:
			target, err := blob(e.Hash)
			if err != nil {
				return err
			}
			if err := os.Symlink(string(target), path); err != nil {
				return err
			}
		case filemode.Submodule:
			// Another repository's commit, which this one does not hold:
			// an empty directory, as git leaves it before `git submodule
			// update`.
			if err := os.Mkdir(path, 0o755); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q has the unknown mode %s", e.Name, e.Mode)
		}
	}
	return nil
}

// held runs read: for a caller that holds the repository already.
func held(read func() error) error { return read() }

// switchLink points the symbolic link link at target, replacing what it
// pointed at in one rename.
func switchLink(link, target string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(link), fmt.Sprintf(".%s.tmp-%d", filepath.Base(link), time.Now().UnixNano()))
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// pruneReleases removes the releases under releases that no environment
// link in base points to; records stay, for idempotency.
func pruneReleases(base, releases string) error {
	linked := make(map[string]bool)
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if t, err := os.Readlink(filepath.Join(base, e.Name())); err == nil {
			linked[filepath.Base(t)] = true
		}
	}
	rels, err := os.ReadDir(releases)
	if err != nil {
		return err
	}
	for _, e := range rels {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || linked[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(releases, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func readDeployment(path string) (lifecycle.Deployment, error) {
	var dep lifecycle.Deployment
	data, err := os.ReadFile(path)
	if err != nil {
		return dep, err
	}
	if err := json.Unmarshal(data, &dep); err != nil {
		return dep, fmt.Errorf("read %s: %w", path, err)
	}
	return dep, nil
}

// writeFileAtomic writes v as JSON into path through a temporary file
// renamed into place.
func writeFileAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-record-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
