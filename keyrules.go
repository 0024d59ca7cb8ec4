package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// keyRoleRules is the table above: for the role of a caller's actor, the
// roles of the actors whose keys it manages, and whether only its own.
var keyRoleRules = map[Role]struct {
	roles   []Role
	ownOnly bool
}{
	RoleSystem:   {roles: []Role{RoleSystem, RoleUser, RoleAgent, RoleReviewer}},
	RoleUser:     {roles: []Role{RoleUser, RoleAgent, RoleReviewer}},
	RoleAgent:    {roles: []Role{RoleAgent}, ownOnly: true},
	RoleReviewer: {roles: []Role{RoleReviewer}, ownOnly: true},
}

// governs returns an error matching ErrInsufficientScope when p's role
// does not govern actor (see keyRoleRules); verb says what p tried.
func (p *Principal) governs(actor Actor, verb string) error {
	rule, ok := keyRoleRules[p.Actor.Role]
	switch {
	case !ok:
		return fmt.Errorf("a key of role %q cannot %s keys: %w", p.Actor.Role, verb, ErrInsufficientScope)
	case !slices.Contains(rule.roles, actor.Role):
		return fmt.Errorf("a key of role %s cannot %s keys with role %s: %w", p.Actor.Role, verb, actor.Role, ErrInsufficientScope)
	case rule.ownOnly && actor.ID != p.Actor.ID:
		return fmt.Errorf("a key of role %s can only %s keys for its own actor %q: %w", p.Actor.Role, verb, p.Actor.ID, ErrInsufficientScope)
	}
	return nil
}

// checkGrant returns an error matching ErrInsufficientScope when p may not
// create a key with the scopes and actor of params. Invalid scopes and
// roles are left to validation.
func (p *Principal) checkGrant(params *CreateAPIKeyParams) error {
	var lacking []string
	for _, sc := range params.Scopes {
		if sc.Valid() && !p.Has(sc) && !slices.Contains(lacking, string(sc)) {
			lacking = append(lacking, string(sc))
		}
	}
	if len(lacking) > 0 {
		return fmt.Errorf("a key can only grant scopes its creator holds, and yours lacks %s: %w", strings.Join(lacking, ", "), ErrInsufficientScope)
	}
	if !params.Actor.Role.Valid() {
		return nil
	}
	return p.governs(params.Actor, "create")
}

// checkRevoke returns an error matching ErrInsufficientScope when the key
// keyID holds a scope p lacks or has an actor p's role does not govern,
// and ErrNotFound when there is no such key.
func (s *Service) checkRevoke(ctx context.Context, p *Principal, keyID string) error {
	keys, err := s.store.ListAPIKeys(ctx)
	if err != nil {
		return fmt.Errorf("list API keys: %w", err)
	}
	i := slices.IndexFunc(keys, func(k APIKey) bool { return k.ID == keyID })
	if i < 0 {
		return notFound("API key", keyID)
	}
	for _, sc := range keys[i].Scopes {
		if !p.Has(sc) {
			return fmt.Errorf("that key holds scope %s, which yours lacks; only a key holding every scope of another can revoke it: %w", sc, ErrInsufficientScope)
		}
	}
	return p.governs(keys[i].Actor, "revoke")
}
