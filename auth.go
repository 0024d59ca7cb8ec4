package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/authlimit"
	"github.com/tasklifecycle/lifecycle/internal/eventstream"
	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/id"
	"github.com/tasklifecycle/lifecycle/internal/keyauth"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	// ID identifies the credential (for API keys, the key's "key_" ID).
	// Idempotency keys and stream limits are counted per principal ID.
	ID string
	// Actor is who acts; events name it.
	Actor Actor
	// Scopes are the permissions granted.
	Scopes []Scope

	// Done, when not nil, is closed when the credential ends before
	// ExpiresAt: an API key revoked, a session signed out. An event stream
	// opened by the principal ends then, sending EndNote as its last
	// comment. The Service's API keys carry a Done closed when the key is
	// revoked (through any process sharing the Store; see
	// [Config.KeyCacheTTL]). An Authenticator whose credentials end
	// returns principals that carry it; nil never ends.
	Done <-chan struct{}
	// ExpiresAt, when not zero, is when the credential ends by the
	// Service's Clock: an event stream opened by the principal ends then,
	// as it does when Done is closed.
	ExpiresAt time.Time
	// EndNote is the comment (one line, without the leading colon) that an
	// event stream of the principal sends last when it ends with the
	// credential: for API keys, "revoked: the API key of this stream was
	// revoked; the stream ends". Empty: "ended: the credential of this
	// stream ended; the stream ends".
	EndNote string
}

// Notes that end an event stream whose credential ended.
const (
	keyRevokedNote = eventstream.RevokedNote
	defaultEndNote = "ended: the credential of this stream ended; the stream ends"
)

// Has reports whether the principal holds scope s.
func (p *Principal) Has(s Scope) bool { return slices.Contains(p.Scopes, s) }

// Authenticator turns a request into a Principal. A host that has its own
// authentication (sessions, OIDC, mTLS) implements it and passes it in
// [Config.Authenticator].
type Authenticator interface {
	// Authenticate returns the request's principal. It returns an error
	// matching ErrUnauthorized when the request carries no valid
	// credentials; any other error is answered with 500.
	Authenticate(r *http.Request) (Principal, error)
}

// HashAPIKey returns the SHA-256 hash under which the Store keeps a plaintext key.
func HashAPIKey(plaintext string) []byte {
	h := sha256.Sum256([]byte(plaintext))
	return h[:]
}

// ownKeys is the Service's own Authenticator: its API keys, known and
// checked by package keyauth (see there how known keys are answered
// without a Store read, and unknown ones limited).
type ownKeys struct{ keys *keyauth.Keys }

// Authenticate implements Authenticator.
func (o ownKeys) Authenticate(r *http.Request) (Principal, error) {
	key, err := o.keys.Authenticate(r)
	if err != nil {
		return Principal{}, err
	}
	return keyPrincipal(o.keys, &key), nil
}

// keyPrincipal returns the principal of key, which ends when key is
// revoked.
func keyPrincipal(keys *keyauth.Keys, key *APIKey) Principal {
	return Principal{ID: key.ID, Actor: key.Actor, Scopes: key.Scopes, Done: keys.Done(key.ID), EndNote: keyRevokedNote}
}

// errNoOwnKeys refuses a key on a Service with a host's Authenticator.
var errNoOwnKeys = fmt.Errorf("this service authenticates with its host's Authenticator, not its own API keys: %w", ErrUnauthorized)

// AuthenticateKey returns the principal of a plaintext API key of the
// Service, as a request bearing it would get (its Done is closed when the
// key is revoked), for a host that takes a key other than in an
// Authorization header: a sign-in form, say. It returns an error matching
// ErrUnauthorized when the key is malformed, unknown or revoked, or when
// the Service authenticates with a host's [Config.Authenticator] and has
// no keys of its own. It does not count failures: see
// [Service.BeginAuthentication].
func (s *Service) AuthenticateKey(ctx context.Context, plaintext string) (Principal, error) {
	if s.keys == nil {
		return Principal{}, errNoOwnKeys
	}
	if !keyauth.Valid(plaintext) {
		return Principal{}, fmt.Errorf("that is not an API key of this service (lsk_ followed by at least 32 letters or digits): %w", ErrUnauthorized)
	}
	return s.AuthenticateKeyHash(ctx, HashAPIKey(plaintext))
}

// AuthenticateKeyHash is [Service.AuthenticateKey] for a key known by its
// hash ([HashAPIKey]): a host that opened a session with a key keeps the
// hash, never the key, and finds the key again, or finds it revoked, at
// each request of the session. Keys are read through the cache of
// [Config.KeyCacheTTL].
func (s *Service) AuthenticateKeyHash(ctx context.Context, hash []byte) (Principal, error) {
	if s.keys == nil {
		return Principal{}, errNoOwnKeys
	}
	if len(hash) != sha256.Size {
		return Principal{}, fmt.Errorf("unknown API key hash: %w", ErrUnauthorized)
	}
	key, err := s.keys.Find(ctx, [sha256.Size]byte(hash), nil)
	if err != nil {
		return Principal{}, err
	}
	return keyPrincipal(s.keys, &key), nil
}

// AuthenticateKeyFrom returns the principal of a plaintext API key that
// r's client sent other than in an Authorization header (a sign-in form,
// say), authenticated as the same key in r's Authorization header would
// be: a valid key is served whatever r's client did before; an unknown key
// costs a Store read only when the limiter of failed authentications
// ([Config.AuthFailureLimit]) admits r's client, and a malformed, unknown
// or revoked key counts as its failure. It returns an error matching
// ErrUnauthorized when the key is not valid (or the Service authenticates
// with a host's [Config.Authenticator] and has no keys of its own), and a
// *RateLimitError (429 with Retry-After) for an unknown key of a client
// that failed too often.
func (s *Service) AuthenticateKeyFrom(r *http.Request, plaintext string) (Principal, error) {
	if s.keys == nil {
		return Principal{}, errNoOwnKeys
	}
	key, err := s.keys.AuthenticateKey(r, plaintext)
	if err != nil {
		return Principal{}, err
	}
	return keyPrincipal(s.keys, &key), nil
}

// AuthAttempt is one attempt of a client to authenticate, admitted by
// [Service.BeginAuthentication]. Call Fail when the credentials turn out
// invalid, and End when the attempt is over. The methods of a nil
// *AuthAttempt do nothing.
type AuthAttempt struct{ try *authlimit.Try }

// Fail says that the attempt failed: it counts against its client.
func (a *AuthAttempt) Fail() {
	if a != nil {
		a.try.Fail()
	}
}

// End ends the attempt; one that did not fail does not count.
func (a *AuthAttempt) End() {
	if a != nil {
		a.try.End()
	}
}

// BeginAuthentication admits an attempt of r's client to authenticate
// with credentials the host checks itself (a session cookie, a key typed
// into a form), counted by the limiter that counts the failures of bearer
// API keys ([Config.AuthFailureLimit]): a client that failed too often,
// with either, from its address or its network (IPv4 /24, IPv6 /48),
// gets a *RateLimitError (429 with Retry-After), before anything is read
// for it. A failure is charged when the attempt fails; attempts under way
// count against the client until they end, so that attempts sent at once
// are limited too. The process-wide budget of reads for unknown API keys
// ([Config.AuthUnknownKeyReads]) is not taken from. On
// a Service with a host's Authenticator, or with the limiter disabled,
// every attempt is admitted and none is counted.
func (s *Service) BeginAuthentication(r *http.Request) (*AuthAttempt, error) {
	if s.keys == nil {
		return nil, nil
	}
	try, err := s.keys.Begin(r)
	if err != nil {
		return nil, err
	}
	return &AuthAttempt{try: try}, nil
}

// CreateAPIKeyParams describes a key to create. Its JSON form is the body of
// POST /api-keys.
type CreateAPIKeyParams struct {
	// Name says what the key is for. Required, at most 100 characters.
	Name string `json:"name"`
	// Scopes are the permissions the key grants. At least one.
	Scopes []Scope `json:"scopes"`
	// Actor is who acts with the key; events name it. Required.
	Actor Actor `json:"actor"`

	// Plaintext, when set, is used as the key instead of a random one; it
	// must be "lsk_" followed by at least 32 base62 characters. Hosts use
	// it to install a key they already hold (the demo's -admin-key). It
	// cannot be set over HTTP.
	Plaintext string `json:"-"`
}

func (p *CreateAPIKeyParams) validate() error {
	var v lifecycletype.Validator
	if p.Name == "" {
		v.Add("name", "is required")
	}
	v.MaxLen("name", p.Name, 100)
	if len(p.Scopes) == 0 {
		v.Add("scopes", "must list at least one scope")
	}
	for i, sc := range p.Scopes {
		if !sc.Valid() {
			v.Add(fmt.Sprintf("scopes[%d]", i), fmt.Sprintf("%q is not a scope", sc))
		}
	}
	p.Scopes = slices.Compact(slices.Sorted(slices.Values(p.Scopes)))
	if p.Actor.ID == "" {
		v.Add("actor.id", "is required")
	}
	v.MaxLen("actor.id", p.Actor.ID, maxAgentIDLen)
	if !p.Actor.Role.Valid() {
		v.Add("actor.role", "must be one of agent, reviewer, user, system")
	}
	if p.Plaintext != "" && !keyauth.Valid(p.Plaintext) {
		v.Add("plaintext", "must be lsk_ followed by at least 32 letters or digits")
	}
	return v.Err()
}

// CreateAPIKey stores a new API key and returns its record and its
// plaintext, which is not kept and cannot be shown again. Unlike POST
// /api-keys, it may create any key: the host is trusted.
//
// Installing a p.Plaintext that is already a key is idempotent when the
// installed key has the scopes asked for: CreateAPIKey returns the
// installed record, so a host may install its key at every start. When
// the installed key has other scopes, or is revoked, it returns a
// *KeyScopesError saying so and what to do, rather than leave the key
// with scopes the host did not ask for.
func (s *Service) CreateAPIKey(ctx context.Context, p CreateAPIKeyParams) (APIKey, string, error) {
	key, plaintext, err := s.createAPIKey(ctx, p, nil)
	var conflict *ConflictError
	if p.Plaintext == "" || !errors.As(err, &conflict) || conflict.Reason != "key_exists" {
		return key, plaintext, err
	}
	installed, err := s.store.APIKeyByHash(ctx, HashAPIKey(p.Plaintext))
	if err != nil {
		return APIKey{}, "", fmt.Errorf("read the installed API key: %w", err)
	}
	want := slices.Compact(slices.Sorted(slices.Values(p.Scopes)))
	have := slices.Compact(slices.Sorted(slices.Values(installed.Scopes)))
	if installed.RevokedAt != nil || !slices.Equal(want, have) {
		return APIKey{}, "", &KeyScopesError{KeyID: installed.ID, Installed: have, Requested: want, Revoked: installed.RevokedAt != nil}
	}
	return installed, p.Plaintext, nil
}

// KeyScopesError is CreateAPIKey's error when the plaintext it was given
// is already a key that it cannot install as asked: one with other
// scopes, or a revoked one. A key's scopes never change; the host gives
// another plaintext, or asks for the installed scopes.
type KeyScopesError struct {
	// KeyID is the installed key's ID.
	KeyID string
	// Installed are the installed key's scopes, Requested those asked for.
	Installed, Requested []Scope
	// Revoked is set when the installed key is revoked.
	Revoked bool
}

func (e *KeyScopesError) Error() string {
	if e.Revoked {
		return fmt.Sprintf("lifecycle: API key %s was revoked and cannot be installed again: give another plaintext (a new key)", e.KeyID)
	}
	return fmt.Sprintf("lifecycle: API key %s is already installed with scopes %v, not the requested %v; a key's scopes never change: "+
		"give another plaintext (a new key) and revoke this one (RevokeAPIKey or DELETE /api-keys/%s), or ask for the installed scopes",
		e.KeyID, e.Installed, e.Requested, e.KeyID)
}

// createAPIKey is CreateAPIKey with a hook that runs in the transaction
// that stores the key (the HTTP layer records the idempotent response
// there).
func (s *Service) createAPIKey(ctx context.Context, p CreateAPIKeyParams, respond func(tx Tx, key *APIKey, plaintext string) error) (APIKey, string, error) {
	if err := p.validate(); err != nil {
		return APIKey{}, "", err
	}
	plaintext := p.Plaintext
	if plaintext == "" {
		plaintext = keyauth.NewPlaintext()
	}
	key := APIKey{
		ID:        id.New("key_"),
		Name:      p.Name,
		Scopes:    p.Scopes,
		Actor:     p.Actor,
		CreatedAt: s.now(),
		Hash:      HashAPIKey(plaintext),
	}
	err := s.update(ctx, func(tx Tx) error {
		if err := tx.CreateAPIKey(ctx, key); err != nil {
			if errors.Is(err, ErrConflict) {
				return &ConflictError{Reason: "key_exists", Message: "That API key is already installed"}
			}
			return fmt.Errorf("create API key: %w", err)
		}
		if respond != nil {
			return respond(tx, &key, plaintext)
		}
		return nil
	})
	if err != nil {
		return APIKey{}, "", err
	}
	if s.keys != nil {
		s.keys.Learn(&key) // usable at once, without a read
	}
	return key, plaintext, nil
}

// APIKeys returns every API key record, revoked ones included.
func (s *Service) APIKeys(ctx context.Context) ([]APIKey, error) {
	keys, err := s.store.ListAPIKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return httpapi.NonNil(keys), nil
}

// RevokeAPIKey revokes a key; requests made with it are refused from then
// on. Revoking a revoked key changes nothing. It returns an error matching
// ErrNotFound when there is no such key.
func (s *Service) RevokeAPIKey(ctx context.Context, keyID string) (APIKey, error) {
	if !id.Valid(keyID, "key_") {
		return APIKey{}, notFound("API key", keyID)
	}
	var key APIKey
	err := s.update(ctx, func(tx Tx) error {
		k, err := tx.RevokeAPIKey(ctx, keyID, s.clock.Now())
		if errors.Is(err, ErrNotFound) {
			return notFound("API key", keyID)
		}
		if err != nil {
			return fmt.Errorf("revoke API key %s: %w", keyID, err)
		}
		key = k
		return nil
	})
	if err != nil {
		return APIKey{}, err
	}
	if s.keys != nil {
		s.keys.Forget(keyID)
	}
	s.streamKeys.Revoke(keyID) // its open streams end now
	return key, nil
}

// createdAPIKey is the response to POST /api-keys: the record and, this
// once, the plaintext; null in a replay.
type createdAPIKey struct {
	APIKey
	Key *string `json:"key"`
}

// apiKeysRoute is the route of key creation, for idempotency scopes.
const apiKeysRoute = "/api-keys"

// createdAPIKeyEnvelope is the body of a POST /api-keys response. Meta is
// set in a replay only.
type createdAPIKeyEnvelope struct {
	Data createdAPIKey  `json:"data"`
	Meta *keyReplayMeta `json:"meta,omitempty"`
}

// keyReplayMeta says why a replayed POST /api-keys holds no key.
type keyReplayMeta struct {
	// KeyOmitted is always true: the plaintext was shown once.
	KeyOmitted bool `json:"keyOmitted"`
	// Message says so in words.
	Message string `json:"message"`
}

// replay returns the answer replayed under the Idempotency-Key of the
// request that e answered: the key's record, without its plaintext.
func (e createdAPIKeyEnvelope) replay() createdAPIKeyEnvelope {
	return createdAPIKeyEnvelope{Data: createdAPIKey{APIKey: e.Data.APIKey}, Meta: &keyReplayMeta{KeyOmitted: true,
		Message: "The plaintext key was shown once, in the answer to the first request with this Idempotency-Key, and is not kept. " +
			"If that answer was lost, revoke " + e.Data.ID + " and create another key."}}
}

// apiKeyReplay returns the replay of a recorded answer to POST /api-keys.
// Answers are recorded without the plaintext and replayed as they are;
// those recorded by earlier versions held it (in the form of a webhook
// secret, sealed with Config.WebhookSecretKey when there was one) and are
// replayed without it.
func (s *Service) apiKeyReplay(scope IdempotencyScope, recorded []byte) ([]byte, error) {
	if len(recorded) > 0 && recorded[0] == '{' {
		return recorded, nil
	}
	opened, err := s.secrets.Open(idempotencyAAD(scope), recorded)
	if err != nil {
		return nil, fmt.Errorf("open an answer recorded by an earlier version: %w", err)
	}
	var env createdAPIKeyEnvelope
	if err := json.Unmarshal(opened, &env); err != nil {
		return nil, fmt.Errorf("decode an answer recorded by an earlier version: %w", err)
	}
	return httpapi.EncodeJSON(env.replay()), nil
}

// handleCreateAPIKey creates a key within the rules of package keyauth. With an
// Idempotency-Key the creation is idempotent like the API's others, except
// that its answer is recorded without the plaintext key: a replay answers
// the key's record with "key": null and meta.keyOmitted.
func (s *Service) handleCreateAPIKey(w http.ResponseWriter, r *http.Request, p *Principal) error {
	var params CreateAPIKeyParams
	check := func() error {
		if err := p.checkGrant(&params); err != nil {
			return err
		}
		return params.validate()
	}
	if _, ok := r.Header["Idempotency-Key"]; ok {
		keep := func(answer any) any { return answer.(createdAPIKeyEnvelope).replay() }
		req := keyedRequest{route: apiKeysRoute, status: http.StatusCreated, body: &params, check: check, keep: keep, replay: s.apiKeyReplay}
		return s.serveIdempotent(w, r, p, req,
			func(ctx context.Context, _ string, respond func(Tx, any) error) error {
				_, _, err := s.createAPIKey(ctx, params, func(tx Tx, key *APIKey, plaintext string) error {
					return respond(tx, createdAPIKeyEnvelope{Data: createdAPIKey{*key, &plaintext}})
				})
				return err
			})
	}
	if err := httpapi.DecodeAndCheck(w, r, &params, false, check); err != nil {
		return err
	}
	key, plaintext, err := s.createAPIKey(r.Context(), params, nil)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, createdAPIKeyEnvelope{Data: createdAPIKey{key, &plaintext}})
	return nil
}

func (s *Service) handleListAPIKeys(w http.ResponseWriter, r *http.Request, p *Principal) error {
	keys, err := s.APIKeys(r.Context())
	if err != nil {
		return err
	}
	httpapi.WriteData(w, http.StatusOK, keys)
	return nil
}

func (s *Service) handleRevokeAPIKey(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if !id.Valid(r.PathValue("id"), "key_") {
		return notFound("API key", r.PathValue("id"))
	}
	if err := s.checkRevoke(r.Context(), p, r.PathValue("id")); err != nil {
		return err
	}
	if _, err := s.RevokeAPIKey(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkGrant returns an error matching ErrInsufficientScope when p may not
// create a key with the scopes and actor of params (see
// keyauth.CheckGrant). Invalid scopes and roles are left to validation.
func (p *Principal) checkGrant(params *CreateAPIKeyParams) error {
	return keyauth.CheckGrant(p.Actor, p.Scopes, params.Actor, params.Scopes)
}

// checkRevoke returns an error matching ErrInsufficientScope when p may
// not revoke the key keyID (see keyauth.CheckRevoke), and ErrNotFound
// when there is no such key.
func (s *Service) checkRevoke(ctx context.Context, p *Principal, keyID string) error {
	keys, err := s.store.ListAPIKeys(ctx)
	if err != nil {
		return fmt.Errorf("list API keys: %w", err)
	}
	i := slices.IndexFunc(keys, func(k APIKey) bool { return k.ID == keyID })
	if i < 0 {
		return notFound("API key", keyID)
	}
	return keyauth.CheckRevoke(p.Actor, p.Scopes, &keys[i])
}
