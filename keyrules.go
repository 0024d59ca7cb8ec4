package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Least privilege for API keys. A key with keys:admin manages keys, but it
// cannot hand out, or take away, more than it holds:
//
//   - a new key's scopes must be a subset of the creator's;
//   - its actor must be one the creator may act as: a system or user key
//     creates keys for agents, reviewers and users; an agent or reviewer
//     key creates keys only for its own actor;
//   - only a key holding every scope creates keys with role system;
//   - revoking a key that holds a scope the caller lacks is refused.
//
// Each refusal is 403 insufficient_scope. The Go API (Service.CreateAPIKey,
// Service.RevokeAPIKey) is the host's own and is not restricted.

// rolesActedAs says, for the role of a key's actor, which actors' keys it
// may create: any actor of the listed roles, or only its own actor.
var rolesActedAs = map[Role]struct {
	roles   []Role
	ownOnly bool
}{
	RoleSystem:   {roles: []Role{RoleAgent, RoleReviewer, RoleUser}},
	RoleUser:     {roles: []Role{RoleAgent, RoleReviewer, RoleUser}},
	RoleAgent:    {roles: []Role{RoleAgent}, ownOnly: true},
	RoleReviewer: {roles: []Role{RoleReviewer}, ownOnly: true},
}

// holdsEvery reports whether p holds every scope.
func (p *Principal) holdsEvery() bool {
	for _, sc := range allScopes {
		if !p.Has(sc) {
			return false
		}
	}
	return true
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
	role := params.Actor.Role
	if !role.Valid() {
		return nil
	}
	if role == RoleSystem {
		if !p.holdsEvery() {
			return fmt.Errorf("only a key holding every scope can create keys with role system: %w", ErrInsufficientScope)
		}
		return nil
	}
	rule := rolesActedAs[p.Actor.Role]
	if !slices.Contains(rule.roles, role) {
		return fmt.Errorf("a key of role %s cannot create keys with role %s: %w", p.Actor.Role, role, ErrInsufficientScope)
	}
	if rule.ownOnly && params.Actor.ID != p.Actor.ID {
		return fmt.Errorf("a key of role %s can only create keys for its own actor %q: %w", p.Actor.Role, p.Actor.ID, ErrInsufficientScope)
	}
	return nil
}

// checkRevoke returns an error matching ErrInsufficientScope when the key
// keyID holds a scope p lacks, and ErrNotFound when there is no such key.
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
	return nil
}
