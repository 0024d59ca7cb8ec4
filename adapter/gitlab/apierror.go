package gitlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/tasklifecycle/lifecycle"
)

// apiError is GitLab's JSON error body, {"message": ...} or {"error":
// ...}. Its message is a string ("405 Method Not Allowed"), an array of
// strings, or, for a model that failed validation, an object of the
// model's errors keyed by attribute, each a list of strings
// ({"message":{"source_branch":["does not exist"]}}) or an object of an
// embedded entity's errors.
type apiError struct {
	// text is the message in words.
	text string
	// fields are the validation errors by attribute ("source_branch"; an
	// embedded entity's as "entity.attribute"), if any.
	fields map[string][]string
}

// parseAPIError reads GitLab's error body of a failed call of client-go.
func parseAPIError(err error) apiError {
	var er *gl.ErrorResponse
	if !errors.As(err, &er) {
		return apiError{text: err.Error()}
	}
	var body struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(er.Body, &body) != nil || (len(body.Message) == 0 && body.Error == "") {
		if er.Message != "" {
			return apiError{text: er.Message}
		}
		return apiError{text: err.Error()}
	}
	if len(body.Message) == 0 || string(body.Message) == "null" {
		return apiError{text: body.Error}
	}
	var msg any
	if json.Unmarshal(body.Message, &msg) != nil {
		return apiError{text: string(body.Message)}
	}
	out := apiError{}
	if obj, ok := msg.(map[string]any); ok {
		out.fields = map[string][]string{}
		collectFields(out.fields, "", obj)
		keys := make([]string, 0, len(out.fields))
		for k := range out.fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+" "+strings.Join(out.fields[k], ", "))
		}
		out.text = strings.Join(parts, "; ")
		return out
	}
	out.text = strings.Join(texts(msg), "; ")
	return out
}

// collectFields flattens GitLab's validation errors into fields.
func collectFields(fields map[string][]string, prefix string, obj map[string]any) {
	for k, v := range obj {
		if sub, ok := v.(map[string]any); ok {
			collectFields(fields, prefix+k+".", sub)
			continue
		}
		fields[prefix+k] = append(fields[prefix+k], texts(v)...)
	}
}

// texts returns the strings of a message that is a string or an array.
func texts(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, texts(e)...)
		}
		return out
	case nil:
		return nil
	}
	return []string{fmt.Sprint(v)}
}

// message returns GitLab's own message of a failed call.
func message(err error) string {
	return parseAPIError(err).text
}

// mergeRequestRefused turns GitLab's refusal (400 or 422) to open a merge
// request from source into target into a *lifecycle.ValidationError:
// errors of source_branch are on pullRequest.head, of target_branch on
// pullRequest.base, others on pullRequest. A message in words (older
// GitLab: "Source branch \"x\" does not exist") is placed by what it
// names.
func mergeRequestRefused(source, target string, e apiError) *lifecycle.ValidationError {
	prefix := fmt.Sprintf("GitLab refused a merge request from %s into %s: ", source, target)
	var fes []lifecycle.FieldError
	for attr, msgs := range e.fields {
		fe := lifecycle.FieldError{Field: "pullRequest", Reason: prefix + attr + " " + strings.Join(msgs, ", ")}
		switch attr {
		case "source_branch":
			fe.Field = "pullRequest.head"
			fe.Reason += fmt.Sprintf(" (push %s before submitting)", source)
		case "target_branch":
			fe.Field = "pullRequest.base"
		}
		fes = append(fes, fe)
	}
	if len(fes) == 0 {
		fe := lifecycle.FieldError{Field: "pullRequest", Reason: prefix + e.text}
		switch low := strings.ToLower(e.text); {
		case strings.Contains(low, "source branch") || strings.Contains(low, "source_branch"):
			fe.Field = "pullRequest.head"
		case strings.Contains(low, "target branch") || strings.Contains(low, "target_branch"):
			fe.Field = "pullRequest.base"
		}
		fes = append(fes, fe)
	}
	slices.SortFunc(fes, func(x, y lifecycle.FieldError) int { return strings.Compare(x.Field+x.Reason, y.Field+y.Reason) })
	return &lifecycle.ValidationError{Fields: fes}
}
