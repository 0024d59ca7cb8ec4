package keyauth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Least privilege for API keys. A key with keys:admin manages keys, but no
// key can mint a principal it could not act as itself, nor take away more
// than it holds. The same rules hold for every role, system included:
//
//   - a new key's scopes must be a subset of the creator's;
//   - its actor must be one the creator's role governs (the table below);
//   - revoking a key is refused when the key holds a scope the caller
//     lacks, or its actor is one the caller's role does not govern.
//
// The table, by the role of the caller's actor:
//
//	role      creates and revokes keys for
//	system    any actor: system, user, agent, reviewer
//	user      users, agents and reviewers, any ID (the operators who issue agents' keys)
//	agent     its own actor only (same ID, role agent)
//	reviewer  its own actor only (same ID, role reviewer)
//
// So a system key is minted only by a system key (or by the host, through
// the Go API), and an agent cannot mint the reviewer that would approve its
// own work, nor a system or user key that would. A principal of any other
// role (a host's Authenticator may make one) manages no key. Each refusal
// is 403 insufficient_scope. The Go API (Service.CreateAPIKey,
// Service.RevokeAPIKey) is the host's own and is not restricted.

// roleRules is the table above: for the role of a caller's actor, the
// roles of the actors whose keys it manages, and whether only its own.
var roleRules = map[lifecycletype.Role]struct {
	roles   []lifecycletype.Role
	ownOnly bool
}{
	lifecycletype.RoleSystem:   {roles: []lifecycletype.Role{lifecycletype.RoleSystem, lifecycletype.RoleUser, lifecycletype.RoleAgent, lifecycletype.RoleReviewer}},
	lifecycletype.RoleUser:     {roles: []lifecycletype.Role{lifecycletype.RoleUser, lifecycletype.RoleAgent, lifecycletype.RoleReviewer}},
	lifecycletype.RoleAgent:    {roles: []lifecycletype.Role{lifecycletype.RoleAgent}, ownOnly: true},
	lifecycletype.RoleReviewer: {roles: []lifecycletype.Role{lifecycletype.RoleReviewer}, ownOnly: true},
}

// governs returns an error matching ErrInsufficientScope when the role of
// caller does not govern actor (see roleRules); verb says what caller
// tried.
func governs(caller, actor lifecycletype.Actor, verb string) error {
	rule, ok := roleRules[caller.Role]
	switch {
	case !ok:
		return fmt.Errorf("a key of role %q cannot %s keys: %w", caller.Role, verb, lifecycletype.ErrInsufficientScope)
	case !slices.Contains(rule.roles, actor.Role):
		return fmt.Errorf("a key of role %s cannot %s keys with role %s: %w", caller.Role, verb, actor.Role, lifecycletype.ErrInsufficientScope)
	case rule.ownOnly && actor.ID != caller.ID:
		return fmt.Errorf("a key of role %s can only %s keys for its own actor %q: %w", caller.Role, verb, caller.ID, lifecycletype.ErrInsufficientScope)
	}
	return nil
}

// CheckGrant returns an error matching ErrInsufficientScope when a caller
// acting as caller and holding held may not create a key with scopes for
// actor. Invalid scopes and roles are left to validation.
func CheckGrant(caller lifecycletype.Actor, held []lifecycletype.Scope, actor lifecycletype.Actor, scopes []lifecycletype.Scope) error {
	var lacking []string
	for _, sc := range scopes {
		if sc.Valid() && !slices.Contains(held, sc) && !slices.Contains(lacking, string(sc)) {
			lacking = append(lacking, string(sc))
		}
	}
	if len(lacking) > 0 {
		return fmt.Errorf("a key can only grant scopes its creator holds, and yours lacks %s: %w", strings.Join(lacking, ", "), lifecycletype.ErrInsufficientScope)
	}
	if !actor.Role.Valid() {
		return nil
	}
	return governs(caller, actor, "create")
}

// CheckRevoke returns an error matching ErrInsufficientScope when a
// caller acting as caller and holding held may not revoke key: the key
// holds a scope the caller lacks, or has an actor the caller's role does
// not govern.
func CheckRevoke(caller lifecycletype.Actor, held []lifecycletype.Scope, key *lifecycletype.APIKey) error {
	for _, sc := range key.Scopes {
		if !slices.Contains(held, sc) {
			return fmt.Errorf("that key holds scope %s, which yours lacks; only a key holding every scope of another can revoke it: %w", sc, lifecycletype.ErrInsufficientScope)
		}
	}
	return governs(caller, key.Actor, "revoke")
}
