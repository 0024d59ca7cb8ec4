package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tasklifecycle/lifecycle/internal/httpapi"
	"github.com/tasklifecycle/lifecycle/internal/idemkey"
	"github.com/tasklifecycle/lifecycle/lifecycletype"
)

// idempotencyKey reads and checks the Idempotency-Key header: 8 to 128
// visible ASCII characters.
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return "", lifecycletype.Invalid("Idempotency-Key", "header is required: 8 to 128 characters")
	}
	return key, checkIdempotencyKey(key, "Idempotency-Key")
}

// checkIdempotencyKey checks a key's form (see idemkey.Check), naming
// field when it is wrong.
func checkIdempotencyKey(key, field string) error {
	if reason := idemkey.Check(key); reason != "" {
		return lifecycletype.Invalid(field, reason)
	}
	return nil
}

// idempotentCall is one request made under an idempotency key that holds
// the key's reservation.
type idempotentCall struct {
	s           *Service
	scope       IdempotencyScope
	fingerprint []byte
	createdAt   time.Time
	lockedUntil time.Time // identifies this call's reservation
}

// beginIdempotent looks the key up. When the key answered an identical
// request before, it returns the record to replay. When the key is new (or
// forgotten, or its holder died), it reserves it and returns the call that
// must record its response or release the key. A key used for another
// request, or held by a request still running, is a *ConflictError that
// lists actions(ctx).
func (s *Service) beginIdempotent(ctx context.Context, scope IdempotencyScope, fp []byte, actions func(context.Context) []Action) (*idempotentCall, *IdempotencyRecord, error) {
	now := s.clock.Now()
	call := &idempotentCall{s: s, scope: scope, fingerprint: fp, createdAt: now}
	reservation := IdempotencyRecord{
		IdempotencyScope: scope,
		Fingerprint:      fp,
		CreatedAt:        now,
		ExpiresAt:        now.Add(s.cfg.IdempotencyRetention),
		LockedUntil:      now.Add(s.idempotencyLease()).Truncate(time.Millisecond), // as stored: it identifies the reservation
		Owner:            s.owner,
	}
	call.lockedUntil = reservation.LockedUntil
	var replay *IdempotencyRecord
	var conflict *ConflictError
	// The reservation may be lost in a power cut: the request then changed
	// nothing, and its retry runs again. So it need not wait for the disk.
	err := s.updateRelaxed(ctx, func(tx Tx) error {
		replay, conflict = nil, nil
		return tx.UpdateIdempotencyRecord(ctx, scope, func(rec *IdempotencyRecord) (*IdempotencyRecord, error) {
			switch {
			case rec == nil:
				return &reservation, nil
			case !now.Before(rec.ExpiresAt):
				return &reservation, nil // forgotten: a new key
			case !bytes.Equal(rec.Fingerprint, fp):
				conflict = &ConflictError{Reason: "idempotency_key_reused",
					Message: "This Idempotency-Key was used for a different request; use a new key for a new request"}
				return nil, errKeepRecord
			case rec.Done:
				replay = rec
				return nil, errKeepRecord
			case now.Before(rec.LockedUntil) && !(rec.Owner == s.owner && !s.inflight.Has(scope)):
				// Held by a live request; a reservation of this instance that no
				// request of this life holds was left by its earlier life.
				conflict = &ConflictError{Reason: "request_in_progress",
					Message: "A request with this Idempotency-Key is still being processed; retry it later to get its result"}
				return nil, errKeepRecord
			}
			// The request holding the key died before it finished: take over.
			reservation.CreatedAt = rec.CreatedAt
			call.createdAt = rec.CreatedAt
			return &reservation, nil
		})
	})
	if errors.Is(err, errKeepRecord) {
		err = nil // answered from the record as it is
	}
	if errors.Is(err, ErrConflict) {
		// Another process reserved the key between our read and insert.
		conflict, err = &ConflictError{Reason: "request_in_progress",
			Message: "A request with this Idempotency-Key is still being processed; retry it later to get its result"}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("idempotency key: %w", err)
	}
	if conflict != nil {
		conflict.AvailableActions = actions(ctx)
		return nil, nil, conflict
	}
	if replay != nil {
		return nil, replay, nil
	}
	s.inflight.Add(scope)
	return call, nil, nil
}

// inflightKeys are the idempotency keys the requests of this life hold.
type inflightKeys = idemkey.Held[IdempotencyScope]

// idempotencyLease is how long a reservation is held before another
// request may take the key over.
func (s *Service) idempotencyLease() time.Duration {
	return s.cfg.ProviderTimeout + 30*time.Second
}

// record stores the response of the call in tx, the transaction of the
// change it answers for.
func (c *idempotentCall) record(ctx context.Context, tx Tx, status int, body []byte) error {
	return tx.UpdateIdempotencyRecord(ctx, c.scope, func(rec *IdempotencyRecord) (*IdempotencyRecord, error) {
		if rec == nil {
			return nil, fmt.Errorf("idempotency key: %w", ErrNotFound)
		}
		if rec.Done || !bytes.Equal(rec.Fingerprint, c.fingerprint) || !rec.LockedUntil.Equal(c.lockedUntil) {
			return nil, &ConflictError{Reason: "request_in_progress",
				Message: "Another request with this Idempotency-Key took it over or finished first; retry to get its result"}
		}
		now := c.s.clock.Now()
		return &IdempotencyRecord{
			IdempotencyScope: c.scope,
			Fingerprint:      c.fingerprint,
			Done:             true,
			StatusCode:       status,
			Body:             body,
			CreatedAt:        c.createdAt,
			ExpiresAt:        now.Add(c.s.cfg.IdempotencyRetention),
			LockedUntil:      now,
			Owner:            c.s.owner,
		}, nil
	})
}

// storeRetryWait is how long a release the Store failed waits before it
// is tried again (as long as the ship runner waits to retry what the
// Store failed).
const storeRetryWait = time.Second

// release gives the key up after a request that changed nothing failed,
// so that a retry with the same key runs again. When the Store fails (the
// request itself failed for that, often), a started Service tries again
// every storeRetryWait in the background until the release succeeds or
// the reservation's lease ends: a retry that another process gets would
// otherwise be told request_in_progress until then, long after the
// Store's return.
func (c *idempotentCall) release(ctx context.Context) {
	err := c.tryRelease(context.WithoutCancel(ctx))
	if err == nil {
		return
	}
	again := c.s.goStarted(func(ctx context.Context) {
		for c.s.clock.Now().Before(c.lockedUntil) && c.s.pause(ctx, storeRetryWait) {
			if c.tryRelease(ctx) == nil {
				return
			}
		}
	})
	if again {
		c.s.log.WarnContext(ctx, "release idempotency key; trying again every second until its lease ends", "err", err)
	} else {
		c.s.log.WarnContext(ctx, "release idempotency key; it frees itself when its lease ends", "err", err)
	}
}

// tryRelease deletes the call's reservation, unless the request finished
// or another took the key over.
func (c *idempotentCall) tryRelease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// Losing the release in a power cut is harmless: the lease frees the key.
	err := c.s.updateRelaxed(ctx, func(tx Tx) error {
		return tx.UpdateIdempotencyRecord(ctx, c.scope, func(rec *IdempotencyRecord) (*IdempotencyRecord, error) {
			if rec != nil && (rec.Done || !bytes.Equal(rec.Fingerprint, c.fingerprint) || !rec.LockedUntil.Equal(c.lockedUntil)) {
				return nil, errKeepRecord // finished, or taken over by another request: not ours to release
			}
			return nil, nil // deleted, if still there
		})
	})
	if errors.Is(err, errKeepRecord) {
		return nil
	}
	return err
}

// errKeepRecord leaves an idempotency record as it is: a function passed
// to [Tx.UpdateIdempotencyRecord] returns it to store nothing.
var errKeepRecord = errors.New("idempotency record kept as it is")

// writeReplay answers with a recorded response, byte for byte.
func writeReplay(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Idempotent-Replayed", "true")
	httpapi.WriteRaw(w, status, body)
}

// idempotentRequest reads what an idempotent handler needs: the key, and
// the request body, decoded into dst by httpapi.DecodeAndCheck, with its
// fingerprint.
func idempotentRequest(w http.ResponseWriter, r *http.Request, p *Principal, route, resourceID string, dst any, check func() error) (IdempotencyScope, []byte, error) {
	key, keyErr := idempotencyKey(r)
	raw, release, err := httpapi.ReadBody(w, r)
	if err != nil {
		return IdempotencyScope{}, nil, err
	}
	defer release()
	err = httpapi.DecodeRaw(r.Context(), raw, dst, &scanLimits, false, check)
	if keyErr != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.Fields = append([]FieldError{keyErr.(*ValidationError).Fields[0]}, ve.Fields...)
			return IdempotencyScope{}, nil, ve
		}
		return IdempotencyScope{}, nil, keyErr
	}
	if err != nil {
		return IdempotencyScope{}, nil, err
	}
	canonical, err := idemkey.Canonical(raw)
	if err != nil {
		return IdempotencyScope{}, nil, lifecycletype.Invalid("body", "is not valid JSON")
	}
	scope := IdempotencyScope{PrincipalID: p.ID, Method: r.Method, Route: route, ResourceID: resourceID, Key: key}
	return scope, idemkey.Fingerprint(r.Method, route, canonical), nil
}

// keyedRequest is what an idempotent request of the HTTP API says about
// itself: the route and resource that scope its key, where its body goes,
// and how its answer is recorded and replayed.
type keyedRequest struct {
	route      string // the route pattern, such as "/tasks/{id}/ship"
	resourceID string // the resource of the path, or ""
	status     int    // the status of an answer that ran

	body  any          // what the body is decoded into
	check func() error // checks the decoded body

	// actions, when not nil, lists the resource's next steps in a
	// conflict.
	actions func(context.Context) []Action
	// lockTask, when not empty, is the task whose lock is taken before
	// the key is reserved, so that a request waiting for the lock cannot
	// outlive its reservation.
	lockTask string
	// keep, when not nil, turns the answer given to respond into the one
	// recorded: without a secret shown once (a new API key's plaintext),
	// which replays then leave out.
	keep func(answer any) any
	// replay, when not nil, turns a recorded answer into the one replayed
	// (records kept by earlier versions held the secret); it is given the
	// record's scope.
	replay func(scope IdempotencyScope, recorded []byte) ([]byte, error)
}

// serveIdempotent runs an idempotent mutation for the HTTP layer: it reads
// the key and the body as req says, replays a recorded answer or refuses a
// reused key, and otherwise calls run, whose respond records the response
// body in the transaction of the change; that body is then written with
// req.status. A run that fails releases the key.
func (s *Service) serveIdempotent(w http.ResponseWriter, r *http.Request, p *Principal, req keyedRequest,
	run func(ctx context.Context, key string, respond func(tx Tx, body any) error) error) error {
	scope, fp, err := idempotentRequest(w, r, p, req.route, req.resourceID, req.body, req.check)
	if err != nil {
		return err
	}
	ctx := httpapi.RequestContext(r)
	if req.lockTask != "" {
		unlock, err := s.taskLocks.lock(ctx, req.lockTask)
		if err != nil {
			return err
		}
		defer unlock()
	}
	body, replayed, err := s.runIdempotent(ctx, scope, fp, req.status, req.actions, req.keep, func(ctx context.Context, respond func(Tx, any) error) error {
		return run(ctx, scope.Key, respond)
	})
	if err != nil {
		return err
	}
	if replayed != nil {
		body := replayed.Body
		if req.replay != nil {
			if body, err = req.replay(scope, body); err != nil {
				return fmt.Errorf("replay the recorded response: %w", err)
			}
		}
		writeReplay(w, replayed.StatusCode, body)
		return nil
	}
	httpapi.WriteRaw(w, req.status, body)
	return nil
}

// idempotencyAAD is the additional data under which earlier versions
// sealed a recorded answer of scope with Config.WebhookSecretKey.
func idempotencyAAD(scope IdempotencyScope) string {
	return scope.PrincipalID + "\n" + scope.Method + " " + scope.Route + "\n" + scope.ResourceID + "\n" + scope.Key
}

// runIdempotent runs a mutation under an idempotency key: it returns the
// recorded answer of an identical earlier request (replayed), refuses a key
// used for another request or still running, and otherwise calls run, whose
// respond records the response body, with status, in the transaction of
// the change (as keep turns it, when not nil: without a secret, say). A
// run that fails releases the key.
func (s *Service) runIdempotent(ctx context.Context, scope IdempotencyScope, fp []byte, status int, actions func(context.Context) []Action,
	keep func(any) any, run func(ctx context.Context, respond func(tx Tx, body any) error) error) (body []byte, replayed *IdempotencyRecord, err error) {
	if actions == nil {
		actions = func(context.Context) []Action { return nil }
	}
	call, replay, err := s.beginIdempotent(ctx, scope, fp, actions)
	if err != nil {
		s.countKeyConflict(ctx, scope.Route, err)
		return nil, nil, err
	}
	if replay != nil {
		s.tel.IdempotencyReplay(ctx, scope.Route)
		return nil, replay, nil
	}
	defer s.inflight.Done(scope)
	err = run(ctx, func(tx Tx, v any) error {
		body = httpapi.EncodeJSON(v)
		kept := body
		if keep != nil {
			kept = httpapi.EncodeJSON(keep(v))
		}
		return call.record(ctx, tx, status, kept)
	})
	if err != nil {
		s.countKeyConflict(ctx, scope.Route, err) // another call took the key over meanwhile
		call.release(ctx)
		return nil, nil, err
	}
	return body, nil, nil
}

// countKeyConflict counts err in lifecycle.idempotency.conflicts when it
// refuses a request for its Idempotency-Key: used with another request,
// or held by another call.
func (s *Service) countKeyConflict(ctx context.Context, route string, err error) {
	var conflict *ConflictError
	if errors.As(err, &conflict) && (conflict.Reason == "idempotency_key_reused" || conflict.Reason == "request_in_progress") {
		s.tel.IdempotencyConflict(ctx, route)
	}
}

// goIdempotentData is goIdempotent for a mutation that answers
// {"data": T}: run makes the T, recording envelope(&T) through respond in
// the transaction of its change, and an identical earlier call's recorded
// data is returned instead of running again.
func goIdempotentData[T any](s *Service, ctx context.Context, actor Actor, route, resourceID, key string, params any,
	envelope func(*T) any, run func(ctx context.Context, respond func(Tx, *T) error) (T, error)) (T, error) {
	if key == "" { // nothing is recorded: no envelope to build
		return run(ctx, func(Tx, *T) error { return nil })
	}
	var out T
	replayed, err := s.goIdempotent(ctx, actor, route, resourceID, key, params, func(ctx context.Context, respond func(Tx, any) error) error {
		var err error
		out, err = run(ctx, func(tx Tx, v *T) error { return respond(tx, envelope(v)) })
		return err
	})
	if err != nil || replayed == nil {
		return out, err
	}
	var env struct {
		Data T `json:"data"`
	}
	if err := json.Unmarshal(replayed, &env); err != nil {
		return out, fmt.Errorf("decode the answer recorded for %s %s: %w", route, resourceID, err)
	}
	return env.Data, nil
}

// goIdempotent runs a mutation of the Go API under key with the rules of
// the HTTP API: the scope is the actor's, the fingerprint that of params'
// JSON form (the request body it stands for). With no key, run simply
// runs. It returns the recorded response body when an identical call was
// answered before.
func (s *Service) goIdempotent(ctx context.Context, actor Actor, route, resourceID, key string, params any,
	run func(ctx context.Context, respond func(tx Tx, body any) error) error) ([]byte, error) {
	if key == "" {
		return nil, run(ctx, func(Tx, any) error { return nil })
	}
	if err := checkIdempotencyKey(key, "IdempotencyKey"); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("idempotency fingerprint: %w", err)
	}
	canonical, err := idemkey.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("idempotency fingerprint: %w", err)
	}
	if actor.ID == "" {
		actor = SystemActor()
	}
	scope := IdempotencyScope{PrincipalID: "actor:" + string(actor.Role) + ":" + actor.ID, Method: http.MethodPost, Route: route, ResourceID: resourceID, Key: key}
	_, replayed, err := s.runIdempotent(ctx, scope, idemkey.Fingerprint(http.MethodPost, route, canonical), http.StatusOK, nil, nil, run)
	if err != nil || replayed == nil {
		return nil, err
	}
	noteReplay(ctx) // once.go
	return replayed.Body, nil
}
