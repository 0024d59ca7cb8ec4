package console

import (
	"reflect"
	"testing"
)

// TestMembers: a card copies members of a struct by their JSON names, as
// encoding/json encodes them, and gives the empty value for a member the
// struct lacks, or holds as nil or null.
func TestMembers(t *testing.T) {
	t.Parallel()
	type stalled struct {
		Since          string `json:"since"`
		LastActivityAt string `json:"lastActivityAt"`
	}
	type withThem struct {
		ID        string   `json:"id"`
		Stalled   *stalled `json:"stalled"`
		WaitingOn []string `json:"waitingOn,omitempty"`
		Hidden    []string `json:"-"`
	}
	type withoutThem struct {
		ID string `json:"id"`
	}
	m := findMembers(reflect.TypeFor[withThem](), "stalled", "waitingOn", "absent")
	for _, tc := range []struct {
		name          string
		v             any
		m             members
		stalled, deps string
	}{
		{"set", &withThem{Stalled: &stalled{Since: "2026-11-29T10:00:00.000Z", LastActivityAt: "2026-11-29T09:00:00.000Z"}, WaitingOn: []string{"tsk_a", "tsk_b"}}, m,
			`{"since":"2026-11-29T10:00:00.000Z","lastActivityAt":"2026-11-29T09:00:00.000Z"}`, `["tsk_a","tsk_b"]`},
		{"nil", &withThem{}, m, "null", "[]"},
		{"empty slice", &withThem{WaitingOn: []string{}}, m, "null", "[]"},
		{"not in the type", &withoutThem{ID: "x"}, findMembers(reflect.TypeFor[withoutThem](), "stalled", "waitingOn"), "null", "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.m.get(tc.v, "stalled", "null")); got != tc.stalled {
				t.Errorf("stalled = %s, want %s", got, tc.stalled)
			}
			if got := string(tc.m.get(tc.v, "waitingOn", "[]")); got != tc.deps {
				t.Errorf("waitingOn = %s, want %s", got, tc.deps)
			}
		})
	}
	if _, ok := m.index["absent"]; ok {
		t.Error("a name no field has was found")
	}
	if _, ok := findMembers(reflect.TypeFor[withThem](), "-").index["-"]; ok {
		t.Error("a field left out of the encoding was found")
	}
}
