package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tasklifecycle/lifecycle"
	"github.com/tasklifecycle/lifecycle/internal/idemkey"
)

// toolDef describes a tool to a client: what the model reads, and what
// the server checks first.
type toolDef struct {
	name, title, description string
	scope                    lifecycle.Scope
	readOnly, destructive    bool
	// idempotent: calling again with the same arguments changes nothing
	// more (every tool here, reads by nature, changes by their keys).
	idempotent bool
	waits      bool // waits up to its caller's timeout, not CallTimeout
	in, out    *jsonschema.Schema
}

// tool is a registered tool: its definition, its resolved input schema
// and what it runs.
type tool struct {
	def    toolDef
	in     *jsonschema.Resolved
	decode func(json.RawMessage) error // decodeArgs for the tool's arguments
	// invoke runs a call of the principal with the raw arguments, and
	// returns the answer encoded once: the structured content, or, when
	// isError, the API's error body. The SDK's path and the fast path
	// (fastpath.go) both serve calls through it. result, when not nil, is
	// the CallToolResult of raw as appendToolResult encodes it, kept with
	// the answer (see encodedAnswer).
	invoke func(ctx context.Context, p *lifecycle.Principal, args json.RawMessage) (raw, result []byte, isError bool)
}

// call is one tool call: who calls, which tool.
type call struct {
	p    *lifecycle.Principal
	tool string
}

// addTool builds a tool whose arguments decode into In; run returns
// the answer, encoded as the tool's structured content and, for models
// that read only text, as its text content too.
func addTool[In any](h *Handler, def toolDef, run func(ctx context.Context, c *call, in *In) (any, error)) error {
	resolved, err := def.in.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return fmt.Errorf("mcp: tool %s: input schema: %w", def.name, err)
	}
	if _, err := def.out.Resolve(nil); err != nil {
		return fmt.Errorf("mcp: tool %s: output schema: %w", def.name, err)
	}
	t := &tool{def: def, in: resolved, decode: func(raw json.RawMessage) error {
		_, err := decodeArgs[In](raw)
		return err
	}}
	t.invoke = func(ctx context.Context, p *lifecycle.Principal, args json.RawMessage) ([]byte, []byte, bool) {
		if err := needScope(p, def.scope, "The tool "+def.name); err != nil {
			return h.toolError(ctx, def.name, err), nil, true
		}
		in, err := decodeArgs[In](args)
		if err != nil {
			return h.toolError(ctx, def.name, err), nil, true
		}
		asked := ctx
		if !def.waits {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, h.cfg.CallTimeout)
			defer cancel()
		}
		out, err := run(ctx, &call{p: p, tool: def.name}, in)
		if err != nil {
			if ctx.Err() != nil && asked.Err() == nil && errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("the call did not finish within %s: %w", h.cfg.CallTimeout, lifecycle.ErrUnavailable)
			}
			return h.toolError(ctx, def.name, err), nil, true
		}
		if a, ok := out.(encodedAnswer); ok {
			return a.raw, a.result, false
		}
		raw, err := encodeJSON(out)
		if err != nil {
			return h.toolError(ctx, def.name, err), nil, true
		}
		return raw, nil, false
	}
	if h.toolSet == nil {
		h.toolSet = map[string]*tool{}
	}
	h.toolSet[def.name] = t
	destructive := def.destructive
	openWorld := false
	h.tools = append(h.tools, registeredTool{&sdk.Tool{
		Name:        def.name,
		Title:       def.title,
		Description: def.description + " Needs an API key with scope " + string(def.scope) + ".",
		InputSchema: def.in, OutputSchema: def.out,
		Annotations: &sdk.ToolAnnotations{Title: def.title, ReadOnlyHint: def.readOnly, DestructiveHint: &destructive,
			IdempotentHint: def.idempotent, OpenWorldHint: &openWorld},
	}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		p, err := principalOf(req.Extra)
		if err != nil {
			return errorResult(h.toolError(ctx, def.name, err)), nil
		}
		if req.Session != nil {
			if s := h.live.get(req.Session.ID()); s != nil {
				ctx = context.WithValue(ctx, credentialEndedKey{}, s.credentialEnded())
			}
		}
		raw, _, isError := t.invoke(ctx, p, req.Params.Arguments)
		if isError {
			return errorResult(raw), nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(raw)}}, StructuredContent: json.RawMessage(raw)}, nil
	}})
	return nil
}

// credentialEndedKey is the context key of the channel closed when the
// credential of a call's session ends, for calls that wait.
type credentialEndedKey struct{}

// credentialEnded returns the channel closed when the credential of the
// session of ctx's call ends, or nil (never) outside a session.
func credentialEnded(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(credentialEndedKey{}).(<-chan struct{})
	return ch
}

// registeredTool is a tool as every server of the Handler adds it.
type registeredTool struct {
	tool    *sdk.Tool
	handler sdk.ToolHandler
}

// decodeArgs decodes a call's arguments, refusing unknown members and
// members of the wrong type, then checks them (see check.go). A refusal
// is a validation_error naming each member that is wrong.
func decodeArgs[In any](raw json.RawMessage) (*In, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	in := new(In)
	if sc, ok := any(in).(scanned); !ok || !sc.scan(raw) {
		*in = *new(In) // what a scan that gave up may have set
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(in); err != nil {
			return nil, invalidArgument("arguments", decodeReason(err))
		}
	}
	var c checker
	if ck, ok := any(in).(checked); ok {
		ck.check(&c)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return in, nil
}

// scanned is arguments that decode without reflection in the common case:
// scan sets them from raw and reports whether it could, as encoding/json
// would have; when it could not (a member it does not know, an escape, a
// value of another type), decodeArgs decodes them as usual, and says why
// they are wrong.
type scanned interface {
	scan(raw []byte) bool
}

// scan implements scanned: members taskId and tokenBudget, plain strings.
func (in *getTaskIn) scan(raw []byte) bool {
	return scanObject(raw, func(key string, v []byte) bool {
		s, ok := plainString(v)
		switch {
		case !ok:
			return false
		case key == "taskId":
			in.TaskID = s
		case key == "tokenBudget":
			in.TokenBudget = s
		default:
			return false
		}
		return true
	})
}

// decodeReason says why arguments did not decode, naming the member.
func decodeReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("member %s must be a JSON %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return "must be a JSON object of the tool's input schema: " + strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names a Go kind as JSON does.
func jsonKind(k string) string {
	switch {
	case k == "string":
		return "string"
	case k == "bool":
		return "boolean"
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"), strings.HasPrefix(k, "float"):
		return "number"
	case k == "slice" || k == "array":
		return "array"
	}
	return "object"
}

// toolError is the text of the result of a call that failed: the API's
// error body ({"error": {"code", "message", "details"}},
// details.availableActions naming the task's next steps on a conflict),
// marked isError by its caller so that the model reads it and acts on it.
// Failures that are not the caller's are logged.
func (h *Handler) toolError(ctx context.Context, name string, err error) []byte {
	status, body := h.svc.APIError(err)
	switch {
	case status == http.StatusServiceUnavailable:
		h.log.WarnContext(ctx, "mcp: tool call refused: the service is unavailable", "tool", name, "err", err)
	case status >= 500:
		h.log.ErrorContext(ctx, "mcp: tool call failed", "tool", name, "err", err)
	}
	raw, encErr := encodeJSON(body)
	if encErr != nil {
		raw = []byte(`{"error":{"code":"internal","message":"The server failed to encode its answer."}}`)
	}
	return raw
}

// errorResult is the SDK's result of a call that failed, whose text is
// the API's error body.
func errorResult(raw []byte) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(raw)}}}
}

// encodeJSON encodes v on one line without HTML escaping, as the API
// writes its bodies.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(2048)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode the answer: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// key returns the idempotency key of a mutating call: derived from the
// caller's principal, the tool and the canonical form of its arguments
// (without any key), or from the principal, the tool and the key the
// caller gave. The Service scopes it further by actor, route and task, and
// records the call's answer under it in the transaction of the change, as
// it does for the API's Idempotency-Key.
func (c *call) key(given string, args any) (string, error) {
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%s\x00", c.p.ID, c.tool)
	if given != "" {
		fmt.Fprintf(sum, "key\x00%s", given)
	} else {
		raw, err := json.Marshal(args)
		if err != nil {
			return "", fmt.Errorf("derive the idempotency key: %w", err)
		}
		canonical, err := idemkey.Canonical(raw)
		if err != nil {
			return "", fmt.Errorf("derive the idempotency key: %w", err)
		}
		fmt.Fprintf(sum, "args\x00%s", canonical)
	}
	return "mcp-" + base64.RawURLEncoding.EncodeToString(sum.Sum(nil)), nil
}

// invalidArgument is the validation error of one argument.
func invalidArgument(name, reason string) error {
	return &lifecycle.ValidationError{Fields: []lifecycle.FieldError{{Field: name, Reason: reason}}}
}

// maxRepeats bounds how often the same call may be made again on purpose
// within the retention of its records without a key of the caller's.
const maxRepeats = 16

// once runs a mutating call under its idempotency key (see call.key).
// With a key the caller gave, the Service's rules apply as they are. With
// a derived key, a call answered from the record of an earlier identical
// call is a retry only while that answer is still the task's present, as
// current says: a retry after a lost answer finds the task as the first
// call left it. Otherwise the same call is being made again on purpose (a
// second blocker, a start for rework, a ship after a failed one): it runs
// under the next key of the chain, derived from the earlier answer (link
// names it), so that its own retries find it in turn.
func once[T any](ctx context.Context, h *Handler, c *call, given string, args any, taskID string,
	run func(ctx context.Context, key string) (T, error), current func(*T, *lifecycle.Task) bool, link func(*T) string) (T, error) {
	var zero T
	key, err := c.key(given, args)
	if err != nil {
		return zero, err
	}
	if given != "" {
		return run(ctx, key)
	}
	for range maxRepeats {
		noted, replayed := lifecycle.NoteReplays(ctx)
		answer, err := run(noted, key)
		if err != nil || !replayed() {
			return answer, err
		}
		t, err := h.svc.Task(ctx, taskID)
		if err != nil || current(&answer, &t) {
			return answer, nil // a retry: the first call's answer
		}
		sum := sha256.Sum256([]byte(key + "\x00" + link(&answer)))
		key = "mcp-" + base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return zero, &lifecycle.ConflictError{Reason: "idempotency_key_reused",
		Message: fmt.Sprintf("The same call was made %d times; give an idempotencyKey of your own to make it again", maxRepeats)}
}

// taskStillCurrent says whether a task a change answered is the task as it
// is: nothing changed it since.
func taskStillCurrent(answered, now *lifecycle.Task) bool {
	return answered.UpdatedAt.Equal(now.UpdatedAt.Time) && answered.Status == now.Status
}

// taskLink names the answer of a change of a task, for the next key.
func taskLink(t *lifecycle.Task) string { return t.UpdatedAt.String() + " " + string(t.Status) }
